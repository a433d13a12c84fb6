#!/usr/bin/env python3
"""run17.sh's A/B of the TMA-store epilogue: `new_*` as generated (each box waits for the store
before last, behind an extra warpgroup barrier), `old_*` the same kernel with the change
reverted in its PTX (each box waits for the last box's store before its barrier), written to
.gpu/ptx for `gemm-bench --ptx-dir`; the spec file to /tmp/ab.txt (carried as .gpu/ab.txt)."""
import subprocess

MEMBERS = {
    "192x96_pp": "tile: 192x96x64, consumers: pingpong, stages: 5, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x128_pp": "tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x64_pp": "tile: 128x64x64, consumers: pingpong, stages: 8, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x192_pp": "tile: 128x192x64, consumers: pingpong, stages: 4, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x256": "tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, schedule: persistent(raster = m, group = 8)",
    "128x256_c2x1": "tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), schedule: persistent(raster = m, group = 8), cluster: 2x1",
    "256x160": "tile: 256x160x32, consumers: 2, stages: 7, swizzle: 64B, schedule: persistent(raster = m, group = 8)",
}
HEAD = "arch: sm_90a, dtype: bf16, mma: wgmma"
WAIT1 = "\t@%p_store_leader cp.async.bulk.wait_group.read\t1;\n\tbar.sync\t%store_bar, 128;\n"
TAIL_NEW = "\tfence.proxy.async.shared::cta;\n\tbar.sync\t%store_bar, 128;\n"
TAIL_OLD = "\tfence.proxy.async.shared::cta;\n\t@%p_store_leader cp.async.bulk.wait_group.read\t0;\n\tbar.sync\t%store_bar, 128;\n"

with open("/tmp/ab.txt", "w") as specs:
    for member, body in MEMBERS.items():
        text = f"{HEAD}, {body}" if "copy:" in body else f"{HEAD}, copy: tma, {body}"
        for kind in ("new", "old"):
            name = f"{kind}_{member}"
            specs.write(f"name: {name}, {text}\n")
            if kind == "old":
                ptx = subprocess.run(["target/release/gemm-codegen", "emit", f"name: {name}, {text}"],
                                     check=True, capture_output=True, text=True).stdout
                boxes = ptx.count(WAIT1)
                assert boxes > 0 and ptx.count(TAIL_NEW) == boxes, (member, boxes, ptx.count(TAIL_NEW))
                ptx = ptx.replace(WAIT1, "").replace(TAIL_NEW, TAIL_OLD)
                open(f".gpu/ptx/{name}.ptx", "w").write(ptx)
