#!/usr/bin/env bash
# Stop 50, after .gpu/bin/stage.sh with part.0..4: Paddle 2.6.2 installed, then at .gpu/src.commit
# every kind's generated tests on gpu:0 (the custom kind's in-place test_inplace_autograd since
# 09da261 for the first time on a GPU), embedding through Paddle.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat .gpu/src.commit; } > $OUT/start.txt
bash .gpu/bin/stage.sh >> $OUT/start.txt 2>&1 && bash .gpu/bin/install.sh > $OUT/install.log 2>&1 ||
  { tail -n 20 $OUT/install.log; exit 1; }
date -u +%FT%TZ >> $OUT/start.txt
TAG=r51p bash scripts/gpu/side_by_side.sh ${LIMIT:-420} d:embedding e:custom-inplace,custom-dynamic a:tests b:broadcast c:rowwise > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; tail -n 30 /tmp/side-by-side/d.log; grep -h "passed\|failed\|error\|rc=" /tmp/side-by-side/[abce].log | tail -n 40
