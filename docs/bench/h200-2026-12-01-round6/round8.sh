#!/usr/bin/env bash
# Lead's round 8 on the H200: layer_norm with OPGEN_ROW_BLOCK_VECS=2 (16-bit rows of 4096: 256
# threads of 16 values, as float32 has) against the default, by rowwise_call_profile.py
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
(timeout 150 python3 -m opgen build examples/layer_norm --arch 90 > "$OUT/build-default.txt" 2>&1; echo "rc=$?" >> "$OUT/build-default.txt") &
(OPGEN_NVCC_FLAGS=-DOPGEN_ROW_BLOCK_VECS=2 timeout 150 python3 -m opgen build examples/layer_norm --arch 90 > "$OUT/build-vecs2.txt" 2>&1; echo "rc=$?" >> "$OUT/build-vecs2.txt") &
wait
for i in 1 2; do
  timeout 30 python3 scripts/gpu/rowwise_call_profile.py layer_norm >> "$OUT/calls-default.txt" 2>&1
  OPGEN_NVCC_FLAGS=-DOPGEN_ROW_BLOCK_VECS=2 timeout 30 python3 scripts/gpu/rowwise_call_profile.py layer_norm >> "$OUT/calls-vecs2.txt" 2>&1
done
timeout 40 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --launch-skip 16 --launch-count 4 \
  env OPGEN_NVCC_FLAGS=-DOPGEN_ROW_BLOCK_VECS=2 python3 scripts/gpu/rowwise_call_profile.py layer_norm --calls 1 2>&1 | grep -v "^==PROF==" > "$OUT/ncu-vecs2.txt"
