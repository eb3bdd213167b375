#!/usr/bin/env bash
# Lead's round 6 on the H200 (Paddle shipped): bash .gpu/round6.sh A|B|C
#   A: builds; embedding through Paddle (the in-gather id check), relu6 per call, the embedding
#      kernels alone; then embedding's generated tests and memcheck (correctness after timing)
#   B: the rowwise examples' generated tests, then their opgen bench (three dtypes)
#   C: the broadcast launcher alone with its open knobs, then bias_gelu's and mul's opgen bench
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
  for e in relu6 embedding softmax layer_norm rms_norm add_rms_norm bias_gelu; do
    run build-$e 300 $PO build examples/$e --arch 90 &
  done
  mkdir -p /tmp/embedding
  run build-embedding-bench 300 nvcc -O3 -std=c++17 -arch=sm_90 -I"$CUDA_HOME/include/cccl" \
    -Itemplates/common/csrc -Iexamples/embedding/csrc scripts/gpu/embedding_bench.cu -o /tmp/embedding/bench &
  wait
  run embedding-op 120 python3 scripts/gpu/embedding_op.py examples/embedding
  run percall 120 $PO bench examples/relu6 --device gpu --sizes 2^16 --dtype float32 --compare copy --json "$OUT/percall-relu6.json"
  run embedding-kernels 150 /tmp/embedding/bench
  run tests-embedding 200 $PO test examples/embedding --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs &
  (cd examples/embedding && OPGEN_TEST_DEVICES=gpu timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
    python3 -m pytest test_embedding.py -q -p no:warnings -p no:cacheprovider -k "one or typical" \
    > "$OUT/embedding-memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/embedding-memcheck.log") &
  wait ;;
B)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  for e in relu6 embedding softmax layer_norm rms_norm add_rms_norm bias_gelu; do
    run build-$e 300 $PO build examples/$e --arch 90 &
  done
  wait
  for op in softmax layer_norm rms_norm add_rms_norm; do
    run tests-$op 150 $PO test examples/$op --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs &
  done
  wait
  for op in softmax layer_norm; do bench_rows $op; done ;;
B2)
  for op in rms_norm add_rms_norm; do bench_rows $op; done
  run percall 120 $PO bench examples/relu6 --device gpu --sizes 2^16 --dtype float32 --compare copy --json "$OUT/percall-relu6.json"
  run embedding-op-again 120 python3 scripts/gpu/embedding_op.py examples/embedding ;;
C)
  mkdir -p "$OUT/bk"
  (OUT=$OUT/bk QUICK=1 LARGE=0 NCU=0 timeout 240 bash scripts/gpu/broadcast.sh "" "-DOPGEN_BCAST_WAVES=2" \
    "-DOPGEN_BCAST_COLUMN_PREFETCH=0" > "$OUT/bk/log.txt" 2>&1; echo "rc=$?" >> "$OUT/bk/log.txt")
  run bench-bias_gelu 150 $PO bench examples/bias_gelu --device gpu --shapes 16384x1024:1024,4096x4096:4096 \
    --json "$OUT/bench-bias_gelu.json"
  mkdir -p /tmp/mul/mul && cp tests/specs/mul.yaml /tmp/mul/mul/ && $PO generate /tmp/mul/mul/mul.yaml > /dev/null
  run bench-mul 180 $PO bench /tmp/mul/mul --device gpu --shapes 64x1x512:1x256x512,16384x1024:[] \
    --json "$OUT/bench-mul.json" ;;
esac
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
