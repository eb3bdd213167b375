#!/usr/bin/env bash
# Round 14 on the H200, run C: three builds of the row-wise launcher bench, made on the CPU
# machine for sm_90 and carried in build/rb:
#   clu  the working tree after run A: row.keep in registers for 16-bit rows only
#        (OPGEN_ROW_KEPT_REGS=32), the cluster wait acquiring at cluster scope (cc486ce)
#   cta  clu with the cluster wait as before cc486ce (mbarrier.try_wait's default, acquire at
#        CTA scope), which run A's figures point at for the long-row backwards' drop
#   fix  cta with the long-row schedule taking the fewest chunks that hold a row (no idle chunk)
# Checks of fix against the host reference (every dtype and shape), memcheck of fix,
# timings in fresh processes (clu cta fix fix cta clu), Nsight Compute on two kernels of fix.
set -u
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT/c"
cd build/rb || exit 1
start=$(date +%s)
for b in fix; do
  timeout 90 ./$b --check-only > "$OUT/c/check-$b.txt" 2>&1; echo "rc=$?" >> "$OUT/c/check-$b.txt"
done
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 ./fix --check-only --quick \
  --float-only > "$OUT/c/memcheck-fix.txt" 2>&1; echo "rc=$?" >> "$OUT/c/memcheck-fix.txt"
echo "checks: $(( $(date +%s) - start )) s" >> "$OUT/c/times.txt"
i=0
for b in clu cta fix fix cta clu; do
  i=$((i + 1))
  timeout 60 ./$b --time-only > "$OUT/c/time-$i-$b.txt" 2>&1
done
echo "timings: $(( $(date +%s) - start )) s" >> "$OUT/c/times.txt"
cd ../..
OUT="$OUT/c" timeout 100 bash scripts/gpu/rowwise_ncu.sh build/rb/fix \
  "rms_norm_grad 16384x1024 bfloat16" "layer_norm_grad 1024x32768 float32" > "$OUT/c/ncu.txt" 2>&1
echo "ncu: $(( $(date +%s) - start )) s" >> "$OUT/c/times.txt"
cd "$OUT" && tar czf /tmp/c.tgz c && rm -rf c && mv /tmp/c.tgz "$OUT"/
tar xzf "$OUT/c.tgz" -O c/times.txt c/ncu.txt
for b in fix; do tar xzf "$OUT/c.tgz" -O c/check-$b.txt | tail -2; done
tar xzf "$OUT/c.tgz" -O c/memcheck-fix.txt | tail -2
