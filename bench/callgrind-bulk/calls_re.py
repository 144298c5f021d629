#!/usr/bin/env python3
"""Calls to, and exclusive instructions of, the functions whose names match a regex in a
callgrind output (summed over all callers).

    calls_re.py FILE REGEX    prints: calls self_Ir  (and one line per matching function)
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "callgrind-static"))
from calls import call_counts  # noqa: E402

path, pat = sys.argv[1], re.compile(sys.argv[2])
calls = call_counts(path, pat.search)
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
