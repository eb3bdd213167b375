#!/usr/bin/env bash
# Lead's round 2 on the H200 (Paddle shipped): bash .gpu/round2.sh A|B1|B2
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
git log --oneline -1 > "$OUT/commit-device.txt" 2>/dev/null
T=${T:-540}
ops="relu6 bias_gelu embedding softmax layer_norm rms_norm add_rms_norm"
case $1 in
A)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  for e in $ops; do (python3 -m opgen build examples/$e --arch 90 > "$OUT/build-$e.txt" 2>&1; echo "rc=$?" >> "$OUT/build-$e.txt") & done; wait
  for s in tests broadcast deploy rowwise; do
    (mkdir -p "$OUT/$s"; OUT=$OUT/$s timeout $((T-60)) bash scripts/gpu/h200.sh $s > "$OUT/$s/log.txt" 2>&1; echo "rc=$?" >> "$OUT/$s/log.txt") &
  done
  (python3 -m opgen test examples/embedding --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 15 > "$OUT/tests-embedding.txt"; echo "rc=${PIPESTATUS[0]}" >> "$OUT/tests-embedding.txt") &
  for op in softmax layer_norm rms_norm add_rms_norm embedding; do
    (cd examples/$op && OPGEN_TEST_DEVICES=gpu timeout $((T-60)) compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 40 \
      python3 -m pytest test_$op.py -q -p no:warnings -p no:cacheprovider -k "float32" > "$OUT/sanitizer-$op.log" 2>&1; echo "rc=$?" >> "$OUT/sanitizer-$op.log") &
  done
  wait ;;
B1)
  rows=4096x4096,16384x1024,65536x256,1024x32768,262144x128
  for op in softmax layer_norm rms_norm add_rms_norm; do
    timeout 150 python3 -m opgen bench examples/$op --device gpu --shapes $rows --dtype float32 --dtype bfloat16 \
      --json "$OUT/bench-$op.json" > "$OUT/bench-$op.txt" 2>&1; echo "rc=$?" >> "$OUT/bench-$op.txt"
  done ;;
B2)
  (OUT=$OUT timeout 300 bash scripts/gpu/h200.sh broadcast-bench > "$OUT/broadcast-bench-log.txt" 2>&1; echo "rc=$?" >> "$OUT/broadcast-bench-log.txt")
  timeout 90 python3 scripts/gpu/embedding_op.py examples/embedding > "$OUT/embedding-op.txt" 2>&1; echo "rc=$?" >> "$OUT/embedding-op.txt"
  (OUT=$OUT timeout 120 bash scripts/gpu/h200.sh percall > "$OUT/percall-log.txt" 2>&1; echo "rc=$?" >> "$OUT/percall-log.txt") ;;
esac
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
