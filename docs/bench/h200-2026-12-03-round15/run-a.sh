#!/usr/bin/env bash
# Round 15 on the H200, run A: the row-wise launcher binaries, built on the CPU machine for sm_90
# and carried in .gpu/x (no nvcc time on the GPU machine):
#   head      scripts/gpu/rowwise_bench.cu at main before this round (b83ed59)
#   new       the same bench on this round's launcher: reductions of K values at once
#             (opgen::Array); the hand-written functors reduce one value at a time, as before
#   examples  scripts/gpu/rowwise_examples.cu on this round's examples: the generated functors
#             (layer_norm's backward now reduces mean(dxhat) and mean(dxhat * xhat) in one round)
#             beside the hand-written ones (two rounds) and a copy, and their agreement
# Checks against the host reference (every dtype and shape) for head and new; timings in fresh
# processes in the order head new new head; memcheck of new and of the examples' checks.
set -u
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT/a"
cd .gpu/x || exit 1
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv > "$OUT/a/gpu.txt"
start=$(date +%s)
for b in rowwise_bench_head rowwise_bench; do
  timeout 90 ./$b --check-only > "$OUT/a/check-$b.txt" 2>&1; echo "rc=$?" >> "$OUT/a/check-$b.txt"
done
echo "checks: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
i=0
for b in rowwise_bench_head rowwise_bench rowwise_bench rowwise_bench_head; do
  i=$((i + 1))
  timeout 60 ./$b --time-only > "$OUT/a/time-$i-$b.txt" 2>&1
done
echo "timings: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
./rowwise_examples --plan > "$OUT/a/examples-plan.txt" 2>&1
timeout 240 ./rowwise_examples > "$OUT/a/examples.txt" 2>&1; echo "rc=$?" >> "$OUT/a/examples.txt"
echo "examples: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 ./rowwise_bench --check-only --quick \
  --float-only > "$OUT/a/memcheck-bench.txt" 2>&1; echo "rc=$?" >> "$OUT/a/memcheck-bench.txt"
echo "memcheck: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
cd "$OUT" && tar czf /tmp/a.tgz a && rm -rf a && mv /tmp/a.tgz "$OUT"/
tar xzf "$OUT/a.tgz" -O a/times.txt
for b in rowwise_bench_head rowwise_bench; do tar xzf "$OUT/a.tgz" -O a/check-$b.txt | tail -2; done
tar xzf "$OUT/a.tgz" -O a/examples.txt | tail -40
tar xzf "$OUT/a.tgz" -O a/memcheck-bench.txt | tail -2
