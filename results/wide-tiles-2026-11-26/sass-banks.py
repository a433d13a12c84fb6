#!/usr/bin/env python3
"""Static register-bank conflicts of the FFMAs in a SASS listing (an analysis aid, not the
product): per FFMA, the source registers the previous instruction's reuse cache does not
serve, and how many of them share a bank (register number mod `banks`) with another.
Usage: sass-banks.py SASS [banks]; SASS from `gemm-codegen sass` or `nvdisasm -c`."""
import re, sys
text = open(sys.argv[1]).read().splitlines()
banks = int(sys.argv[2]) if len(sys.argv) > 2 else 2
prev = {}
ffma = conflicts = 0
for line in text:
    m = re.search(r'\*/\s+(@!?U?P\w+\s+)?(\w+)(\.\S+)?\s+(.*?)\s*(<==)?$', line)
    if not m:
        continue
    op, args = m.group(2), m.group(4)
    ops = [a.strip() for a in args.split(',')]
    if op != 'FFMA':
        prev = {}
        continue
    ffma += 1
    srcs = ops[1:4]
    cur = {}
    reads = []
    for slot, s in enumerate(srcs):
        r = re.match(r'-?\|?R(\d+)\|?(\.reuse)?', s)
        if not r:
            continue
        reg = int(r.group(1))
        if prev.get(slot) == reg:
            pass  # served by the reuse cache
        else:
            reads.append(reg)
        if r.group(2):
            cur[slot] = reg
    prev = cur
    by_bank = {}
    for reg in set(reads):
        by_bank[reg % banks] = by_bank.get(reg % banks, 0) + 1
    conflicts += sum(c - 1 for c in by_bank.values())
print(f"{ffma} FFMA, {conflicts} bank conflicts ({banks} banks), {conflicts / max(ffma,1):.2f} per FFMA")
