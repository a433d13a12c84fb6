"""Pipe-ceiling probes: a real kernel with every memory access removed (HMMA count kept)."""
import re, sys
def probe(src, old, new, exit_half=False):
    out = []
    for line in open(src).read().splitlines():
        if any(s in line for s in ("cp.async", "bar.sync", "ldmatrix")):
            continue
        line = line.replace(old, new)
        out.append(line)
        if line.strip().startswith("mov.u32\t%k_tile, 0;"):
            fa = int(re.search(r"%fa<(\d+)>", "\n".join(out)).group(1))
            fb = int(re.search(r"%fb<(\d+)>", "\n".join(out)).group(1))
            out += [f"\tmov.b32\t%fa{i}, 0x3f803f80;" for i in range(fa)]
            out += [f"\tmov.b32\t%fb{i}, 0x3c003c00;" for i in range(fb)]
        if exit_half and line.strip().startswith("rem.u32\t%warp_n"):
            out.append("\tsetp.ge.u32\t%p_more, %warp, 4;")
            out.append("\t@%p_more ret;")
            out.append("\tshl.b32\t%k_tiles, %k_tiles, 1;")
    return "\n".join(out) + "\n"
d = ".gpu-tune/old/"
open(".gpu-tune/ptx/p01_probe_w4x2.ptx", "w").write(probe(d+"o01_128x128x32_s3.ptx", "o01_128x128x32_s3", "p01_probe_w4x2"))
open(".gpu-tune/ptx/p02_probe_w8x1.ptx", "w").write(probe(d+"o06_128x256x64_s3.ptx", "o06_128x256x64_s3", "p02_probe_w8x1"))
open(".gpu-tune/ptx/p03_probe_w4x1.ptx", "w").write(probe(d+"o06_128x256x64_s3.ptx", "o06_128x256x64_s3", "p03_probe_w4x1", exit_half=True))
