#!/usr/bin/env bash
# sweep.sh: every run of README.md's table (150 runs, two at a time, nice 19), then the
# summary tables (summary.md) and results.json. NS3_DIR as for run1.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
{
for s in $(seq 1 20); do echo "A4_s$s 4194304 $s 0 full -"; echo "B4_s$s 4194304 $s 0 full B"; done
for s in $(seq 1 20); do echo "A4j_s$s 4194304 $s 100 full -"; echo "B4j_s$s 4194304 $s 100 full B"; done
for s in $(seq 1 10); do echo "A16_s$s 16777216 $s 0 small -"; echo "B16_s$s 16777216 $s 0 small B"; done
for s in $(seq 1 10); do echo "Bc4_s$s 4194304 $s 0 full Bc"; done
} | xargs -P2 -L1 bash -c '
name=$0 size=$1 seed=$2 jit=$3 trace=$4 v=$5
case $v in
  -) extra="" ; k="150 3000 0.07" ;;
  B) extra="NP_CNP_INTERVAL_NS 50000\nRATE_DECREASE_INTERVAL 1"; k="150 3000 0.07" ;;
  Bc) extra="NP_CNP_INTERVAL_NS 50000\nRATE_DECREASE_INTERVAL 1\nPFC_STATIC_XOFF_XON 2680000 100500"; k="126 2512 0.07" ;;
esac
EXTRA="$extra" JITTER_NS=$jit ./run1.sh $name $size $seed 0 $k $trace || echo "FAILED $name"
'
python3 summarize.py runs > summary.md
python3 summarize.py runs --json > results.json
echo "sweep done: summary.md, results.json"
