#!/usr/bin/env python3
"""Hand-edited variants of a generated SIMT kernel's PTX (an analysis aid, not the product),
as timed in run1.sh-run3.sh: the kernels were emitted at 62669c9, before the loop changed.

Usage: simt-variants.py IN.ptx OUT.ptx NEW_NAME EDIT [EDIT ...]
EDIT, applied in order:
  scalar_c         the full-tile v4 stores of C as four element stores each
  copy=+0 | copy=-0  before the epilogue, every accumulator through add.f32 with +0.0 or -0.0
                   (the `fadd` variants used +0.0, the `nz` ones and the landed kernel -0.0)
  order=row_snake | row_snake_alt | col_snake | col_snake_alt | quad
                   the FFMAs of each k step in another order of the thread tile's (row, column)
  rows=R0,R1,...   a snake over the thread tile's rows in this order, every other one backwards
                   (run8.sh: from the kernel emitted at 4fe85e1, whose loop already snakes)
The entry and its parameters are renamed to NEW_NAME (gemm-bench --ptx-dir wants DIR/NAME.ptx
with the parameter names of the spec NAME)."""
import re
import sys

FMA = re.compile(r'\tfma\.rn\.f32\t%acc\d+, (%fa\d+), (%fb\d+), %acc\d+;')
STORE = re.compile(r'\t(@%\w+ )?st\.global\.v4\.f32\t\[(%\w+)\+(\d+)\], \{ ([^}]*) \};')


def scalar_stores(text):
    def element_stores(m):
        pred, addr, off = m.group(1) or '', m.group(2), int(m.group(3))
        regs = [r.strip() for r in m.group(4).split(',')]
        return '\n'.join(f"\t{pred}st.global.f32\t[{addr}+{off + 4 * i}], {r};"
                         for i, r in enumerate(regs))
    return STORE.sub(element_stores, text)


def copy_accumulators(text, zero):
    count = int(re.search(r'%acc<(\d+)>', text).group(1))
    lines = text.split('\n')
    at = next(i for i, l in enumerate(lines) if l.lstrip().startswith('// Coordinates and C'))
    constant = '0f80000000' if zero == '-0' else '0f00000000'
    lines[at:at] = [f'\tadd.f32\t%acc{i}, %acc{i}, {constant};' for i in range(count)]
    return '\n'.join(lines)


def order(rows, cols, name, step):
    R, C = range(rows), range(cols)
    snake = [(r, c if r % 2 == 0 else cols - 1 - c) for r in R for c in C]
    col_snake = [(r if c % 2 == 0 else rows - 1 - r, c) for c in C for r in R]
    if name == 'row_snake':
        return snake
    if name == 'row_snake_alt':
        return snake if step % 2 == 0 else snake[::-1]
    if name == 'col_snake':
        return col_snake
    if name == 'col_snake_alt':
        return col_snake if step % 2 == 0 else col_snake[::-1]
    if name == 'quad':  # row pairs, column by column, the pairs snaking
        out = []
        for pair in range(0, rows, 2):
            for c in (C if (pair // 2) % 2 == 0 else reversed(C)):
                out += [(pair, c), (pair + 1, c)]
        return out
    if name.startswith('rows='):
        visit = [int(r) for r in name[len('rows='):].split(',')]
        return [(r, c if i % 2 == 0 else cols - 1 - c) for i, r in enumerate(visit) for c in C]
    raise SystemExit(f'unknown order {name}')


def reorder(text, name):
    lines, out, i, step = text.split('\n'), [], 0, 0
    while i < len(lines):
        if not FMA.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and FMA.match(lines[j]):
            j += 1
        rows, cols, cell = [], [], {}
        for line in lines[i:j]:
            a, b = FMA.match(line).groups()
            rows += [a] if a not in rows else []
            cols += [b] if b not in cols else []
            cell[(rows.index(a), cols.index(b))] = line
        out += [cell[rc] for rc in order(len(rows), len(cols), name, step)]
        step += 1
        i = j
    return '\n'.join(out)


def main():
    src, dst, new_name, *edits = sys.argv[1:]
    text = open(src).read()
    old_name = re.search(r'\.visible \.entry (\w+)\(', text).group(1)
    for edit in edits:
        if edit == 'scalar_c':
            text = scalar_stores(text)
        elif edit.startswith('copy='):
            text = copy_accumulators(text, edit.split('=')[1])
        elif edit.startswith('order='):
            text = reorder(text, edit.split('=')[1])
        elif edit.startswith('rows='):
            text = reorder(text, edit)
        else:
            raise SystemExit(f'unknown edit {edit}')
    open(dst, 'w').write(text.replace(old_name, new_name))


main()
