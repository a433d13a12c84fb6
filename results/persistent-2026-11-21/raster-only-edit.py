import sys
# Grouped raster for a one-tile-per-block grid, as a hand edit of emitted PTX (an experiment;
# the feature is `schedule: persistent`). Usage: raster-only-edit.py FILE.ptx G BM BN
path, G, bm, bn = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t = open(path).read()
old = f"""	mov.u32	%block_n, %ctaid.x;
	mul.lo.u32	%block_n, %block_n, {bn};
	mov.u32	%block_m, %ctaid.y;
	mul.lo.u32	%block_m, %block_m, {bm};
"""
assert old in t
# Bands of G tile columns; inside a band the linear block ID walks across the G columns first.
new = f"""	{{
	.reg .b32 %gn, %gm, %id, %gsz, %grp, %in, %first, %cols;
	mov.u32	%gn, %nctaid.x;
	mov.u32	%gm, %nctaid.y;
	mov.u32	%id, %ctaid.y;
	mov.u32	%in, %ctaid.x;
	mad.lo.u32	%id, %id, %gn, %in;
	mul.lo.u32	%gsz, %gm, {G};
	div.u32	%grp, %id, %gsz;
	rem.u32	%in, %id, %gsz;
	mul.lo.u32	%first, %grp, {G};
	sub.u32	%cols, %gn, %first;
	min.u32	%cols, %cols, {G};
	rem.u32	%block_n, %in, %cols;
	add.u32	%block_n, %block_n, %first;
	div.u32	%block_m, %in, %cols;
	}}
	mul.lo.u32	%block_n, %block_n, {bn};
	mul.lo.u32	%block_m, %block_m, {bm};
"""
open(path, "w").write(t.replace(old, new))
