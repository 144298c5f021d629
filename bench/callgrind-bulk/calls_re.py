#!/usr/bin/env python3
"""Calls to, and exclusive instructions of, the functions whose names match a regex in a
callgrind output (summed over all callers).

    calls_re.py FILE REGEX    prints: calls self_Ir  (and one line per matching function)
"""
import re
import subprocess
import sys

path, pat = sys.argv[1], re.compile(sys.argv[2])
ids = {}
calls = {}
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
            pending = name if line.startswith("cfn=") and name and pat.search(name) else None
        elif line.startswith("calls=") and pending:
            calls[pending] = calls.get(pending, 0) + int(line.split("=", 1)[1].split()[0])
            pending = None
# Exclusive cost per function from callgrind_annotate (no inclusive), all lines.
out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", path],
                     capture_output=True, text=True).stdout
self_ir = {}
for l in out.splitlines():
    m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(?:\S+:)?([^ ].*?)(?: \(\d+x\))?(?: \[.*\])?$", l)
    if "=>" in l:
        continue
    if m and pat.search(m.group(2)):
        self_ir[m.group(2)] = self_ir.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
names = sorted(set(calls) | set(self_ir))
print(sum(calls.values()), sum(self_ir.values()))
for n in names:
    print(f"  {n}: calls {calls.get(n, 0)} self_Ir {self_ir.get(n, 0)}")
