#!/usr/bin/env bash
# The row-wise launcher on the GPU machine, no Paddle needed: builds scripts/gpu/rowwise_bench.cu
# once per set of launcher knobs (in parallel), runs the first variant's checks under
# compute-sanitizer memcheck (float32, the quick shapes), checks every variant against the host reference
# (the first on every shape, the others on the quick set), times the anchor shapes of issue 13
# against cudaMemcpy, then times PyTorch on the same shapes (scripts/gpu/rowwise_torch.py).
# Output under $OUT; exits non-zero when any variant finds a mismatch or memcheck an error.
#   bash scripts/gpu/rowwise.sh                              # the default knobs
#   bash scripts/gpu/rowwise.sh "" "-DOPGEN_ROW_LANE_VECS=2" "-DOPGEN_ROW_THREADS=128"
# MEMCHECK=0 skips compute-sanitizer, TORCH=0 the PyTorch baseline, PREBUILT=DIR takes the
# binaries from DIR/rowwise (scripts/gpu/prebuild.sh, the same knobs in the same order). Each
# stage has a timeout, so the whole stays under about 4 minutes with up to 4 variants on a
# 16-core machine.
set -uo pipefail
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT" /tmp/rowwise
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv |
  tee "$OUT/rowwise-gpu.txt"
[ $# -gt 0 ] || set -- ""
start=$(date +%s)
source scripts/gpu/prebuilt.sh && use_prebuilt rowwise
i=0
for flags in "$@"; do
  i=$((i + 1))
  if [ -n "${PREBUILT:-}" ]; then  # built elsewhere by scripts/gpu/prebuild.sh, with these knobs
    [ "$(cat "$PREBUILT/rowwise/flags-v$i.txt" 2>/dev/null)" = "$flags" ] ||
      { echo "$PREBUILT/rowwise/v$i was not built with '$flags'" >&2; exit 2; }
    cp "$PREBUILT/rowwise/v$i" /tmp/rowwise/ &&
      cp "$PREBUILT/rowwise/build-v$i.txt" "$OUT/rowwise-build-v$i.txt"
    continue
  fi
  # shellcheck disable=SC2086  # the knobs are separate words
  timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -warn-spills -Itemplates/common/csrc \
    -Itemplates/rowwise/csrc $flags scripts/gpu/rowwise_bench.cu -o /tmp/rowwise/v$i \
    > "$OUT/rowwise-build-v$i.txt" 2>&1 &
done
wait
echo "built in $(( $(date +%s) - start )) s" | tee -a "$OUT/rowwise.txt"
status=0
if [ "${MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null && [ -x /tmp/rowwise/v1 ]; then
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/rowwise/v1 --check-only --quick --float-only \
    > "$OUT/rowwise-memcheck.txt" 2>&1
  rc=$?
  tail -n 3 "$OUT/rowwise-memcheck.txt"
  echo "memcheck exit $rc" | tee -a "$OUT/rowwise.txt"
  [ $rc = 0 ] || status=1
fi
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== v$i ${flags:-default}" | tee -a "$OUT/rowwise.txt"
  if [ ! -x /tmp/rowwise/v$i ]; then
    echo "v$i did not build" | tee -a "$OUT/rowwise.txt"
    tail -n 20 "$OUT/rowwise-build-v$i.txt"
    status=1
    continue
  fi
  grep -c "spill" "$OUT/rowwise-build-v$i.txt" | sed 's/^/spill warnings: /' | tee -a "$OUT/rowwise.txt"
  quick=
  [ $i = 1 ] || quick=--quick
  # Checks, then timings in a fresh process, as a base binary is timed (round13.sh), so the two
  # are timed alike (round 13: the variants, timed after their checks, read 0.04-0.06 below main's
  # binary in the long-row forwards, the cause not separated).
  timeout 60 /tmp/rowwise/v$i --check-only $quick 2>&1 | tee -a "$OUT/rowwise.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  timeout 60 /tmp/rowwise/v$i --time-only 2>&1 | grep -v "^device" | tee -a "$OUT/rowwise.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
if [ "${TORCH:-1}" = 1 ]; then
  timeout 50 python3 scripts/gpu/rowwise_torch.py 2>&1 | tee "$OUT/rowwise-torch.txt"
fi
echo "total $(( $(date +%s) - start )) s" | tee -a "$OUT/rowwise.txt"
exit $status
