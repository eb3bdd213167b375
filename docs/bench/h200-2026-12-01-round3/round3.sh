#!/usr/bin/env bash
# Lead's round 3 on the H200 (Paddle shipped): bash .gpu/round3.sh A|B
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
opgen() { python3 -m opgen "$@"; }
PO="python3 -m opgen"
T=${T:-560}
t() {  # t NAME DIR: the op's generated tests on gpu:0, whole log kept
  (timeout $((T-40)) python3 -m opgen test $2 --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs > "$OUT/tests-$1.log" 2>&1; echo "rc=$?" >> "$OUT/tests-$1.log")
}
case $1 in
A)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  rm -rf /tmp/mul /tmp/fresh && mkdir -p /tmp/mul/mul && cp tests/specs/mul.yaml /tmp/mul/mul/ && opgen generate /tmp/mul/mul/mul.yaml > /dev/null
  opgen new fresh_op --elementwise --dir /tmp/fresh > /dev/null
  for d in examples/relu6 examples/bias_gelu examples/embedding examples/layer_norm /tmp/mul/mul /tmp/fresh/fresh_op; do
    (opgen build $d --arch 90 > "$OUT/build-$(basename $d).txt" 2>&1; echo "rc=$?" >> "$OUT/build-$(basename $d).txt") &
  done; wait
  t relu6 examples/relu6 & t fresh /tmp/fresh/fresh_op & t bias_gelu examples/bias_gelu & t mul /tmp/mul/mul &
  t layer_norm examples/layer_norm & t embedding examples/embedding &
  (mkdir -p "$OUT/inplace"; OUT=$OUT/inplace timeout $((T-40)) bash scripts/gpu/custom_inplace.sh > "$OUT/inplace/log.txt" 2>&1; echo "rc=$?" >> "$OUT/inplace/log.txt") &
  (timeout $((T-40)) python3 scripts/gpu/deploy_checks.py --out "$OUT" > "$OUT/deploy.txt" 2>&1; echo "rc=$?" >> "$OUT/deploy.txt") &
  (cd examples/embedding && OPGEN_TEST_DEVICES=gpu timeout $((T-40)) compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 40 \
      python3 -m pytest test_embedding.py -q -p no:warnings -p no:cacheprovider -k "one or typical" > "$OUT/embedding-memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/embedding-memcheck.log") &
  wait ;;
B)
  [ -f /tmp/mul/mul/mul.yaml ] || { mkdir -p /tmp/mul/mul && cp tests/specs/mul.yaml /tmp/mul/mul/ && opgen generate /tmp/mul/mul/mul.yaml > /dev/null; }
  for d in examples/relu6 examples/bias_gelu examples/embedding /tmp/mul/mul; do
    (opgen build $d --arch 90 > "$OUT/build-$(basename $d).txt" 2>&1; echo "rc=$?" >> "$OUT/build-$(basename $d).txt") &
  done; wait
  timeout 100 python3 scripts/gpu/embedding_op.py examples/embedding > "$OUT/embedding-op.txt" 2>&1; echo "rc=$?" >> "$OUT/embedding-op.txt"
  timeout 90 $PO bench examples/relu6 --device gpu --sizes 2^16 --dtype float32 --compare copy --json "$OUT/percall-relu6.json" > "$OUT/percall-relu6.txt" 2>&1; echo "rc=$?" >> "$OUT/percall-relu6.txt"
  timeout 150 $PO bench examples/relu6 --device gpu --sizes 2^16,2^20,2^24,2^26,2^28 --no-per-call --json "$OUT/bench-relu6.json" > "$OUT/bench-relu6.txt" 2>&1; echo "rc=$?" >> "$OUT/bench-relu6.txt"
  timeout 120 $PO bench examples/bias_gelu --device gpu --shapes 16384x1024:1024,4096x4096:4096 --json "$OUT/bench-bias-gelu.json" > "$OUT/bench-bias-gelu.txt" 2>&1; echo "rc=$?" >> "$OUT/bench-bias-gelu.txt"
  timeout 120 $PO bench /tmp/mul/mul --device gpu --shapes 64x1x512:1x256x512,16384x1024:16384x1,16384x1024:[],16384x1024:16384x1024 --json "$OUT/bench-mul.json" > "$OUT/bench-mul.txt" 2>&1; echo "rc=$?" >> "$OUT/bench-mul.txt" ;;
esac
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
