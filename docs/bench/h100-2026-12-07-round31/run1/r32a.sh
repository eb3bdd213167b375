#!/usr/bin/env bash
# Round 32, call 7: the last parts staged, Paddle 2.6.2 installed, then (a snapshot of .gpu/src.commit)
# every generated test on gpu:0: relu6 + a fresh op, bias_gelu + mul, the four row-wise examples,
# bad calls, deploy checks; embedding (kind: custom); side by side.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat .gpu/src.commit; } > $OUT/start.txt
bash .gpu/bin/stage.sh >> $OUT/start.txt 2>&1 && bash .gpu/bin/install.sh > $OUT/install.log 2>&1 ||
  { tail -n 20 $OUT/install.log; exit 1; }
date -u +%FT%TZ >> $OUT/start.txt
TAG=r32a bash scripts/gpu/side_by_side.sh ${LIMIT:-400} a:tests b:broadcast c:rowwise d:embedding > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; grep -h "passed\|failed\|error\|rc=" /tmp/side-by-side/*.log | tail -n 40
