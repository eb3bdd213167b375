#!/usr/bin/env bash
# Round 14 on the H200, run A: row-wise launcher binaries built on the CPU machine for sm_90 and
# carried in build/rb (no nvcc time on the GPU machine):
#   head    main at a809364 (cc486ce's review fixes, first time on a GPU); softmax's exp is
#           opgen::exp (libdevice's expf) in every dtype
#   nokeep  the working tree with -DOPGEN_ROW_KEPT_REGS=0 (the default): row.keep recomputed, as
#           head; softmax's exp is opgen::exp<T> (the hardware exp2 for 16-bit), as the
#           generated op's
#   keep    the working tree with -DOPGEN_ROW_KEPT_REGS=32: row.keep's values kept in registers
#   rb256   keep with -DOPGEN_ROW_REG_BYTES=256 (twice the register budget for a row: more
#           elements a thread, fewer threads a row), where built
# Each: checks against the host reference (every dtype, every shape), then timings in fresh
# processes, in the order head nokeep keep keep nokeep head; compute-sanitizer memcheck of keep;
# then Nsight Compute on single kernels (scripts/gpu/rowwise_ncu.sh).
set -u
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT/a"
cd build/rb || exit 1
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv > "$OUT/a/gpu.txt"
start=$(date +%s)
bins="head nokeep keep"
[ -x rb256 ] && bins="$bins rb256"
for b in $bins; do
  timeout 90 ./$b --check-only > "$OUT/a/check-$b.txt" 2>&1; echo "rc=$?" >> "$OUT/a/check-$b.txt"
done
echo "checks: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
i=0
for b in $bins $(echo $bins | tr ' ' '\n' | tac); do
  i=$((i + 1))
  timeout 60 ./$b --time-only > "$OUT/a/time-$i-$b.txt" 2>&1
done
echo "timings: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 ./keep --check-only --quick \
  --float-only > "$OUT/a/memcheck-keep.txt" 2>&1; echo "rc=$?" >> "$OUT/a/memcheck-keep.txt"
echo "memcheck: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
cd ../..
OUT="$OUT/a" timeout 200 bash scripts/gpu/rowwise_ncu.sh build/rb/keep \
  "softmax 4096x4096 bfloat16" "softmax 4096x4096 float32" "rms_norm_grad 16384x1024 bfloat16" \
  "rms_norm_grad 16384x1024 float32" "layer_norm_grad 4096x4096 bfloat16" \
  "layer_norm_grad 1024x32768 float32" "softmax 1024x32768 bfloat16" \
  "layer_norm_grad 65536x256 bfloat16" > "$OUT/a/ncu.txt" 2>&1
echo "ncu: $(( $(date +%s) - start )) s" >> "$OUT/a/times.txt"
cd "$OUT" && tar czf /tmp/a.tgz a && rm -rf a && mv /tmp/a.tgz "$OUT"/
tar xzf "$OUT/a.tgz" -O a/times.txt a/ncu.txt
for b in $bins; do tar xzf "$OUT/a.tgz" -O a/check-$b.txt | tail -2; done
tar xzf "$OUT/a.tgz" -O a/memcheck-keep.txt | tail -2
