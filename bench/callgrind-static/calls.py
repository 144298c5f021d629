#!/usr/bin/env python3
"""Calls to the named functions in a callgrind output (summed over all callers).

    calls.py FILE NAME...   (exact function names, e.g. statx, clock_gettime)

`call_counts` is also what bench/callgrind-bulk/calls_re.py counts calls with.
"""
import re
import sys


def call_counts(path, wanted):
    """Calls to each function for which wanted(name) holds, summed over its callers."""
    ids = {}
    counts = {}
    pending = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn=") or line.startswith("cfn="):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                if m:
                    if m.group(2) is not None:
                        ids[m.group(1)] = m.group(2)
                    name = ids.get(m.group(1))
                else:
                    name = line.split("=", 1)[1].strip()
                pending = name if line.startswith("cfn=") and name and wanted(name) else None
            elif line.startswith("calls=") and pending:
                counts[pending] = counts.get(pending, 0) + int(line.split("=", 1)[1].split()[0])
                pending = None
    return counts


if __name__ == "__main__":
    path, names = sys.argv[1], set(sys.argv[2:])
    counts = call_counts(path, names.__contains__)
    for n in sorted(names):
        print(n, counts.get(n, 0))
