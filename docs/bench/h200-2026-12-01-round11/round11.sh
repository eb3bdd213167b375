#!/usr/bin/env bash
# Lead's round 11 on the H200: bash .gpu/round11.sh X "VARIANT FLAGS"... ; then (Paddle shipped) Y
#   X: the row-wise launcher bench from main before the long-row change (.gpu/base, timings) and
#      the new one (scripts/gpu/rowwise.sh with the variants given: memcheck, checks, timings)
#   Y: rms_norm, add_rms_norm, bias_gelu built; add_rms_norm against add + rms_norm (issue 13);
#      opgen bench of bias_gelu in 16-bit with a Python stack dump if it runs out of time (issue 11)
set -u
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
PO="python3 -m opgen"
run() {  # run NAME TIMEOUT CMD...: output to $OUT/NAME.txt with its exit status
  local name=$1 t=$2; shift 2
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1; echo "rc=$?" >> "$OUT/$name.txt"
}
start=$(date +%s)
stage=$1; shift
case $stage in
X)
  (cd .gpu/base && timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 -Icommon/csrc -Irowwise/csrc rowwise_bench.cu -o /tmp/rwbase > "$OUT/build-base.txt" 2>&1; echo "rc=$?" >> "$OUT/build-base.txt") &
  # shellcheck disable=SC2086
  OUT="$OUT" TORCH=0 timeout 470 bash scripts/gpu/rowwise.sh "$@" > "$OUT/rowwise-sh.txt" 2>&1; echo "rc=$?" >> "$OUT/rowwise-sh.txt"
  wait
  echo "builds + rowwise.sh: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
  run base-bench 70 /tmp/rwbase --time-only
  echo "base: $(( $(date +%s) - start )) s" >> "$OUT/times.txt" ;;
Y)
  source .gpu/bin/env.sh || exit 1
  for e in bias_gelu rms_norm add_rms_norm; do run build-$e 200 $PO build examples/$e --arch 90 & done
  wait
  echo "builds: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
  run add-rms 150 python3 scripts/gpu/add_rms_compare.py --shapes 4096x4096,1024x32768
  echo "add-rms: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
  left=$(( ${BUDGET:-420} - ($(date +%s) - start) ))
  PYTHONFAULTHANDLER=1 timeout -s ABRT $left $PO bench examples/bias_gelu --device gpu --shapes 16384x1024:1024,4096x4096:4096 \
    --dtype bfloat16 --dtype float16 --compare copy,baseline --no-per-call --json "$OUT/bench-bias-gelu.json" > "$OUT/bench-bias-gelu.txt" 2>&1
  echo "rc=$?" >> "$OUT/bench-bias-gelu.txt"
  echo "bias_gelu: $(( $(date +%s) - start )) s" >> "$OUT/times.txt" ;;
esac
cd "$OUT" && tar czf /tmp/res.tgz ./*.txt ./*.json 2>/dev/null; rm -f "$OUT"/*; mv /tmp/res.tgz "$OUT"/
tar xzf "$OUT/res.tgz" -O ./times.txt; tar tzf "$OUT/res.tgz" | tr '\n' ' '
