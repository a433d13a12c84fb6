#!/usr/bin/env python3
"""Per-block %globaltimer stamps into C (whose stores are removed); see cta_times.rs."""
import re, subprocess, sys, importlib.util
spec_v = importlib.util.spec_from_file_location("v", "results/clusters-2026-11-26/ptx-variants.py")

def emit(name, body):
    return subprocess.run(["target/release/gemm-codegen", "emit", f"name: {name}, {body}"],
                          check=True, capture_output=True, text=True).stdout

def stamp(slot, cond):
    return (f"\tsetp.eq.u32\t%p_ts, {cond};\n\tmov.u64\t%ts_now, %globaltimer;\n"
            f"\t@%p_ts st.global.u64\t[%ts_base+{slot*8}], %ts_now;\n")

def instrument(s, name):
    first = "\tmov.u32\t%thread, %tid.x;\n"
    assert first in s
    s = s.replace(first, first +
        "\t.reg .b64\t%ts_base, %ts_now, %ts_id;\n\t.reg .b32\t%ts_flag, %ts_cta, %ts_smid;\n\t.reg .pred\t%p_ts, %p_ts1;\n"
        f"\tld.param.u64\t%ts_base, [{name}_c];\n\tcvta.to.global.u64\t%ts_base, %ts_base;\n"
        "\tmov.u32\t%ts_cta, %ctaid.x;\n\tmul.wide.u32\t%ts_id, %ts_cta, 64;\n\tadd.u64\t%ts_base, %ts_base, %ts_id;\n"
        "\tmov.u32\t%ts_flag, 0;\n"
        + stamp(0, "%thread, 0") +
        "\tmov.u32\t%ts_smid, %smid;\n\tcvt.u64.u32\t%ts_id, %ts_smid;\n"
        + ("\t{\n\t.reg .b32\t%ts_r;\n\t.reg .b64\t%ts_r64;\n\tmov.u32\t%ts_r, %cluster_ctarank;\n\tcvt.u64.u32\t%ts_r64, %ts_r;\n\tshl.b64\t%ts_r64, %ts_r64, 32;\n\tor.b64\t%ts_id, %ts_id, %ts_r64;\n\t}\n")
        + "\t@%p_ts st.global.u64\t[%ts_base+48], %ts_id;\n", 1)
    # producer: first k loop start
    prod = "\tmov.u32\t%k_tile, 0;\n\tmov.u32\t%k_coord, 0;\n$L_produce:\n"
    assert prod in s
    s = s.replace(prod, stamp(1, "%ts_flag, 0") + "\tmov.u32\t%ts_flag, 1;\n" + prod)
    # consumer: first full barrier passed (thread 128)
    wait = "\t@!%p_ready bra\t$L_wait_full;\n"
    assert s.count(wait) == 1
    s = s.replace(wait, wait + "\tsetp.eq.u32\t%p_ts1, %ts_flag, 0;\n" + stamp(2, "%thread, 128")[:-0 or None].replace("\t@%p_ts st", "\tand.pred\t%p_ts, %p_ts, %p_ts1;\n\t@%p_ts st") + "\t@%p_ts mov.u32\t%ts_flag, 1;\n")
    done = "\twgmma.wait_group.sync.aligned\t0;\n"
    assert s.count(done) == 1
    s = s.replace(done, done + stamp(3, "%thread, 128"))
    cd = "$L_consumers_done:\n"
    s = s.replace(cd, cd + stamp(7, "%thread, 128"))
    if "$L_producer_drain:\n" in s:
        s = s.replace("$L_producer_drain:\n", "$L_producer_drain:\n" + stamp(4, "%thread, 0"))
    s = s.replace("$L_exit:\n\tret;", "$L_exit:\n" + stamp(5, "%thread, 0") + "\tret;")
    s = re.sub(r"\t@%p_store_leader cp\.async\.bulk\.tensor\.3d\.global\.shared::cta\.bulk_group[^\n]*\n", "", s)
    return s

