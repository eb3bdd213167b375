#!/usr/bin/env bash
# Round 13 on the H200, part X: the row-wise launcher from main before the long-row change
# (.gpu/base: `git archive 74e92a6 templates/common/csrc templates/rowwise/csrc
# scripts/gpu/rowwise_bench.cu scripts/gpu/rowwise_ops.h`, timings only) and the new one
# (scripts/gpu/rowwise.sh with the variants given: memcheck, checks, timings), same session.
#   bash docs/bench/h200-2026-12-02-round13/round13.sh "" "-DOPGEN_ROW_CLUSTER_THREADS=512" ...
set -u
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
start=$(date +%s)
(cd .gpu/base && timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc \
  -Itemplates/rowwise/csrc scripts/gpu/rowwise_bench.cu -o /tmp/rwbase > "$OUT/build-base.txt" 2>&1
  echo "rc=$?" >> "$OUT/build-base.txt") &
OUT="$OUT" TORCH=0 timeout 430 bash scripts/gpu/rowwise.sh "$@" > "$OUT/rowwise-sh.txt" 2>&1
echo "rc=$?" >> "$OUT/rowwise-sh.txt"
wait
echo "builds + rowwise.sh: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
timeout 70 /tmp/rwbase --time-only > "$OUT/base-bench.txt" 2>&1; echo "rc=$?" >> "$OUT/base-bench.txt"
echo "base: $(( $(date +%s) - start )) s" >> "$OUT/times.txt"
cd "$OUT" && tar czf /tmp/res.tgz ./*.txt 2>/dev/null; rm -f "$OUT"/*.txt; mv /tmp/res.tgz "$OUT"/
tar xzf "$OUT/res.tgz" -O ./times.txt; tar xzf "$OUT/res.tgz" -O ./rowwise.txt | grep -v "^copy\|ok$" | head -60
