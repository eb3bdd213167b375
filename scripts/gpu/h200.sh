#!/usr/bin/env bash
# The GPU session on the H200 (see ../../docs/benchmarks.md and ../shared/gpu/README.md): after
# Paddle GPU is shipped, `bash scripts/gpu/h200.sh STAGE...` runs, with logs under $OUT:
#   tests     relu6 and a fresh `opgen new` op: generated tests on gpu:0, all dtypes
#   large     relu6 forward over more than 2^31 elements
#   sanitize  compute-sanitizer memcheck over relu6's GPU tests
#   bench     opgen bench on the GPU: table, JSON, PNG
set -uo pipefail
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT"
opgen() { python3 -m opgen "$@"; }
status=0
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
opgen build examples/relu6 --arch 90 || exit 1
for stage in "$@"; do
  echo "== $stage"
  case $stage in
    tests)
      opgen test examples/relu6 --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 15 | tee "$OUT/tests-relu6.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      rm -rf /tmp/fresh && opgen new fresh_op --elementwise --dir /tmp/fresh >/dev/null &&
        opgen build /tmp/fresh/fresh_op --arch 90 &&
        opgen test /tmp/fresh/fresh_op --device gpu -- -q -p no:warnings 2>&1 | tail -n 5 | tee "$OUT/tests-new-op.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    large)
      OPGEN_TEST_LARGE=1 opgen test examples/relu6 --device gpu -- -q -p no:warnings -k beyond 2>&1 | tail -n 5 | tee "$OUT/tests-large.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    sanitize)
      (cd examples/relu6 && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck --error-exitcode 9 \
        python3 -m pytest test_relu6.py -q -p no:warnings -p no:cacheprovider -k "not 1000003" 2>&1) |
        tail -n 25 | tee "$OUT/sanitizer.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    bench)
      opgen bench examples/relu6 --device gpu --sizes 2^16,2^20,2^24,2^26,2^28 \
        --json "$OUT/bench-relu6.json" --plot "$OUT/bench-relu6.png" 2>&1 | tee "$OUT/bench-relu6.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    *) echo "unknown stage $stage"; status=2 ;;
  esac
done
exit $status
