#!/usr/bin/env bash
# Stop 52, after the parts: Paddle 2.6.2 installed, then at .gpu/src.commit (the column inputs
# hoisted in the row-wise kernels with column sums), side by side: the four row-wise examples'
# generated tests on the GPU in every dtype, then memcheck over their float32 and bfloat16 tests;
# relu6's per-call section.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat .gpu/src.commit; } > $OUT/start.txt
bash .gpu/bin/stage.sh >> $OUT/start.txt 2>&1 && bash .gpu/bin/install.sh > $OUT/install.log 2>&1 ||
  { tail -n 20 $OUT/install.log; exit 1; }
date -u +%FT%TZ >> $OUT/start.txt
TAG=r55p bash scripts/gpu/side_by_side.sh ${LIMIT:-420} a:rowwise,rowwise-memcheck p:percall > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; grep -h "passed\|failed\|ERROR SUMMARY" /tmp/side-by-side/a.log | tail -n 16
tail -n 4 /tmp/side-by-side/a.log /tmp/side-by-side/p.log
grep -h "call\|us" /tmp/side-by-side/p/*.txt | head -30
