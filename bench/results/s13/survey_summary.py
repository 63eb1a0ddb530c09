"""Summary of one rss_bench session's records (a survey, not a report): per shape, the limit (the fastest floor),
the best rss variant, its ratio and the issue's target (limit + 3 us below 20 us, 1.15x from 20 us, 1.05x from 100
us), automatic against the best, and device us. Usage: python3 survey_summary.py RECORDS.json"""
import collections
import json
import statistics as st
import sys

host = collections.defaultdict(list)
device = collections.defaultdict(list)
for b in json.load(open(sys.argv[1]))['benchmarks']:
    parts = b['name'].split('/')
    key = (parts[0], parts[2])  # shape, variant
    host[key].append(st.median(v for k, v in b.items() if k.startswith('host_us/')))
    device[key].append(b.get('device_us', 0))

for shape in dict.fromkeys(s for s, _ in host):  # in the session's order
    us = {v: st.mean(t) for (s, v), t in host.items() if s == shape}
    floors = {v: t for v, t in us.items() if 'floor' in v}
    limit = min(floors.values())
    rss = {v: t for v, t in us.items() if 'floor' not in v and not v.startswith('retain') and 'control' not in v}
    best = min(rss, key=rss.get)
    target = limit * 1.05 if limit >= 100 else limit * 1.15 if limit >= 20 else limit + 3
    auto = us['automatic']
    print(f"{shape:28s} lim {limit:7.2f} best {best:28s} {rss[best]:7.2f} ratio {rss[best] / limit:.3f} "
          f"tgt {target:7.2f} {'OK' if rss[best] <= target else 'MISS'}  auto {auto:7.2f} ({auto / rss[best]:.3f}) "
          f"dev_best {st.mean(device[(shape, best)]):.2f} "
          f"dev_floor {min(st.mean(device[(shape, f)]) for f in floors):.2f}")
