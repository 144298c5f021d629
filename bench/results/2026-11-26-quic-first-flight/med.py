import csv,statistics,collections,sys
rows=list(csv.DictReader(open(sys.argv[1])))
g=collections.defaultdict(list)
for r in rows:
    g[(r['size_bytes'],r['client'],r['condition'],r.get('handshake',''))].append((float(r['ttfb_ms']),float(r['total_ms'])))
for k,v in sorted(g.items()):
    print(f"{k[0]:>7} {k[1]:14} {k[2]:6} {k[3]:14} n={len(v)} ttfb {statistics.median(x for x,_ in v):7.1f} total {statistics.median(y for _,y in v):7.1f}")
