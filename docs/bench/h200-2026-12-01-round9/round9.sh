#!/usr/bin/env bash
# Lead's round 9 on the H200 (Paddle shipped): bash .gpu/round9.sh A|B
#   A: builds the four rowwise examples (launcher with clusters); their generated tests on gpu:0;
#      then opgen bench of layer_norm and rms_norm (forward and backward through Paddle)
#   B: opgen bench of softmax and add_rms_norm; the examples' functors alone (rowwise_examples.sh)
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
PO="python3 -m opgen"
run() {  # run NAME TIMEOUT CMD...: output to $OUT/NAME.txt with its exit status
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1; echo "rc=$?" >> "$OUT/$name.txt"
}
bench_rows() {
  run bench-$1 170 $PO bench examples/$1 --device gpu --shapes 4096x4096,16384x1024,65536x256,1024x32768,262144x128 \
    --dtype float32 --dtype bfloat16 --dtype float16 --json "$OUT/bench-$1.json"
}
case $1 in
A)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  mkdir -p /tmp/rwb9
  (timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -Itemplates/common/csrc -Itemplates/rowwise/csrc \
    scripts/gpu/rowwise_bench.cu -o /tmp/rwb9/bench > "$OUT/build-bench.txt" 2>&1; echo "rc=$?" >> "$OUT/build-bench.txt") &
  for e in softmax layer_norm rms_norm add_rms_norm; do
    run build-$e 300 $PO build examples/$e --arch 90 &
  done
  wait
  for op in softmax layer_norm rms_norm add_rms_norm; do
    run tests-$op 150 $PO test examples/$op --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs &
  done
  wait
  for op in layer_norm rms_norm; do bench_rows $op; done ;;
B)
  for op in softmax add_rms_norm; do bench_rows $op; done
  wait
  sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats"
  run ncu-rms 120 ncu $sections -k regex:'RegisterConfigILi8ELi2ELi1024ELi1024ELi2EEE15RmsNormBackwardI6__half' -s 2 -c 1 /tmp/rwb9/bench --time-only
  run ncu-ln 120 ncu $sections -k regex:'RegisterConfigILi4ELi2ELi1024ELi1024ELi4EEE17LayerNormBackwardIf' -s 2 -c 1 /tmp/rwb9/bench --time-only --float-only
  run ncu-sums 120 ncu --section SpeedOfLight -k regex:'SumPartials' -s 40 -c 3 /tmp/rwb9/bench --time-only --float-only ;;
esac
for f in "$OUT"/*.txt; do echo "== $f"; tail -n 4 "$f"; done
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
