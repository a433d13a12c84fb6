#!/bin/bash
# What the placement changes: ncu (one launch each, after 3 unprofiled) of the plain
# 192x96 kernel at 3072^3 under the starts of run12 (t_plain, t_spread, t_cols, t_smid),
# launched plain and in clusters of two.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sector_hit_rate.pct
for run in "t_plain -" "t_spread -" "t_cols -" "t_plain cluster12" "t_smid cluster12"; do
  set -- $run; k=$1; extra=$2; [ $extra = - ] && extra=""
  body=$(grep "name: $k," .gpu/probe/specs.txt)
  ncu --clock-control none --cache-control none --metrics $M --csv --page raw --launch-skip 3 --launch-count 1 \
    .gpu/bin/cta_times "$body" .gpu/probe/$k.ptx 3072x3072x3072 5 $extra 2>/dev/null | grep -v "^==" > /tmp/n.csv
  python3 - /tmp/n.csv "$k $2" <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr and len(r)==len(hdr) and r[0].isdigit():
        d=dict(zip(hdr,r)); print(f"{sys.argv[2]:18}", ' '.join(f"{k.split('__')[1]}={d[k]}" for k in hdr if k.startswith(('gpu__','dram__','lts__'))))
P
done > $OUT/ncu-placement.txt
cat $OUT/ncu-placement.txt
