#!/usr/bin/env python3
"""Per-cell medians of first byte and last byte of WAN bench runs, side by side.

Usage: compare.py NAME=RUN_DIR NAME=RUN_DIR ...   (the first run is the reference)
A RUN_DIR holds one directory per link (LINK/results.csv), as `firstbyte-bench run` writes
for a [[link]] plan. A cell is (link, size, request, condition); a request is the client, or
`client@GAPs` for a warm connection's later request (as summary.md names them). The median
of successful rows (status 2xx) is the one summary.md prints (type 7 = the middle value, or
the mean of the two middle values). Prints, per run, metric and link, how far its medians are
from the reference's, then the table of every cell.
"""
import csv
import os
import statistics
import sys


def series(r):
    if int(r["position"]) > 1:
        gap = round(float(r["gap_ms"]) / 10.0) / 100.0
        return f"{r['client']}@{gap:g}s"
    return r["client"]


def size_label(b):
    b = int(b)
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MB"
    if b >= 1024 and b % 1024 == 0:
        return f"{b >> 10} KB"
    return f"{b} B"


def medians(run_dir):
    cells = {}
    for link in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, link, "results.csv")
        if not os.path.isfile(path):
            continue
        for r in csv.DictReader(open(path)):
            if not r.get("status", "").startswith("2"):
                continue
            key = (link, int(r["size_bytes"]), series(r), r["condition"])
            cells.setdefault(key, ([], []))
            cells[key][0].append(float(r["ttfb_ms"]))
            cells[key][1].append(float(r["total_ms"]))
    return {
        (m, *k): (statistics.median(v[i]), len(v[i]))
        for k, v in cells.items()
        for i, m in enumerate(("ttfb", "total"))
    }


def main():
    runs = [(a.split("=", 1)[0], medians(a.split("=", 1)[1])) for a in sys.argv[1:]]
    ref_name, ref = runs[0]
    for name, t in runs[1:]:
        for metric in ("ttfb", "total"):
            for link in sorted({k[1] for k in ref}):
                diffs = [
                    (100.0 * (t[k][0] - v[0]) / v[0], k)
                    for k, v in ref.items()
                    if k[0] == metric and k[1] == link and k in t
                ]
                if not diffs:
                    continue
                a = [abs(d) for d, _ in diffs]
                n = sorted({t[k][1] for _, k in diffs})
                print(
                    f"{name} vs {ref_name}, {metric}, {link}: {len(a)} cells (n {n[0]}-{n[-1]}), "
                    f"median |diff| {statistics.median(a):.2f}%, mean diff "
                    f"{statistics.mean(d for d, _ in diffs):+.2f}%, max |diff| {max(a):.1f}%, "
                    f"cells > 2%: {sum(1 for x in a if x > 2.0)}, > 5%: {sum(1 for x in a if x > 5.0)}"
                )
                for d, k in sorted(diffs, key=lambda x: -abs(x[0]))[:6]:
                    if abs(d) > 2.0:
                        print(
                            f"    {size_label(k[2])} {k[3]} {k[4]}: {ref[k][0]:.1f} -> "
                            f"{t[k][0]:.1f} ({d:+.1f}%)"
                        )
    print()
    names = [n for n, _ in runs]
    print("| metric | link | size | request | condition | " + " | ".join(names) + " |")
    print("|---" * (5 + len(names)) + "|")
    for k in sorted(ref, key=lambda k: (k[0] != "ttfb", k[1], k[2], k[3], k[4])):
        vals = [f"{t[k][0]:.1f}" if k in t else "-" for _, t in runs]
        print(
            f"| {k[0]} | {k[1]} | {size_label(k[2])} | {k[3]} | {k[4]} | "
            + " | ".join(vals)
            + " |"
        )


main()
