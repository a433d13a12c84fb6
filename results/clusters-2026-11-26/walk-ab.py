#!/usr/bin/env python3
"""run20.sh's A/B of the landed walk (commit e137c19): `new_*` as generated, `old_*` the same
spec emitted by the commit before it (gemm-codegen built from dabdbcc, its path the first
argument), written to .gpu/ptx; the spec file to .gpu/walk-ab.txt."""
import subprocess, sys

OLD = sys.argv[1]
MEMBERS = {
    "192x96_pp": "tile: 192x96x64, consumers: pingpong, stages: 5, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x64_pp": "tile: 128x64x64, consumers: pingpong, stages: 8, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x128_pp": "tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x256": "tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "64x128_sk": "tile: 64x128x64, consumers: 1, stages: 6, swizzle: 128B, schedule: persistent(raster = m, group = 8, tail = stream_k)",
}
HEAD = "arch: sm_90a, dtype: bf16, mma: wgmma, copy: tma"
with open(".gpu/walk-ab.txt", "w") as specs:
    for member, body in MEMBERS.items():
        for kind in ("new", "old"):
            name = f"{kind}_{member}"
            specs.write(f"name: {name}, {HEAD}, {body}\n")
            if kind == "old":
                ptx = subprocess.run([OLD, "emit", f"name: {name}, {HEAD}, {body}"],
                                     check=True, capture_output=True, text=True).stdout
                open(f".gpu/ptx/{name}.ptx", "w").write(ptx)
