#!/usr/bin/env bash
# Launcher tuning on the H200: builds relu6 with each variant of the launcher's constants (in
# parallel), then times forward and backward at 2^28 elements, one variant at a time.
#   bash scripts/gpu/tune.sh "-DOPGEN_UNROLL=4" "-DOPGEN_UNROLL=8" ...
set -uo pipefail
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
for flags in "$@"; do  # compile every variant at once: the machine has 16 cores
  OPGEN_NVCC_FLAGS="$flags" python3 -m opgen bench examples/relu6 --device gpu --sizes 1024 \
    --dtype float32 --compare none >/dev/null 2>&1 &
done
wait
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== variant $i: $flags"
  OPGEN_NVCC_FLAGS="$flags" python3 -m opgen bench examples/relu6 --device gpu --sizes 2^28 \
    --dtype float32 --dtype bfloat16 --compare copy --json "$OUT/tune-$i.json" 2>&1 |
    grep -E "^│ (float|bfloa)" | grep -v autograd
done
