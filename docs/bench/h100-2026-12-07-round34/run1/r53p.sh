#!/usr/bin/env bash
# Stop 51, after .gpu/bin/stage.sh with part.0..6: Paddle 2.6.2 installed, then at .gpu/src.commit,
# side by side: embedding through Paddle (9bab71b's sorted backward: 204 generated tests, memcheck,
# embedding_op.py against torch), the broadcasting mul's opgen bench (issue 11's general pattern,
# not run since round 30), relu6's per-call section.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat .gpu/src.commit; } > $OUT/start.txt
bash .gpu/bin/stage.sh >> $OUT/start.txt 2>&1 && bash .gpu/bin/install.sh > $OUT/install.log 2>&1 ||
  { tail -n 20 $OUT/install.log; exit 1; }
date -u +%FT%TZ >> $OUT/start.txt
TAG=r53p bash scripts/gpu/side_by_side.sh ${LIMIT:-300} d:embedding m:mul-bench p:percall > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; grep -h "passed\|failed\|ERROR SUMMARY\|clear error\|right rows" /tmp/side-by-side/d.log | tail -n 12
sed -n '/ids \[65536\]/,/zipf     float16/p' /tmp/side-by-side/d.log
tail -n 4 /tmp/side-by-side/m.log /tmp/side-by-side/p.log
grep "forward\|backward" /tmp/side-by-side/m/bench-mul.txt | grep -v naive | awk -F'│' '{print $2,$3,$4,$5,$6,$8,$9}' | head -40
grep -h "call\|us" /tmp/side-by-side/p/*.txt | head -30
