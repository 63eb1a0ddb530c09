"""Summary of one rss_bench session's records (a survey, not a report): per shape, the limit (the fastest floor),
the best rss variant, its ratio and the issue's target (limit + 3 us below 20 us, 1.15x from 20 us, 1.05x from 100
us), automatic against the best, device us. Usage: python3 survey_summary.py RECORDS.json"""
import json,statistics as st,collections,sys
d=json.load(open(sys.argv[1]))
agg=collections.defaultdict(list); dev=collections.defaultdict(list)
for b in d['benchmarks']:
    parts=b['name'].split('/')
    shape=parts[0]; var=parts[2]
    hs=[v for k,v in b.items() if k.startswith('host_us/')]
    agg[(shape,var)].append(st.median(hs)); dev[(shape,var)].append(b.get('device_us',0))
shapes=[]
for (s,v) in agg:
    if s not in shapes: shapes.append(s)
for s in shapes:
    vs={v:st.mean(agg[(s,v)]) for (ss,v) in agg if ss==s}
    floors={v:t for v,t in vs.items() if 'floor' in v}
    lim=min(floors.values())
    rssv={v:t for v,t in vs.items() if 'floor' not in v and not v.startswith('retain') and 'control' not in v}
    best=min(rssv,key=rssv.get)
    tgt = lim*1.15 if lim>=20 else lim+3
    if lim>=100: tgt=lim*1.05
    auto=vs.get('automatic')
    print(f"{s:28s} lim {lim:7.2f} best {best:28s} {rssv[best]:7.2f} ratio {rssv[best]/lim:.3f} tgt {tgt:7.2f} {'OK' if rssv[best]<=tgt else 'MISS'}  auto {auto:7.2f} ({auto/rssv[best]:.3f}) dev_best {st.mean(dev[(s,best)]):.2f} dev_floor {min(st.mean(dev[(s,f)]) for f in floors):.2f}")
