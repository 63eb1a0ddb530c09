"""The backward budget A/B of the thirteenth session: mean over rounds (and files) of each variant's median host us,
per shape, for the saved-statistics variants and floors. Usage:
  python3 backward_budget_summary.py FOLDER OLD_GLOB NEW_GLOB [NEW2_GLOB]
e.g. backward_budget_GPU-efc8aef3 'bw_old_*.json' 'bw_P_2.json' 'bw_Q_2.json' (the first runs of P and Q also
checked dx against the double reference and were cut at 120 s, so their records are not kept)."""
import collections, glob, json, os, statistics as st, sys


def load(folder, pattern):
    agg = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(folder, pattern))):
        for b in json.load(open(f))['benchmarks']:
            p = b['name'].split('/')
            hs = [v for k, v in b.items() if k.startswith('host_us/')]
            if hs:
                agg[(p[0], p[2])].append(st.median(hs))
    return {k: st.mean(v) for k, v in agg.items()}


folder, patterns = sys.argv[1], sys.argv[2:]
runs = [load(folder, p) for p in patterns]
for k in sorted(runs[0]):
    if k[1] in ('cluster_row_saved', 'automatic_saved', 'floor_saved', 'two_pass_saved'):
        cols = ' '.join(f"{r.get(k, float('nan')):8.2f} ({r.get(k, float('nan')) / runs[0][k]:.3f})" for r in runs[1:])
        print(f"{k[0]:18s} {k[1]:20s} {runs[0][k]:8.2f} {cols}")
