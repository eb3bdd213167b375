#!/usr/bin/env bash
# kind: custom outputs whose sizes only the data gives (-1 in a spec's output shape) on the GPU:
#   masked_select  tests/data/masked_select (out [-1], index [-1, 2]) with its hand-written
#                  kernels: it counts on the device, reads the count back on the op's stream,
#                  allocates, then selects. Its generated tests on gpu:0 (every float dtype,
#                  empty to 280063 elements, gradients through the -1 output, -1 under to_static
#                  and jit.load), then compute-sanitizer memcheck over the small cases.
#   pad            a spec with -1 outputs (one beside *x.shape and an attr, one in place beside
#                  them) whose skeleton is unchanged: its generated tests on gpu:0 (the skeleton's
#                  sizes read back from the device are 0).
# About 4 minutes (two builds for sm_90).
# Usage (from the repository root, as h200.sh runs it): bash scripts/gpu/custom_dynamic.sh
set -uo pipefail
OUT=${OUT:-/tmp/opgen-out}
WORK=${WORK:-/tmp/custom-dynamic}
rm -rf "$WORK" && mkdir -p "$OUT" "$WORK/masked_select" "$WORK/pad"
opgen() { python3 -m opgen "$@"; }
data=tests/data/masked_select
cp "$data/masked_select.yaml" "$WORK/masked_select/"
cat > "$WORK/pad/pad.yaml" <<'SPEC'
name: pad
kind: custom
inputs:
  x: {dtype: float types, shape: [..., D]}
  lengths: {dtype: int64, shape: any, range: [0, D]}
outputs:
  out: {dtype: same as x, shape: "[x.shape[0], -1]"}
  copy: {dtype: same as x, shape: "[*x.shape]"}
  hits: {dtype: int64, shape: "[*lengths.shape, -1, k]"}
attrs:
  k: {type: int, default: 2}
backward: [x]
inplace: {x: copy}
sizes: {D: 4}
SPEC
status=0
for op in masked_select pad; do
  opgen generate "$WORK/$op/$op.yaml" >/dev/null || { status=1; continue; }
  if [ "$op" = masked_select ]; then  # its kernels and reference over the skeleton's
    cp "$data/masked_select_cpu.h" "$data/masked_select_cuda.cuh" "$WORK/$op/csrc/"
    cp "$data/reference.py" "$WORK/$op/"
  fi
  opgen build "$WORK/$op" --arch 90 || { status=1; continue; }
  opgen test "$WORK/$op" --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 8 |
    tee "$OUT/custom-dynamic-$op.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
(cd "$WORK/masked_select" && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck \
  --error-exitcode 9 python3 -m pytest test_masked_select.py -q -p no:warnings -p no:cacheprovider \
  -k "(one or typical) and not static_graph") > "$OUT/custom-dynamic-memcheck.log" 2>&1
[ $? = 0 ] || status=1
tail -n 3 "$OUT/custom-dynamic-memcheck.log"
exit $status
