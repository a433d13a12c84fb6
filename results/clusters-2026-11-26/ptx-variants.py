#!/usr/bin/env python3
"""The hand-edited PTX variants of run2.sh and run3.sh (`gemm-bench --ptx-dir .gpu/ptx`).

Run from the repository root at commit 53bcc4b (the cluster kernel before this session's
change), with gemm-codegen built:
    python3 results/clusters-2026-11-26/ptx-variants.py
Each variant starts from the 192x96 ping-pong kernel in a 1x2 cluster (A multicast).
"""
import os, re, subprocess

SPEC = ("arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), "
        "consumers: pingpong, tile: 192x96x64, swizzle: 128B, stages: 5, "
        "copy: tma(multicast = 2), cluster: 1x2")
OUT = ".gpu/ptx"


def relax(s):
    # The start's cluster barrier arrives relaxed (the init fence has released the inits).
    a = "barrier.cluster.arrive.release;"
    i = s.index(a)
    return s[:i] + "barrier.cluster.arrive.relaxed;" + s[i + len(a):]


def drain(s):
    # No cluster barrier at the exit: the producer waits for every slot's release first.
    s = s.replace("\t@%p_done bra\t$L_exit;\n", "\t@%p_done bra\t$L_drain;\n")
    tail = ("\tbra.uni\t$L_producer_tile;\n\t}\n\n$L_exit:\n\t// No block leaves while its peer may "
            "still multicast into it or arrive on its barriers.\n\tbarrier.cluster.arrive.release;\n"
            "\tbarrier.cluster.wait.acquire;\n\tret;\n}")
    assert tail in s
    new = ("\tbra.uni\t$L_producer_tile;\n"
           "$L_drain:\n\tmov.u32\t%k_tile, 0;\n$L_drain_next:\n"
           "\tshl.b32\t%bar_offset, %slot, 3;\n\tadd.u32\t%empty_addr, %empty_bar, %bar_offset;\n"
           "\txor.b32\t%parity, %phase, 1;\n"
           "$L_drain_wait:\n\tmbarrier.try_wait.parity.shared::cta.b64\t%p_ready, [%empty_addr], %parity;\n"
           "\t@!%p_ready bra\t$L_drain_wait;\n"
           "\tadd.u32\t%slot, %slot, 1;\n\tsetp.eq.u32\t%p_wrap, %slot, 5;\n\t@%p_wrap mov.u32\t%slot, 0;\n"
           "\t@%p_wrap xor.b32\t%phase, %phase, 1;\n"
           "\tadd.u32\t%k_tile, %k_tile, 1;\n\tsetp.lt.u32\t%p_more, %k_tile, 5;\n\t@%p_more bra\t$L_drain_next;\n"
           "\t}\n\n$L_exit:\n\tret;\n}")
    return s.replace(tail, new)


def nomc(s):
    # Each block loads all of A itself (two 96-row boxes); the peer arrivals stay.
    old = re.search(r"\tcp\.async\.bulk\.tensor\.3d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                    r"\.multicast::cluster\t\[%slice_base\+0\], \[%a_map, \{ %coord, %a_row, %a_matrix \}\], "
                    r"\[%full_addr\], %cta_mask;\n", s)
    new = ("\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes\t[%stage_base+0], "
           "[%a_map, { %coord, %block_m, %a_matrix }], [%full_addr];\n"
           "\tadd.u32\t%a_row, %block_m, 96;\n"
           "\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes\t[%stage_base+12288], "
           "[%a_map, { %coord, %a_row, %a_matrix }], [%full_addr];\n")
    return s.replace(old.group(0), new)


def free(s):
    # That, without the peer arrivals: the empty barriers count this block's 4 warps.
    s = nomc(s)
    s = s.replace("\t@%p_release mbarrier.arrive.shared::cluster.b64\t_, [%prev_peer_empty];\n", "")
    s = s.replace("\t@%p_lane0 mbarrier.arrive.shared::cluster.b64\t_, [%prev_peer_empty];\n", "")
    for offset in (0, 8, 16, 24, 32):
        s = s.replace("[%%empty_bar+%d], 8;" % offset, "[%%empty_bar+%d], 4;" % offset)
    return s


VARIANTS = {
    "cl_relax": [relax],
    "cl_nomc": [nomc],
    "cl_free": [free],
    "cl_mc2": [relax, drain],
    "cl_free2": [relax, drain, free],
}

os.makedirs(OUT, exist_ok=True)
for name, edits in VARIANTS.items():
    s = subprocess.run(["target/release/gemm-codegen", "emit", f"name: {name}, {SPEC}"],
                       check=True, capture_output=True, text=True).stdout
    for edit in edits:
        t = edit(s)
        assert t != s, (name, edit.__name__)
        s = t
    open(os.path.join(OUT, name + ".ptx"), "w").write(s)
