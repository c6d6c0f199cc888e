#!/bin/bash
# Profiles the 3-hop rocefab path of `cargo xtask bench --fabric` (topologies/bench-3hop.yaml)
# under one iperf3 TCP stream: `perf record -a -g` for 5 s, then the share of each process and
# the top symbols. Needs root, perf (linux-perf), iperf3 and the release binaries
# (`cargo xtask bench --fabric` builds them). The fabric is taken down on exit, also on error.
set -eu
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
B="$ROOT/target/release"
T=$(mktemp -d)
trap '"$B/rocefab" down fbench3 >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
cd "$ROOT"
"$B/rocefab" up topologies/bench-3hop.yaml > "$T/up.log" 2>&1 || { cat "$T/up.log"; exit 1; }
NSA=$(ip netns list | awk '{print $1}' | grep 'fbench3-host1$')
NSB=$(ip netns list | awk '{print $1}' | grep 'fbench3-host2$')
IPB=$(ip -n "$NSB" -4 -o addr show | awk '$2!="lo"{print $4}' | cut -d/ -f1 | head -1)
ip netns exec "$NSB" iperf3 -s -1 -D
sleep 0.5
ip netns exec "$NSA" iperf3 -c "$IPB" -t 12 -J > "$T/iperf.json" &
sleep 3
perf record -a -g -o "$T/perf.data" -- sleep 5 >/dev/null 2>&1
wait
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('iperf3 Gbit/s', d['end']['sum_received']['bits_per_second']/1e9)" "$T/iperf.json"
perf report -i "$T/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12
perf report -i "$T/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25
