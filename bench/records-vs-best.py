#!/usr/bin/env python3
"""How far adaptive records (`fb-adaptive`) are from the best policy of each row of a record bench.

    python3 bench/records-vs-best.py [RESULTS_DIR] [--row LINK SIZE REQUEST]

RESULTS_DIR (default bench/results/2026-11-26-records) holds one directory per link with the
bench's results.csv (one row per response). A row is (link, size, request: the cold one or the
one after an idle gap), as in the bench's summary.md "at a glance" tables; a cell is one
metric of a row: time to first byte (ttfb_ms) or to the last byte (total_ms). For each cell the
script takes every condition's median with a bootstrap 95% interval (2,000 resamples of the
sample, seeded, percentile interval: the bench's own method, with Python's generator, so the
ends can differ from summary.md's by a little), and prints adaptive's ratio to the row's lowest
median and whether the two intervals are apart. Then the counts: cells more than 5% behind by
point medians, and of those, how many with the intervals apart (what summary.md marks `(N×)`).

--row prints one cell's raw samples side by side (every condition's sorted total_ms deciles),
to see what makes a difference there.
"""

import csv
import math
import os
import random
import sys

SEED = 20261124
RESAMPLES = 2000
MATTERS = 1.05
ADAPTIVE = "fb-adaptive"


def quantile(s, q):
    """Type-7 quantile of a sorted list (as the bench's stats::quantile_sorted)."""
    h = (len(s) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def median_ci(sample, seed):
    s = sorted(sample)
    rng = random.Random(seed)
    n = len(s)
    boot = sorted(quantile(sorted(rng.choice(s) for _ in range(n)), 0.5) for _ in range(RESAMPLES))
    return quantile(s, 0.5), quantile(boot, 0.025), quantile(boot, 0.975)


def load(root):
    """{(link, size, request): {condition: {"ttfb": [...], "total": [...]}}}"""
    cells = {}
    for link in sorted(os.listdir(root)):
        path = os.path.join(root, link, "results.csv")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["status"] != "200":
                    continue
                gap = float(r["gap_ms"])
                req = "cold" if r["position"] == "1" else "@%gs" % (gap / 1000)
                key = (link, int(r["size_bytes"]), req)
                d = cells.setdefault(key, {}).setdefault(r["condition"], {"ttfb": [], "total": []})
                d["ttfb"].append(float(r["ttfb_ms"]))
                d["total"].append(float(r["total_ms"]))
    return cells


def size_label(n):
    return "%d MB" % (n >> 20) if n >= 1 << 20 else "%d KB" % (n >> 10)


def order(key):
    link, size, req = key
    return (link, size, -1.0 if req == "cold" else float(req[1:-1]))


def table(cells):
    behind = apart = total = 0
    print("| link | size | request | metric | adaptive median [95% CI] | best | best median [95% CI] | ratio | intervals | adaptive's rank |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(cells, key=order):
        conds = cells[key]
        for metric in ("ttfb", "total"):
            est = {c: median_ci(v[metric], SEED) for c, v in sorted(conds.items())}
            best = min(est, key=lambda c: est[c][0])
            a, b = est[ADAPTIVE], est[best]
            ratio = a[0] / b[0]
            sep = a[1] > b[2]
            total += 1
            if ratio > MATTERS:
                behind += 1
                apart += sep
            mark = "**%.2f×**" % ratio if ratio > MATTERS else "%.2f×" % ratio
            rank = 1 + sum(1 for e in est.values() if e[0] < a[0])
            print("| %s | %s | %s | %s | %.1f [%.1f, %.1f] | %s | %.1f [%.1f, %.1f] | %s | %s | %d of %d |" % (
                key[0], size_label(key[1]), key[2], "first byte" if metric == "ttfb" else "last byte",
                a[0], a[1], a[2], best, b[0], b[1], b[2], mark,
                "apart" if sep else "overlap", rank, len(est)))
    print()
    print("%d cells; adaptive more than 5%% behind the best by point medians in %d; "
          "of those, intervals apart in %d." % (total, behind, apart))


def mann_whitney_p(x, y):
    """Two-sided p of the Mann-Whitney U test (normal approximation, mid-ranks for ties)."""
    allv = sorted((v, i) for i, v in enumerate(list(x) + list(y)))
    ranks = [0.0] * len(allv)
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1][0] == allv[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[allv[k][1]] = (i + j) / 2 + 1
        i = j + 1
    n1, n2 = len(x), len(y)
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    sigma = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    z = (u - mu) / sigma if sigma else 0.0
    return math.erfc(abs(z) / math.sqrt(2))


def row(cells, link, size, req):
    conds = cells[(link, size, req)]
    print("%s, %s, %s: last byte (ms), each condition's sorted samples by decile; p: Mann-Whitney "
          "against adaptive (two-sided)" % (link, size_label(size), req))
    print()
    print("| condition | n | min | p10 | p20 | p30 | p40 | p50 | p60 | p70 | p80 | p90 | max | p |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ad = conds[ADAPTIVE]["total"]
    for c, v in sorted(conds.items()):
        s = sorted(v["total"])
        p = "—" if c == ADAPTIVE else "%.2f" % mann_whitney_p(ad, s)
        print("| %s | %d | %s | %s |" % (c, len(s), " | ".join("%.0f" % quantile(s, q / 10) for q in range(11)), p))


def main(argv):
    root = "bench/results/2026-11-26-records"
    args = list(argv)
    if args and not args[0].startswith("--"):
        root = args.pop(0)
    cells = load(root)
    if not cells:
        sys.exit("records-vs-best: no results.csv under %s" % root)
    if args[:1] == ["--row"] and len(args) == 4:
        row(cells, args[1], int(args[2]), args[3])
    else:
        table(cells)


if __name__ == "__main__":
    main(sys.argv[1:])
