#!/usr/bin/env bash
# Runs the canonical single-switch N->1 incast of issue 23 in ns-3 HPCC, every variant, and
# writes results.json and results.csv next to this script (README.md says what each field is).
#
# ns-3 HPCC itself is not in this repository and this script does not fetch or build it: build
# github.com/alibaba-edu/High-Precision-Congestion-Control at the commit in PINNED below, with
# the static-PFC-threshold change README.md describes, as README.md says, then point NS3_DIR at
# its simulation/ directory. This script only runs its scratch/third program on our config,
# topology and flow files (config/) and reads the traces it writes (ns3_results.py).
#
#   NS3_DIR=/path/to/High-Precision-Congestion-Control/simulation sim/ns3-hpcc/run.sh
set -euo pipefail

PINNED=9f4be2a9ead8a90e8bf732c66bd758c00e58e5be
here=$(cd "$(dirname "$0")" && pwd)
: "${NS3_DIR:?set NS3_DIR to High-Precision-Congestion-Control/simulation, built at commit $PINNED (README.md)}"
bin=${NS3_BIN:-$NS3_DIR/build/scratch/third}
[ -x "$bin" ] || { echo "no $bin: build ns-3 HPCC first (README.md)" >&2; exit 1; }
grep -q static_xoff "$NS3_DIR/src/point-to-point/model/switch-mmu.cc" || {
    echo "$NS3_DIR lacks the static PFC threshold change (README.md, 'Local changes')" >&2; exit 1; }
commit=${NS3_COMMIT:-$(git -C "$NS3_DIR" rev-parse HEAD 2>/dev/null || echo unknown)}
if [ "$commit" != "$PINNED" ]; then
    echo "warning: ns-3 HPCC commit is $commit, the results in this directory are from $PINNED" >&2
fi
work=${WORK_DIR:-$(mktemp -d /tmp/rocefab-ns3.XXXXXX)}
mkdir -p "$work"

# The scenario (README.md): 16 hosts on one switch, 1 us links, 4096-byte payloads, PFC
# xOFF/xON 61440/49152 B static, step ECN at 102 KB (DCQCN mode only), run.py's "dcqcn" RP.
for mode in ${MODES:-pfc dcqcn dcqcn-typeid}; do
    for gbps in 100 400; do
        for n in 4 8; do
            for mib in 2 16; do
                stem="$mode-n$n-${mib}mib-${gbps}g"
                echo "== $stem" >&2
                run="$work/$stem"
                rm -rf "$run"
                mkdir -p "$run"
                cp "$here/config/$mode-${gbps}g.txt" "$run/config.txt"
                cp "$here/config/topology-${gbps}g.txt" "$run/topology.txt"
                cp "$here/config/flow-n$n-${mib}mib.txt" "$run/flow.txt"
                cp "$here/config/trace.txt" "$run/trace.txt"
                rc=0
                (cd "$run" && LD_LIBRARY_PATH="$NS3_DIR/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                    timeout "${RUN_LIMIT_S:-600}" "$bin" config.txt >stdout.txt 2>&1) || rc=$?
                if [ "$rc" = 0 ]; then
                    python3 "$here/ns3_results.py" "$run" --mode "$mode" --senders "$n" \
                        --size $((mib * 1048576)) --gbps "$gbps" >"$run.json"
                else
                    why="exit status $rc"
                    [ "$rc" = 124 ] && why="not finished after ${RUN_LIMIT_S:-600} s of wall clock"
                    printf '{"simulator":"ns3-hpcc","mode":"%s","senders":%d,"size_bytes":%d,"line_rate_gbps":%d,"complete":false,"note":"%s"}\n' \
                        "$mode" "$n" $((mib * 1048576)) "$gbps" "$why" >"$run.json"
                fi
            done
        done
    done
done

python3 - "$work" "$here" "$commit" <<'PY'
import csv, glob, json, os, sys
work, here, commit = sys.argv[1:]
order = {"pfc": 0, "dcqcn": 1, "dcqcn-typeid": 2}
rows = [json.load(open(p)) for p in glob.glob(os.path.join(work, "*.json"))]
rows.sort(key=lambda r: (order[r["mode"]], r["line_rate_gbps"], r["senders"], r["size_bytes"]))
for r in rows:
    r["ns3_hpcc_commit"] = commit
# results.json: the 16 variants of the fidelity table (PFC-only; DCQCN+PFC with run.py's
# "dcqcn" setting). results-dcqcn-typeid.json: DCQCN+PFC with RdmaHw's attribute defaults,
# the values rocefab's ns3-hpcc profile cites (README.md).
for name, keep in (("results.json", ("pfc", "dcqcn")), ("results-dcqcn-typeid.json", ("dcqcn-typeid",))):
    sel = [r for r in rows if r["mode"] in keep]
    if sel:
        with open(os.path.join(here, name), "w") as f:
            json.dump(sel, f, indent=1)
            f.write("\n")
cols = ["mode", "line_rate_gbps", "senders", "size_bytes", "complete", "jct_ns", "aggregate_goodput_bps",
        "jain", "max_queue_bytes", "avg_queue_bytes", "max_queue_bytes_incl_tx", "avg_queue_bytes_incl_tx",
        "pause_onsets", "pfc_frames", "ecn_marks", "cnps", "retransmitted_packets", "note"]
with open(os.path.join(here, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(cols)
    for r in rows:
        w.writerow([r.get(c, "") for c in cols])
print(f"{len(rows)} runs -> {here}/results.json, results.csv", file=sys.stderr)
PY
