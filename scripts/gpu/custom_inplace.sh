#!/usr/bin/env bash
# kind: custom in-place variants (spec `inplace:`) on the GPU: two ops generated from the specs
# below, their skeleton kernels unchanged (the CUDA copy skips an output that is its input):
# `scale` writes out over x and allocates norm (the in-place op's own InferShape/InferDtype),
# `pair` writes three outputs over three inputs (a void kernel, no inference). Runs their
# generated test_inplace_* tests on gpu:0 (outputs equal the out-of-place op's, data_ptr equal,
# the autograd refusals), then the same under compute-sanitizer memcheck. About 2 minutes.
# Usage (from the repository root, as h200.sh runs it): bash scripts/gpu/custom_inplace.sh
set -uo pipefail
OUT=${OUT:-/tmp/opgen-out}
WORK=${WORK:-/tmp/custom-inplace}
mkdir -p "$OUT" "$WORK/scale" "$WORK/pair"
opgen() { python3 -m opgen "$@"; }
cat > "$WORK/scale/scale.yaml" <<'SPEC'
name: scale
kind: custom
inputs:
  x: {dtype: float types, shape: [..., D]}
  w: {dtype: same as x, shape: [D]}
outputs:
  out: {dtype: same as x, shape: "[*x.shape]"}
  norm: {dtype: float32, shape: "[D]"}
inplace: {x: out}
backward: [x, w]
sizes: {D: 6}
SPEC
cat > "$WORK/pair/pair.yaml" <<'SPEC'
name: pair
kind: custom
inputs:
  a: {dtype: [float32, float64], shape: [..., D]}
  b: {dtype: same as a, shape: [..., D]}
  n: {dtype: int64, shape: [D]}
outputs:
  o1: {dtype: same as a, shape: "[*a.shape]"}
  o2: {dtype: same as a, shape: "[*b.shape]"}
  o3: {dtype: int64, shape: "[D]"}
inplace: {a: o1, b: o2, n: o3}
sizes: {D: 4}
SPEC
status=0
for op in scale pair; do
  opgen generate "$WORK/$op/$op.yaml" >/dev/null && opgen build "$WORK/$op" --arch 90 || { status=1; continue; }
  opgen test "$WORK/$op" --device gpu -- -q -p no:warnings -rs -k inplace 2>&1 |
    tail -n 8 | tee "$OUT/custom-inplace-$op.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  (cd "$WORK/$op" && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck --error-exitcode 9 \
    python3 -m pytest "test_$op.py" -q -p no:warnings -p no:cacheprovider -k inplace) \
    > "$OUT/custom-inplace-$op-memcheck.log" 2>&1
  [ $? = 0 ] || status=1
  tail -n 3 "$OUT/custom-inplace-$op-memcheck.log"
done
exit $status
