#!/usr/bin/env bash
# Stop 50, after r51p.sh (Paddle installed, /tmp/src at .gpu/src.commit): per call, relu6's bench,
# issue 11's shapes (bias_gelu, mul's general broadcast), then where a call's time goes.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat /tmp/src/src.commit; } > $OUT/start.txt
TAG=r51b bash scripts/gpu/side_by_side.sh ${LIMIT:-400} p:percall,bench,broadcast-bench > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
( cd /tmp/src && source .gpu/bin/env.sh && export CUDA_HOME=/usr/local/cuda GLOG_minloglevel=3 &&
  timeout ${FLOOR_LIMIT:-130} python3 scripts/gpu/entry_floor.py --device gpu --arch 90 ) > $OUT/entry-floor.txt 2>&1
echo "entry floor rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; tail -n 5 /tmp/side-by-side/p.log; tail -n 20 $OUT/entry-floor.txt
for f in /tmp/side-by-side/p/bench-*.txt /tmp/side-by-side/p/percall*.txt; do echo "== $f"; grep "forward\|backward\|call" $f | grep -v "naive" | awk -F'│' '{print $2,$3,$5,$6,$8,$9,$10}' | head -40; done
