#!/usr/bin/env bash
# Lead's round 7 on the H200: why 16-bit layer_norm through Paddle trails its float32 (round 6)
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
for e in layer_norm rms_norm; do
  (timeout 200 python3 -m opgen build examples/$e --arch 90 > "$OUT/build-$e.txt" 2>&1; echo "rc=$?" >> "$OUT/build-$e.txt") &
done; wait
for e in layer_norm rms_norm; do
  timeout 60 python3 scripts/gpu/rowwise_call_profile.py $e > "$OUT/calls-$e.txt" 2>&1; echo "rc=$?" >> "$OUT/calls-$e.txt"
done
timeout 120 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  python3 scripts/gpu/rowwise_call_profile.py layer_norm --calls 1 2>&1 | grep -v "^==PROF==" > "$OUT/ncu-layer_norm.txt"; echo "rc=$?" >> "$OUT/ncu-layer_norm.txt"
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
