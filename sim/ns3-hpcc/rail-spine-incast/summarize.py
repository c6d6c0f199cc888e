#!/usr/bin/env python3
"""Per-seed tables and distributions of every sweep group (RUNS/<group>_s<seed>.json):
`summarize.py RUNS` prints the Markdown tables, `summarize.py RUNS --json` the compact results
(per run: group, seed, the window [T1, first completion] with its min/max, Jain and per-sender
rates, JCT, peak queue)."""
import glob, json, os, re, statistics as st, sys
groups = {}
runs = sys.argv[1] if len(sys.argv) > 1 else 'runs'
for p in glob.glob(os.path.join(runs, '*_s*.json')):
    m = re.match(r'.*/(\w+?)_s(\d+)\.json', p)
    groups.setdefault(m.group(1), []).append((int(m.group(2)), json.load(open(p))))
if '--json' in sys.argv:
    out = []
    for g in sorted(groups):
        for seed, r in sorted(groups[g]):
            if not r.get('complete') or 'windows' not in r:
                out.append({"group": g, "seed": seed, "complete": False}); continue
            w = r['windows']['first_done']
            out.append({"group": g, "seed": seed, "complete": True, "T1_us": r['T1_us'], "T2_us": w['T2_us'],
                        "jct_us": r['jct_us'], "min_over_max": round(w['min_over_max'], 4), "jain": round(w['jain'], 4),
                        "fastest_kind": w['fastest_kind'], "slowest_kind": w['slowest_kind'],
                        "rates_gbps": w['rates_gbps'], "peak_q_bytes": r['peak_q_bytes'], "via": r.get('via')})
    json.dump(out, sys.stdout, indent=1)
    print()
    sys.exit(0)
KIND = {1: 'R', 2: 'L', 3: 'R', 4: 'L', 5: 'R', 6: 'L', 7: 'R'}
def dist(xs):
    xs = sorted(xs); return "min %.3f  median %.3f  max %.3f  (n=%d, <0.7: %d)" % (xs[0], st.median(xs), xs[-1], len(xs), sum(x < 0.7 for x in xs))
for g in sorted(groups, key=lambda g: (g[0], len(g), g)):
    rows = sorted(groups[g])
    print("\n### %s\n" % g)
    print("| seed | T1 µs | T2 (first done) µs | busy end µs | JCT µs | min/max | Jain | fastest | slowest | local mean Gb/s | remote mean Gb/s | min/max to busy end | fastest (busy end) | goodput Jain | peak q MB | CNPs | PAUSE to hosts/switches |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    fm, fb, fk = [], [], []
    for s, r in rows:
        if not r.get('complete') or 'windows' not in r:
            print("| %d | incomplete: %s |" % (s, r.get('note'))); continue
        w, b = r['windows']['first_done'], r['windows']['busy_end']
        fm.append(w['min_over_max']); fk.append(w['fastest_kind'])
        if b: fb.append(b['min_over_max'])
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.3f | %.4f | s%s (%s) | s%s (%s) | %.1f | %.1f | %s | %s | %.4f | %.2f | %d | %d/%d |" % (
            s, r['T1_us'], w['T2_us'], r['busy_end_us'], r['jct_us'], w['min_over_max'], w['jain'], w['fastest'], w['fastest_kind'],
            w['slowest'], w['slowest_kind'], w['local_mean_gbps'], w['remote_mean_gbps'],
            "%.3f" % b['min_over_max'] if b else '-', ("s%s (%s)" % (b['fastest'], b['fastest_kind'])) if b else '-',
            r['goodput_jain'], r['peak_q_bytes'] / 1e6, sum(r['cnps'].values()), r['pause_frames_to_hosts'], r['pause_frames_to_switches']))
    if fm:
        print("\nmin/max [T1, first completion]: " + dist(fm) + "; fastest remote in %d of %d" % (fk.count('remote'), len(fk)))
        if fb: print("min/max [T1, busy end]: " + dist(fb))
