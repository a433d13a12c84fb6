#!/bin/bash
# The hold: its GPU test (and the math-only probe test, not run since its golden changed);
# the sm90 set at the three smallest squares, two processes launching directly (--no-hold,
# the method before) and two queued behind the hold; then the 15 squares behind the hold.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
.gpu/tests/gpu --ignored --test-threads 1 a_hold_times math_only_probes 2>&1 | grep -E "^test |test result" > $OUT/tests.log
cat $OUT/tests.log
SMALL=1024x1024x1024,1536x1536x1536,2048x2048x2048
for run in direct1 held1 direct2 held2; do
  case $run in direct*) flag=--no-hold;; *) flag=;; esac
  .gpu/bin/gemm-bench --set sm90 --shapes $SMALL --check $flag --out $OUT/small-$run.json > $OUT/small-$run.log 2>&1
  echo "$run: $(grep -ci fail $OUT/small-$run.log) fail"
done
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 330 --out $OUT/squares.json --markdown $OUT/squares.md > $OUT/squares.log 2>&1
echo "squares: $(grep -ci fail $OUT/squares.log) fail, $(grep -ci 'not run' $OUT/squares.log) not run"
