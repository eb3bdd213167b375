#!/usr/bin/env bash
# Stop 50, after .gpu/bin/stage.sh with part.0..6: Paddle 2.6.2 installed, then at .gpu/src.commit
# embedding through Paddle (the sorted backward's keys window, pieces of 16: 204 generated tests,
# memcheck, embedding_op.py with Zipf ids against torch), then relu6's bench with the baseline fix.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat .gpu/src.commit; } > $OUT/start.txt
bash .gpu/bin/stage.sh >> $OUT/start.txt 2>&1 && bash .gpu/bin/install.sh > $OUT/install.log 2>&1 ||
  { tail -n 20 $OUT/install.log; exit 1; }
date -u +%FT%TZ >> $OUT/start.txt
TAG=r52p bash scripts/gpu/side_by_side.sh ${LIMIT:-440} d:embedding > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; grep -h "passed\|failed\|ERROR SUMMARY\|clear error\|right rows" /tmp/side-by-side/d.log | tail -n 12
sed -n '/ids \[65536\]/,/zipf     float16/p' /tmp/side-by-side/d.log
grep "forward\|backward" /tmp/side-by-side/d/bench-relu6.txt | grep -v naive | awk -F'│' '{print $2,$3,$4,$5,$6,$8,$9}' | head -60
