#!/usr/bin/env python3
"""run8.sh's hand-edited cluster walks (`gemm-bench --ptx-dir .gpu/ptx`), from this session's
template (commit c790528). The hardware places consecutive clusters in one GPC, where the
plain launch spreads consecutive blocks over the GPCs (timelines/): these variants change
which tiles consecutive clusters take.
  *_perm8: cluster q starts at walk position (q mod 8) * (G / 8) + q / 8 (G clusters, a
           multiple of 8 at the measured shapes), so one GPC's clusters take tiles G/8 apart.
  *_along: the band is always walked along first (consecutive clusters share B, not A)."""
import re, subprocess

P = ("arch: sm_90a, dtype: bf16, mma: wgmma, consumers: pingpong, swizzle: 128B, "
     "copy: tma(multicast = 2)")
BASES = {
    "c192": f"{P}, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2",
    "c128": f"{P}, tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8), cluster: 2x1",
}

def perm8(s):
    new = ("\t{\n\t.reg .b32\t%pq, %pg;\n\tmov.u32\t%pq, %clusterid.x;\n\tmov.u32\t%pg, %nclusterid.x;\n"
           "\tshr.u32\t%pg, %pg, 3;\n\tand.b32\t%tile, %pq, 7;\n\tmul.lo.u32\t%tile, %tile, %pg;\n"
           "\tshr.u32\t%pq, %pq, 3;\n\tadd.u32\t%tile, %tile, %pq;\n\t}\n")
    old = "\tmov.u32\t%tile, %clusterid.x;\n"
    assert s.count(old) == 2
    return s.replace(old, new)

def along(s):
    old = re.compile(r"\tsetp\.le\.and\.u32\t%p_along_first, %band_tiles, %walkers, %p_wide;\n")
    assert len(old.findall(s)) == 2
    return old.sub("\tsetp.eq.u32\t%p_along_first, %walkers, %walkers;\n", s)

for base, body in BASES.items():
    for suffix, edit in (("perm8", perm8), ("along", along)):
        name = f"{base}_{suffix}"
        s = subprocess.run(["target/release/gemm-codegen", "emit", f"name: {name}, {body}"],
                           check=True, capture_output=True, text=True).stdout
        open(f".gpu/ptx/{name}.ptx", "w").write(edit(s))