P = "arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 128B, stages: 5"
out = sys.argv[1]
specs = {
    "t_plain": f"{P}, copy: tma",
    "t_mc": f"{P}, copy: tma(multicast = 2), cluster: 1x2",
    "t_free": f"{P}, copy: tma(multicast = 2), cluster: 1x2",
}
v = importlib.util.module_from_spec(spec_v)
src = open("results/clusters-2026-11-26/ptx-variants.py").read().split("VARIANTS = {")[0]
exec(src, v.__dict__)
with open(f"{out}/specs.txt", "w") as f:
    for name, body in specs.items():
        s = emit(name, body)
        if name == "t_free":
            s = v.free(s)
        open(f"{out}/{name}.ptx", "w").write(instrument(s, name))
        f.write(f"name: {name}, {body}\n")

def emulate(s):
    """The cluster kernel without a cluster: rank = ctaid & 1, cluster id = ctaid >> 1."""
    s = s.replace(".reqnctapercluster 2, 1, 1\n", "")
    s = s.replace("\tmov.u32\t%rank, %cluster_ctarank;\n",
                  "\t{\n\t.reg .b32\t%em;\n\tmov.u32\t%em, %ctaid.x;\n\tand.b32\t%rank, %em, 1;\n\t}\n")
    s = s.replace("\tmov.u32\t%ts_r, %cluster_ctarank;\n", "\tmov.u32\t%ts_r, 0;\n")
    s = re.sub(r"\tmov\.u32\t(%\w+), %clusterid\.x;\n", r"\tmov.u32\t\1, %ctaid.x;\n\tshr.u32\t\1, \1, 1;\n", s)
    s = re.sub(r"\tmov\.u32\t(%\w+), %nclusterid\.x;\n", r"\tmov.u32\t\1, %nctaid.x;\n\tshr.u32\t\1, \1, 1;\n", s)
    s = s.replace("\tbarrier.cluster.arrive.relaxed;\n\tbarrier.cluster.wait.acquire;\n", "\tbar.sync\t0;\n")
    s = s.replace("\tmapa.shared::cluster.u32\t%peer_empty_bar, %empty_bar, %peer;\n", "\tmov.u32\t%peer_empty_bar, %empty_bar;\n")
    code = "\n".join(l for l in s.split("\n") if not l.strip().startswith("//"))
    assert "cluster_ctarank" not in code and "clusterid" not in code and "barrier.cluster" not in code, "left"
    return s

src = open(f"{out}/t_free.ptx").read().replace("t_free", "t_emul")
open(f"{out}/t_emul.ptx", "w").write(emulate(src))
with open(f"{out}/specs.txt", "a") as f:
    f.write(f"name: t_emul, {specs['t_free']}\n")

def smid_start(s, plain_map):
    """Each block starts its walk where the plain launch put the block on its SM (a table
    by %smid, from a plain launch's placement): the plain launch's tiles per SM, in any launch."""
    inv = {sm: b for b, sm in enumerate(plain_map)}
    spare = [b for b, sm in enumerate(plain_map) if sm in (120, 121, 122, 123)]
    for sm in range(132):
        if sm not in inv:
            inv[sm] = spare.pop(0) if spare else 0
    table = ", ".join(str(inv[sm]) for sm in range(132))
    s = s.replace(".extern .shared", f".global .align 4 .u32 smid_start[132] = {{ {table} }};\n\n.extern .shared", 1)
    old = "\tmov.u32\t%tile, %ctaid.x;\n"
    assert s.count(old) == 2
    new = ("\t{\n\t.reg .b32\t%sm;\n\t.reg .b64\t%sm_at;\n\tmov.u32\t%sm, %smid;\n\tmov.u64\t%sm_at, smid_start;\n"
           "\tmad.wide.u32\t%sm_at, %sm, 4, %sm_at;\n\tld.global.u32\t%tile, [%sm_at];\n\t}\n")
    return s.replace(old, new)

