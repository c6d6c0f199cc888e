#!/usr/bin/env bash
# Runs the 512-rank 1 MiB ring AllReduce of topologies/multi-pod-512gpu.yaml in htsim (issue 41),
# at the yaml's rates and at 400x them, and writes allreduce-results.json next to this script
# (README.md, "The 512-rank ring AllReduce (issue 41)", says what each field is).
#
# As run.sh: htsim itself is not in this repository and this script does not fetch or build it.
# Build the UEC htsim (github.com/ultraethernet/uet-htsim) at the commit in PINNED below as its
# README says, point HTSIM_SIM at its htsim/sim directory; this script compiles only our driver,
# ring_allreduce.cpp, against htsim's headers and the two static libraries its build leaves.
#
#   HTSIM_SIM=/path/to/uet-htsim/htsim/sim sim/htsim/run_allreduce.sh
#
# Each run is one process, one after the other, cut at RUN_LIMIT_S (default 600) s of wall clock.
set -euo pipefail

PINNED=40ccb0526bb6297eeb22ab33f9934fb35278dbaf
here=$(cd "$(dirname "$0")" && pwd)
: "${HTSIM_SIM:?set HTSIM_SIM to uet-htsim/htsim/sim, built at commit $PINNED (README.md)}"
libs=${HTSIM_LIBS:-"$HTSIM_SIM/build/datacenter/libhtsim_dc.a $HTSIM_SIM/build/libhtsim.a"}
commit=${HTSIM_COMMIT:-$(git -C "$HTSIM_SIM" rev-parse HEAD 2>/dev/null || echo unknown)}
if [ "$commit" != "$PINNED" ]; then
    echo "warning: htsim commit is $commit, the results in this directory are from $PINNED" >&2
fi
work=${WORK_DIR:-$(mktemp -d /tmp/rocefab-htsim-allreduce.XXXXXX)}
mkdir -p "$work"
# shellcheck disable=SC2086 # $libs is a list of files
g++ -std=c++17 -O2 -w -I"$HTSIM_SIM" -I"$HTSIM_SIM/datacenter" "$here/ring_allreduce.cpp" $libs \
    -o "$work/ring_allreduce"

# name | driver arguments | note. The first two are issue 41's runs; the others are diagnostics
# that README.md uses to explain differences (they are not rocefab's fabric).
runs=(
    "1g|-host_gbps 1 -fabric_gbps 8|multi-pod-512gpu.yaml as written: host-rail 1 Gbit/s, rail-spine and spine-super-spine 8 Gbit/s, no cable or switch delay"
    "400g|-host_gbps 400 -fabric_gbps 3200|the 400G version: every rate x400. htsim times a byte in whole picoseconds (queue.cpp:13), so its 3.2 Tbit/s links run at 2 ps/byte = 4 Tbit/s; jct_ns_at_exact_rates is the 1g run's JCT / 400"
    "diag-400g-fabric4000|-host_gbps 400 -fabric_gbps 4000|diagnostic: fabric links at 4 Tbit/s, what htsim makes of 3.2 Tbit/s; the same JCT as the 400g run"
    "diag-1g-fabric1000|-host_gbps 1 -fabric_gbps 1000|diagnostic: fabric links at 1 Tbit/s, so no two packets meet on them; compare ring_chain_model.py 1 1000"
    "diag-1g-link1us|-host_gbps 1 -fabric_gbps 8 -link_ns 1000|diagnostic, not rocefab's fabric: a 1 us delay on every link (htsim main_roce.cpp's default -hop_latency)"
    "diag-400g-link1us|-host_gbps 400 -fabric_gbps 3200 -link_ns 1000|diagnostic, not rocefab's fabric: the 400G version with a 1 us delay on every link"
)
for run in "${runs[@]}"; do
    IFS='|' read -r name args note <<<"$run"
    echo "== $name" >&2
    rc=0
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # $args is a list of arguments
    timeout "${RUN_LIMIT_S:-600}" "$work/ring_allreduce" -out "$work/$name.json" $args -size 1048576 \
        -note "$note" >/dev/null || rc=$?
    end=$(date +%s.%N)
    if [ ! -s "$work/$name.json" ]; then
        why="exit status $rc"
        [ "$rc" = 124 ] && why="not finished after ${RUN_LIMIT_S:-600} s of wall clock"
        printf '{"simulator":"htsim","scenario":"ring-allreduce","size_bytes":1048576,"complete":false,"note":"%s: %s"}\n' \
            "$note" "$why" >"$work/$name.json"
    fi
    printf '{"run":"%s","start":%s,"end":%s}\n' "$name" "$start" "$end" >"$work/$name.proc"
done

python3 - "$work" "$here" "$commit" <<'PY'
import json, os, sys
work, here, commit = sys.argv[1:]
order = ["1g", "400g", "diag-400g-fabric4000", "diag-1g-fabric1000", "diag-1g-link1us", "diag-400g-link1us"]
rows = []
for name in order:
    r = json.load(open(os.path.join(work, name + ".json")))
    p = json.load(open(os.path.join(work, name + ".proc")))
    out = {"run": name, "simulator": "htsim", "htsim_commit": commit}
    out.update(r)
    out["process_wall_s"] = round(p["end"] - p["start"], 3)
    out["diagnostic"] = name.startswith("diag-")
    rows.append(out)
by = {r["run"]: r for r in rows}
if by["1g"].get("complete") and by["400g"].get("complete"):
    by["400g"]["jct_ns_at_exact_rates"] = by["1g"]["jct_ns"] / 400
with open(os.path.join(here, "allreduce-results.json"), "w") as f:
    json.dump(rows, f, indent=1)
    f.write("\n")
for r in rows:
    print(f'{r["run"]:>22}: complete {r.get("complete")}, JCT {r.get("jct_ns", 0) / 1e6:.6f} ms simulated, '
          f'{r.get("wall_s", 0):.2f} s wall ({r.get("events", 0)} events)', file=sys.stderr)
print(f"{len(rows)} runs -> {here}/allreduce-results.json", file=sys.stderr)
PY
