#!/usr/bin/env bash
# Lead's round 10 on the H200 (Paddle shipped): bash .gpu/round10.sh A|B
#   A: relu6 (the wrapper leaves dtypes to the kernels): bad calls in their own processes, its
#      generated tests on gpu:0, the per-call table; the four rowwise examples built (launcher
#      with 399cf17/e27ea21's host-side cluster choice) and their generated tests on gpu:0
#   B: the launcher alone (scripts/gpu/rowwise.sh: memcheck, host checks, timings, torch)
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
PO="python3 -m opgen"
run() {  # run NAME TIMEOUT CMD...: output to $OUT/NAME.txt with its exit status
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1; echo "rc=$?" >> "$OUT/$name.txt"
}
case $1 in
A)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  git log -1 --format='%H %s' > "$OUT/commit.txt" 2>/dev/null
  for e in relu6 softmax layer_norm rms_norm add_rms_norm; do
    run build-$e 300 $PO build examples/$e --arch 90 &
  done
  run error-cases 300 python3 scripts/gpu/error_cases.py --device gpu --arch 90 --work /tmp/error-cases &
  wait
  run tests-relu6 150 $PO test examples/relu6 --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs
  run percall 150 $PO bench examples/relu6 --device gpu --sizes 2^16 --dtype float32 --compare copy --json "$OUT/percall-relu6.json"
  for op in softmax layer_norm rms_norm add_rms_norm; do
    run tests-$op 150 $PO test examples/$op --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs &
  done
  wait ;;
B)
  OUT="$OUT" timeout 400 bash scripts/gpu/rowwise.sh > "$OUT/rowwise-sh.txt" 2>&1; echo "rc=$?" >> "$OUT/rowwise-sh.txt" ;;
esac
for f in "$OUT"/*.txt; do echo "== $f"; tail -n 4 "$f"; done
