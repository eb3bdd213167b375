#!/usr/bin/env bash
# The generated row-wise examples' functors on the GPU, no Paddle needed (issue 13): copies
# examples/{softmax,rms_norm,layer_norm,add_rms_norm}/csrc/<op>.h next to the Paddle-free stand-in
# for opgen/rowwise_op.h (scripts/gpu/rowwise_shim), builds scripts/gpu/rowwise_examples.cu once
# per set of launcher knobs (in parallel), prints the schedule the launcher picks for each op,
# dtype and anchor shape, then times every generated functor beside the hand-written one of
# scripts/gpu/rowwise_ops.h (what rowwise_bench.cu times) and a copy, in the same run, and checks
# that the two agree. Output under $OUT; exits non-zero when a build fails or they disagree.
#   bash scripts/gpu/rowwise_examples.sh                       # the default knobs
#   bash scripts/gpu/rowwise_examples.sh "" "-DOPGEN_ROW_LANE_VECS=1"
# EXAMPLES=DIR takes the headers from DIR/<op>/csrc/<op>.h instead (another checkout's examples,
# to time a change of the generator against it). About 4 minutes with two variants. PREBUILT=DIR
# takes the binaries from DIR/rowwise-examples (scripts/gpu/prebuild.sh) instead of nvcc.
# scripts/gpu/rowwise_examples_diff.py LOG lists the cells that moved between the variants.
set -uo pipefail
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}
BUILD=${BUILD:-/tmp/rowwise-examples}
EXAMPLES=${EXAMPLES:-examples}
[ -z "${PREBUILT:-}" ] || [ "$EXAMPLES" = examples ] ||
  { echo "EXAMPLES=$EXAMPLES: prebuilt binaries hold their own headers" >&2; exit 2; }
mkdir -p "$OUT" "$BUILD/gen/opgen"
cp scripts/gpu/rowwise_shim/opgen/rowwise_op.h "$BUILD/gen/opgen/" || exit 1
for op in softmax rms_norm layer_norm add_rms_norm; do
  cp "$EXAMPLES/$op/csrc/$op.h" "$BUILD/gen/" || exit 1
done
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv |
  tee "$OUT/rowwise-examples-gpu.txt"
[ $# -gt 0 ] || set -- ""
start=$(date +%s)
source scripts/gpu/prebuilt.sh && use_prebuilt rowwise-examples
i=0
for flags in "$@"; do
  i=$((i + 1))
  if [ -n "${PREBUILT:-}" ]; then  # built elsewhere by scripts/gpu/prebuild.sh, with these knobs
    [ "$(cat "$PREBUILT/rowwise-examples/flags-v$i.txt" 2>/dev/null)" = "$flags" ] ||
      { echo "$PREBUILT/rowwise-examples/v$i was not built with '$flags'" >&2; exit 2; }
    cp "$PREBUILT/rowwise-examples/v$i" "$BUILD/" &&
      cp "$PREBUILT/rowwise-examples/build-v$i.txt" "$OUT/rowwise-examples-build-v$i.txt"
    continue
  fi
  # shellcheck disable=SC2086  # the knobs are separate words
  timeout 400 nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -warn-spills -Itemplates/common/csrc \
    -Itemplates/rowwise/csrc -I"$BUILD/gen" -Iscripts/gpu $flags scripts/gpu/rowwise_examples.cu \
    -o "$BUILD/v$i" > "$OUT/rowwise-examples-build-v$i.txt" 2>&1 &
done
wait
echo "built in $(( $(date +%s) - start )) s" | tee "$OUT/rowwise-examples.txt"
status=0
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== v$i ${flags:-default}" | tee -a "$OUT/rowwise-examples.txt"
  if [ ! -x "$BUILD/v$i" ]; then
    echo "v$i did not build" | tee -a "$OUT/rowwise-examples.txt"
    tail -n 20 "$OUT/rowwise-examples-build-v$i.txt"
    status=1
    continue
  fi
  grep -c "spill" "$OUT/rowwise-examples-build-v$i.txt" | sed 's/^/spill warnings: /' |
    tee -a "$OUT/rowwise-examples.txt"
  "$BUILD/v$i" --plan > "$OUT/rowwise-examples-plan-v$i.txt" 2>&1
  timeout 300 "$BUILD/v$i" 2>&1 | tee -a "$OUT/rowwise-examples.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
echo "total $(( $(date +%s) - start )) s" | tee -a "$OUT/rowwise-examples.txt"
exit $status
