#!/usr/bin/env bash
# Runs the canonical single-switch N->1 incast of issue 23 in htsim, every variant, and writes
# results.json and results.csv next to this script (README.md says what each field is).
#
# htsim itself is not in this repository and this script does not fetch or build it: build the
# UEC htsim (github.com/ultraethernet/uet-htsim) at the commit in PINNED below, as its own
# README says, then point HTSIM_SIM at its htsim/sim directory. This script compiles only our
# driver, fidelity_incast.cpp, against htsim's headers and the two static libraries its build
# leaves (HTSIM_LIBS; default: the paths of its cmake build).
#
#   HTSIM_SIM=/path/to/uet-htsim/htsim/sim sim/htsim/run.sh
set -euo pipefail

PINNED=40ccb0526bb6297eeb22ab33f9934fb35278dbaf
here=$(cd "$(dirname "$0")" && pwd)
: "${HTSIM_SIM:?set HTSIM_SIM to uet-htsim/htsim/sim, built at commit $PINNED (README.md)}"
libs=${HTSIM_LIBS:-"$HTSIM_SIM/build/datacenter/libhtsim_dc.a $HTSIM_SIM/build/libhtsim.a"}
commit=${HTSIM_COMMIT:-$(git -C "$HTSIM_SIM" rev-parse HEAD 2>/dev/null || echo unknown)}
if [ "$commit" != "$PINNED" ]; then
    echo "warning: htsim commit is $commit, the results in this directory are from $PINNED" >&2
fi
work=${WORK_DIR:-$(mktemp -d /tmp/rocefab-htsim.XXXXXX)}
mkdir -p "$work"
# shellcheck disable=SC2086 # $libs is a list of files
g++ -std=c++17 -O2 -w -I"$HTSIM_SIM" -I"$HTSIM_SIM/datacenter" "$here/fidelity_incast.cpp" $libs \
    -o "$work/fidelity_incast"

# The scenario (README.md): 16 hosts on one switch, 1 us links, 4096-byte payloads,
# PFC xOFF/xON 15/12 packets, step ECN at 25 packets (DCQCN mode only).
for mode in pfc dcqcn; do
    for gbps in 100 400; do
        for n in 4 8; do
            for mib in 2 16; do
                stem="$mode-n$n-${mib}mib-${gbps}g"
                echo "== $stem" >&2
                # Simulated time is bounded by -end_us, wall time by RUN_LIMIT_S. htsim's
                # DCQCN source multiplies its own events (README.md), so its longer runs do
                # not finish: they get a row with "complete": false and why. Its stdout (a
                # line per DCQCN event) is not kept.
                rc=0
                timeout "${RUN_LIMIT_S:-120}" "$work/fidelity_incast" -out "$work/$stem.json" \
                    -mode "$mode" -senders "$n" -size $((mib * 1048576)) -gbps "$gbps" -hosts 16 \
                    -mtu 4096 -xoff 15 -xon 12 -ecn_k 25 -link_us 1 -end_us 200000 >/dev/null || rc=$?
                if [ ! -s "$work/$stem.json" ]; then
                    why="exit status $rc"
                    [ "$rc" = 124 ] && why="not finished after ${RUN_LIMIT_S:-120} s of wall clock"
                    printf '{"simulator":"htsim","mode":"%s","senders":%d,"size_bytes":%d,"line_rate_gbps":%d,"complete":false,"note":"%s"}\n' \
                        "$mode" "$n" $((mib * 1048576)) "$gbps" "$why" >"$work/$stem.json"
                fi
            done
        done
    done
done

python3 - "$work" "$here" "$commit" <<'PY'
import csv, glob, json, os, sys
work, here, commit = sys.argv[1:]
order = {"pfc": 0, "dcqcn": 1}
rows = [json.load(open(p)) for p in glob.glob(os.path.join(work, "*.json"))]
rows.sort(key=lambda r: (order[r["mode"]], r["line_rate_gbps"], r["senders"], r["size_bytes"]))
for r in rows:
    r["htsim_commit"] = commit
with open(os.path.join(here, "results.json"), "w") as f:
    json.dump(rows, f, indent=1)
    f.write("\n")
cols = ["mode", "line_rate_gbps", "senders", "size_bytes", "complete", "jct_ns", "aggregate_goodput_bps",
        "jain", "max_queue_bytes", "avg_queue_bytes", "pause_onsets", "pfc_frames", "ecn_marks", "cnps",
        "retransmitted_packets", "note"]
with open(os.path.join(here, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(cols)
    for r in rows:
        w.writerow([r.get(c, "") for c in cols])
print(f"{len(rows)} runs -> {here}/results.json, results.csv", file=sys.stderr)
PY
