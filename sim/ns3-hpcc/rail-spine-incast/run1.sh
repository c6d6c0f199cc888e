#!/usr/bin/env bash
# run1.sh NAME SIZE_BYTES RNGRUN [STAGGER_NS] [KMIN KMAX PMAX] [TRACE]
# One ns-3 HPCC run of the rail-spine-400g 7:1 incast (README.md); writes $OUT/NAME/ and
# $OUT/NAME.json. NS3_DIR = the HPCC repository's simulation/ directory, built with the local
# changes of README.md. EXTRA = config lines to append (printf %b), JITTER_NS = a random 0..N ns
# start offset per flow (seeded by RNGRUN), KEEP = keep the binary trace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${NS3_DIR:?set NS3_DIR to the built HPCC simulation/ directory}"
out=${OUT:-$here/runs}
name=$1 size=$2 seed=$3 stagger=${4:-0} kmin=${5:-150} kmax=${6:-3000} pmax=${7:-0.07} trace=${8:-full}
run=$out/$name; rm -rf "$run"; mkdir -p "$run"
sed -e "s/@KMIN@/$kmin/g; s/@KMAX@/$kmax/g; s/@PMAX@/$pmax/g" "$here/config/config-base.txt" > "$run/config.txt"
printf "%b\n" "${EXTRA:-}" >> "$run/config.txt"
cp "$here/config/topology.txt" "$run/"; cp "$here/config/trace-$trace.txt" "$run/trace.txt"
# flows: src dst pg dport size start(s); sender k starts at (k-1)*stagger ns (ascending, as third.cc needs)
python3 - "$size" "$seed" "${JITTER_NS:-0}" "$stagger" > "$run/flow.txt" <<'PY'
import random, sys
size, seed, jit, stag = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
fl = sorted(((i * stag + (rng.uniform(0, jit) if jit else 0)) * 1e-9, s) for i, s in enumerate(range(1, 8)))
print(7)
for t, s in fl:
    print("%d 0 3 100 %d %.12f" % (s, size, t))
PY
(cd "$run" && NS_GLOBAL_VALUE="RngRun=$seed" LD_LIBRARY_PATH="$NS3_DIR/build" nice -n 19 timeout 900 "$NS3_DIR/build/scratch/third" config.txt > stdout.txt 2>&1)
nice -n 19 python3 "$here/analyze.py" "$run" > "$out/$name.json"
[ -n "${KEEP:-}" ] || rm -f "$run/mix.tr"