rows = [l.split() for l in open("results/clusters-2026-11-26/timelines/run9/t_plain---3072x3072x3072.txt")
        if l.split() and l.split()[0].isdigit()]
plain_map = [int(r[1]) for r in rows]
src = open(f"{out}/t_plain.ptx").read().replace("t_plain", "t_smid")
open(f"{out}/t_smid.ptx", "w").write(smid_start(src, plain_map))
with open(f"{out}/specs.txt", "a") as f:
    f.write(f"name: t_smid, {specs['t_plain']}\n")

def start_by(s, expr_lines):
    """The walk starts at a position computed from %ctaid.x (in %sb) by `expr_lines` into %tile."""
    old = "\tmov.u32\t%tile, %ctaid.x;\n"
    assert s.count(old) == 2
    new = "\t{\n\t.reg .b32\t%sb, %st;\n\tmov.u32\t%sb, %ctaid.x;\n" + expr_lines + "\t}\n"
    return s.replace(old, new)

# Column strips: block pair i = b / 2 takes row i mod 16, column pair i / 16 of the 8-wide band.
COLUMNS = ("\tshr.u32\t%st, %sb, 1;\n\tand.b32\t%st, %st, 15;\n\tshl.b32\t%tile, %st, 3;\n"
           "\tshr.u32\t%st, %sb, 5;\n\tshl.b32\t%st, %st, 1;\n\tadd.u32\t%tile, %tile, %st;\n"
           "\tand.b32\t%st, %sb, 1;\n\tadd.u32\t%tile, %tile, %st;\n")
# Spread: block b takes position (b mod 8) * 16 + b / 8.
SPREAD = ("\tand.b32\t%st, %sb, 7;\n\tshl.b32\t%tile, %st, 4;\n\tshr.u32\t%st, %sb, 3;\n\tadd.u32\t%tile, %tile, %st;\n")
for name, lines in (("t_cols", COLUMNS), ("t_spread", SPREAD)):
    src = open(f"{out}/t_plain.ptx").read().replace("t_plain", name)
    open(f"{out}/{name}.ptx", "w").write(start_by(src, lines))
    with open(f"{out}/specs.txt", "a") as f:
        f.write(f"name: {name}, {specs['t_plain']}\n")

