#!/usr/bin/env python3
"""run18.sh's A/B of the walk's divisions: `fast_*` is the generated kernel with every 32-bit
division (and remainder) by a constant done by multiplication (the exact round-up method:
q = (t + ((x - t) >> 1)) >> (l - 1), t = mulhi(x, m), l = ceil(log2 d),
m = floor(2^32 (2^l - d) / d) + 1) and the walk's division by the tiles of a product skipped
for the first product; `base_*` as generated. Writes .gpu/ptx and .gpu/walk.txt."""
import re, subprocess

MEMBERS = {
    "192x96_pp": "tile: 192x96x64, consumers: pingpong, stages: 5, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x64_pp": "tile: 128x64x64, consumers: pingpong, stages: 8, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x128_pp": "tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x256": "tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
}
HEAD = "arch: sm_90a, dtype: bf16, mma: wgmma, copy: tma"

def magic(d):
    l = (d - 1).bit_length()
    return (2**32 * (2**l - d)) // d + 1, l

def quotient(dst, src, d):
    m, l = magic(d)
    return (f"\t{{\n\t.reg .b32\t%dv_t, %dv_q;\n\tmul.hi.u32\t%dv_t, {src}, {m};\n\tsub.u32\t%dv_q, {src}, %dv_t;\n"
            f"\tshr.u32\t%dv_q, %dv_q, 1;\n\tadd.u32\t%dv_q, %dv_q, %dv_t;\n\tshr.u32\t{dst}, %dv_q, {l - 1};\n\t}}\n")

def fast(ptx):
    def div(mt):
        return quotient(mt.group(1), mt.group(2), int(mt.group(3)))
    def rem(mt):
        dst, src, d = mt.group(1), mt.group(2), int(mt.group(3))
        return ("\t{\n\t.reg .b32\t%rm_q;\n" + quotient("%rm_q", src, d).replace("\t{\n", "").replace("\t}\n", "")
                + f"\tmul.lo.u32\t%rm_q, %rm_q, {d};\n\tsub.u32\t{dst}, {src}, %rm_q;\n\t}}\n")
    ptx = re.sub(r"\tdiv\.u32\t(%\w+), (%\w+), (\d+);\n", div, ptx)
    ptx = re.sub(r"\trem\.u32\t(%\w+), (%\w+), (\d+);\n", rem, ptx)
    old = "\tdiv.u32\t%batch, %tile, %product_tiles;\n\trem.u32\t%product_tile, %tile, %product_tiles;\n"
    new = ("\t{\n\t.reg .pred\t%p_later_product;\n\tsetp.ge.u32\t%p_later_product, %tile, %product_tiles;\n"
           "\tmov.u32\t%batch, 0;\n\tmov.u32\t%product_tile, %tile;\n"
           "\t@%p_later_product div.u32\t%batch, %tile, %product_tiles;\n"
           "\t@%p_later_product rem.u32\t%product_tile, %tile, %product_tiles;\n\t}\n")
    assert ptx.count(old) == 2
    return ptx.replace(old, new)

with open(".gpu/walk.txt", "w") as specs:
    for member, body in MEMBERS.items():
        for kind in ("base", "fast"):
            name = f"{kind}_{member}"
            specs.write(f"name: {name}, {HEAD}, {body}\n")
            if kind == "fast":
                ptx = subprocess.run(["target/release/gemm-codegen", "emit", f"name: {name}, {HEAD}, {body}"],
                                     check=True, capture_output=True, text=True).stdout
                open(f".gpu/ptx/{name}.ptx", "w").write(fast(ptx))
