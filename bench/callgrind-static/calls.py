#!/usr/bin/env python3
"""Calls to the named functions in a callgrind output (summed over all callers).

    calls.py FILE NAME...   (exact function names, e.g. statx, clock_gettime)
"""
import re
import sys

path, names = sys.argv[1], set(sys.argv[2:])
ids = {}
counts = {n: 0 for n in names}
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
            pending = name if line.startswith("cfn=") and name in names else None
        elif line.startswith("calls=") and pending:
            counts[pending] += int(line.split("=", 1)[1].split()[0])
            pending = None
for n in sorted(counts):
    print(n, counts[n])
