#!/usr/bin/env bash
# Round 30 (run from the tree root after stage.sh and install.sh): the row-wise examples' generated
# tests through Paddle 2.6.2 on gpu:0 in all four dtypes and under compute-sanitizer memcheck, the
# row-wise fuzzer's generated ops on the GPU (the snapshot in .gpu/src.tgz); then Nsight Compute on
# softmax's forward at 1024 x 32768, float32 (the miss) against bfloat16, on the launcher alone.
R=/tmp/r30; rm -rf $R; mkdir -p $R
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  date -u +%FT%TZ; cat .gpu/src.commit; } > $R/start.txt
OUT=$OUT TAG=r30a R=/tmp/r30-sbs bash scripts/gpu/side_by_side.sh ${LIMIT:-330} \
  c:rowwise,rowwise-memcheck f:rowwise-fuzz > $R/side-by-side.txt 2>&1
echo "side by side rc=$?" >> $R/start.txt
mkdir -p /tmp/prebuilt && xz -dc .gpu/pre44r/rowwise.tar.xz | tar xf - -C /tmp/prebuilt
OUT=$R timeout 150 bash scripts/gpu/rowwise_ncu.sh /tmp/prebuilt/rowwise/v1 \
  "softmax 1024x32768 float32" "softmax 1024x32768 bfloat16" "softmax 4096x4096 float32" \
  >> $R/start.txt 2>&1
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r30b.tgz" -C $R .
cat $R/start.txt; grep -h "passed\|failed\|ERROR SUMMARY\|rc=" /tmp/r30-sbs/*.log | tail -n 30
