#!/usr/bin/env python3
"""Hand-edited starts of generated Hopper kernels (not the product): `prefetch` issues the
tensor-map prefetches before the ring's init, `arrive` lets the producer warpgroup pass the
ring's barrier with bar.arrive (the consumers still wait at bar.sync for all 384 threads),
`both` does both. Usage: start-variants.py SPEC_FILE GEMM_CODEGEN OUT_DIR; writes
OUT_DIR/<variant>/<name>.ptx and OUT_DIR/<variant>-specs.txt (the specs renamed)."""
import os, re, subprocess, sys

spec_file, codegen, out = sys.argv[1:4]
specs = [l.strip() for l in open(spec_file) if l.strip() and not l.startswith('#')]

def edit(ptx, variant):
    if variant in ('prefetch', 'both'):
        old = '\tsetp.eq.u32\t%p_leader, %thread, 0;\n'
        assert ptx.count(old) == 1
        ptx = ptx.replace(old, old + '\t@%p_leader prefetch.tensormap\t[%a_map];\n\t@%p_leader prefetch.tensormap\t[%b_map];\n')
    if variant in ('arrive', 'both'):
        old = '$L_ring_ready:\n\tbar.sync\t0;\n'
        assert ptx.count(old) == 1, 'ring barrier'
        threads = int(re.search(r'\.reqntid (\d+)', ptx).group(1))
        ptx = ptx.replace(old, '$L_ring_ready:\n\tsetp.lt.u32\t%p_producer, %thread, 128;\n'
                          f'\t@%p_producer bar.arrive\t0, {threads};\n\t@!%p_producer bar.sync\t0, {threads};\n')
    return ptx

for variant in ('prefetch', 'arrive', 'both'):
    os.makedirs(f'{out}/{variant}', exist_ok=True)
    with open(f'{out}/{variant}-specs.txt', 'w') as f:
        for spec in specs:
            name = re.match(r'name: (\w+),', spec).group(1)
            renamed = spec.replace(f'name: {name},', f'name: {name}_{variant},', 1)
            ptx = subprocess.run([codegen, 'emit', renamed], capture_output=True, text=True, check=True).stdout
            open(f'{out}/{variant}/{name}_{variant}.ptx', 'w').write(edit(ptx, variant))
            f.write(renamed + '\n')