def cluster_smid_start(s, plain_map):
    """The cluster kernel with group 4: cluster tile i is the plain walk's block pair (2i, 2i+1);
    each cluster starts where the plain launch put the pair on its rank-0 block's TPC."""
    inv = {sm: b for b, sm in enumerate(plain_map)}
    table = []
    for sm in range(132):
        tpc0 = sm & ~1
        b = inv.get(tpc0, inv.get(tpc0 + 1))
        table.append(0 if b is None else b // 2)
    s = s.replace(".extern .shared", ".global .align 4 .u32 smid_start[132] = { %s };\n\n.extern .shared" % ", ".join(map(str, table)), 1)
    old = "\tmov.u32\t%tile, %clusterid.x;\n"
    assert s.count(old) == 2
    new = ("\t{\n\t.reg .b32\t%sm;\n\t.reg .b64\t%sm_at;\n\tmov.u32\t%sm, %smid;\n\tmov.u64\t%sm_at, smid_start;\n"
           "\tmad.wide.u32\t%sm_at, %sm, 4, %sm_at;\n\tld.global.u32\t%tile, [%sm_at];\n\t}\n")
    return s.replace(old, new)

body4 = specs["t_mc"].replace("group = 8", "group = 4")
for name, edit in (("t_mc4", None), ("t_mc4_smid", cluster_smid_start)):
    s = instrument(emit(name, body4), name)
    if edit:
        s = edit(s, plain_map)
    open(f"{out}/{name}.ptx", "w").write(s)
    with open(f"{out}/specs.txt", "a") as f:
        f.write(f"name: {name}, {body4}\n")

def start_stamps(s):
    """Where the producer's first 0.8 us go: slot 4 after the ring's bar.sync (thread 0), slot 5
    after the producer's setmaxnreg and the tensor-map prefetches (the leader)."""
    old = "\tbar.sync\t0;\n"
    assert s.count(old) == 1
    s = s.replace(old, old + stamp(4, "%thread, 0"))
    old = "\tprefetch.tensormap\t[%b_map];\n"
    assert s.count(old) == 1
    s = s.replace(old, old + stamp(5, "%thread, 0"))
    return s.replace("$L_exit:\n" + stamp(5, "%thread, 0"), "$L_exit:\n")

src = open(f"{out}/t_plain.ptx").read().replace("t_plain", "t_start")
open(f"{out}/t_start.ptx", "w").write(start_stamps(src))
with open(f"{out}/specs.txt", "a") as f:
    f.write(f"name: t_start, {specs['t_plain']}\n")

def instrument_keep2(s, name):
    marker = "\t// The other consumer takes the walk's next tile; this one the tile after it.\n"
    assert s.count(marker) == 1
    s = s.replace(marker, stamp(4, "%thread, 128") + marker)
    first = "\tmov.u32\t%thread, %tid.x;\n"
    s = s.replace(first, first +
        "\t.reg .b64\t%ts_base, %ts_now, %ts_id;\n\t.reg .b32\t%ts_flag, %ts_cta, %ts_smid, %ts_m, %ts_n;\n\t.reg .pred\t%p_ts, %p_ts1;\n"
        f"\tld.param.u64\t%ts_base, [{name}_c];\n\tcvta.to.global.u64\t%ts_base, %ts_base;\n"
        f"\tld.param.u32\t%ts_m, [{name}_m];\n\tld.param.u32\t%ts_n, [{name}_n];\n\tmul.wide.u32\t%ts_id, %ts_m, %ts_n;\n\tshl.b64\t%ts_id, %ts_id, 1;\n\tadd.u64\t%ts_base, %ts_base, %ts_id;\n"
        "\tmov.u32\t%ts_cta, %ctaid.x;\n\tmul.wide.u32\t%ts_id, %ts_cta, 64;\n\tadd.u64\t%ts_base, %ts_base, %ts_id;\n"
        "\tmov.u32\t%ts_flag, 0;\n" + stamp(0, "%thread, 0") +
        "\tmov.u32\t%ts_smid, %smid;\n\tcvt.u64.u32\t%ts_id, %ts_smid;\n\t@%p_ts st.global.u64\t[%ts_base+48], %ts_id;\n", 1)
    prod = "\tmov.u32\t%k_tile, 0;\n\tmov.u32\t%k_coord, 0;\n$L_produce:\n"
    s = s.replace(prod, stamp(1, "%ts_flag, 0") + "\tmov.u32\t%ts_flag, 1;\n" + prod)
    wait = "\t@!%p_ready bra\t$L_wait_full;\n"
    s = s.replace(wait, wait + "\tsetp.eq.u32\t%p_ts1, %ts_flag, 0;\n" + stamp(2, "%thread, 128").replace("\t@%p_ts st", "\tand.pred\t%p_ts, %p_ts, %p_ts1;\n\t@%p_ts st") + "\t@%p_ts mov.u32\t%ts_flag, 1;\n")
    done = "\twgmma.wait_group.sync.aligned\t0;\n"
    s = s.replace(done, done + stamp(3, "%thread, 128"))
    cd = "$L_consumers_done:\n\t// The buffers of C live as long as the block: its last stores must have read them.\n\t@%p_store_leader cp.async.bulk.wait_group\t0;\n"
    assert cd in s
    s = s.replace(cd, cd + stamp(7, "%thread, 128"))
    s = s.replace("$L_exit:\n\tret;", "$L_exit:\n" + stamp(5, "%thread, 0") + "\tret;")
    return s

for name, body in (("k_plain", specs["t_plain"]),):
    open(f"{out}/{name}.ptx", "w").write(instrument_keep2(emit(name, body), name))
    with open(f"{out}/specs.txt", "a") as f:
        f.write(f"name: {name}, {body}\n")
