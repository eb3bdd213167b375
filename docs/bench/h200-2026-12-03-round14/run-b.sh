#!/usr/bin/env bash
# Round 14 on the H200, run B (after Paddle is shipped, ../shared/gpu/README.md): the row-wise
# examples built with row.keep's values in registers (OPGEN_NVCC_FLAGS, default
# -DOPGEN_ROW_KEPT_REGS=32; KEPT="" builds the committed default), their generated tests on gpu:0
# in all four dtypes, then compute-sanitizer memcheck over them (float32 and bfloat16); or the
# h200.sh stages given (bash run-b.sh rowwise; then bash run-b.sh rowwise-memcheck).
set -u
stages=${*:-rowwise rowwise-memcheck}
name=b-${stages// /-}
source .gpu/bin/env.sh
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT/$name"
export OPGEN_NVCC_FLAGS="${KEPT--DOPGEN_ROW_KEPT_REGS=32}"
echo "OPGEN_NVCC_FLAGS=$OPGEN_NVCC_FLAGS" > "$OUT/$name/flags.txt"
start=$(date +%s)
# shellcheck disable=SC2086  # the stages are separate words
OUT="$OUT/$name" SKIP_RELU6=1 timeout 560 bash scripts/gpu/h200.sh $stages > "$OUT/$name/h200.txt" 2>&1
echo "rc=$? after $(( $(date +%s) - start )) s" >> "$OUT/$name/h200.txt"
cd "$OUT" && tar czf "/tmp/$name.tgz" "$name" && rm -rf "$name" && mv "/tmp/$name.tgz" "$OUT"/
tar xzf "$OUT/$name.tgz" -O "$name/h200.txt" | tail -40
