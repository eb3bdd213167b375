#!/usr/bin/env bash
# Round 16 on the H200, run A: scripts/gpu/rowwise_examples.cu built on the CPU machine for sm_90
# against this round's examples (rms_norm's and add_rms_norm's backwards now make their two means
# in one round) and carried in .gpu/x16, once per set of launcher knobs:
#   ex_default   the committed knobs
#   ex_oldgen    the committed knobs, with the examples' headers of main before this round
#                (rms_norm's and add_rms_norm's two means one by one)
#   ex_pairs     -DOPGEN_ROW_SUM_PAIRS=1 (the launcher with sum-pairs.patch; measured slower,
#                not kept): register schedules with column sums load two row groups before
#                they work on the first
# and scripts/gpu/rowwise_bench.cu with -DOPGEN_ROW_SUM_PAIRS=1 (bench_pairs): its checks against
# the host reference in double, and memcheck. Each examples binary times every generated functor
# beside the hand-written one (which makes rms_norm's two means one by one) and a copy, in the
# same process; the three take turns, twice.
set -u
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT/a"
cd .gpu/x16 || exit 1
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv > "$OUT/a/gpu.txt"
start=$(date +%s)
timeout 90 ./bench_pairs --check-only > "$OUT/a/check-bench_pairs.txt" 2>&1; echo "rc=$?" >> "$OUT/a/check-bench_pairs.txt"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 ./bench_pairs --check-only --quick \
  --float-only > "$OUT/a/memcheck-bench_pairs.txt" 2>&1; echo "rc=$?" >> "$OUT/a/memcheck-bench_pairs.txt"
echo "checks: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
i=0
for b in ex_default ex_oldgen ex_pairs ex_default ex_oldgen ex_pairs; do
  i=$((i + 1))
  ./$b --plan > "$OUT/a/plan-$b.txt" 2>&1
  timeout 100 ./$b > "$OUT/a/time-$i-$b.txt" 2>&1; echo "rc=$?" >> "$OUT/a/time-$i-$b.txt"
  echo "$b: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
done
cd "$OUT" && tar czf /tmp/a.tgz a && rm -rf a && mv /tmp/a.tgz "$OUT"/
tar xzf "$OUT/a.tgz" -O a/times.txt
tar xzf "$OUT/a.tgz" -O a/check-bench_pairs.txt | tail -2
tar xzf "$OUT/a.tgz" -O a/memcheck-bench_pairs.txt | tail -2
for f in $(tar tzf "$OUT/a.tgz" | grep time-); do echo "== $f"; tar xzf "$OUT/a.tgz" -O "$f" | grep -E "mismatch|rc=" ; done
