#!/usr/bin/env bash
# The broadcasting launcher on the GPU machine, no Paddle needed: builds
# scripts/gpu/broadcast_bench.cu once per set of launcher knobs (in parallel), measures the
# device's opgen::tanh against double over every float (scripts/gpu/tanh_ulp.cu), checks every path
# against the host (with outputs past 2^31 elements unless LARGE=0), then times each pattern
# against cudaMemcpy; then reads DRAM counters with ncu for the bias kernels of the first
# variant (its --profile run). Output under $OUT; exits non-zero when any variant finds a mismatch.
#   bash scripts/gpu/broadcast.sh                      # the default knobs
#   bash scripts/gpu/broadcast.sh "" "-DOPGEN_BCAST_COLUMN_LANES=32" "-DOPGEN_THREADS=256"
# LARGE=0 skips the >2^31 checks, NCU=0 the ncu run, QUICK=1 the checks of variants after the first,
# NCU_FULL=1 adds ncu's every section for the 16-bit forward targets' kernels, NCU_BACKWARD=1 for
# bias_gelu's backward passes. PREBUILT=DIR takes the binaries from DIR/broadcast (or
# DIR/broadcast.tar.xz; scripts/gpu/prebuild.sh) instead of nvcc.
set -uo pipefail
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT" /tmp/broadcast
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv |
  tee "$OUT/broadcast-gpu.txt"
[ $# -gt 0 ] || set -- ""
source scripts/gpu/prebuilt.sh && use_prebuilt broadcast
i=0
for flags in "$@"; do
  i=$((i + 1))
  if [ -n "${PREBUILT:-}" ]; then  # built elsewhere by scripts/gpu/prebuild.sh, with these knobs
    [ "$(cat "$PREBUILT/broadcast/flags-v$i.txt" 2>/dev/null)" = "$flags" ] ||
      { echo "$PREBUILT/broadcast/v$i was not built with '$flags'" >&2; exit 2; }
    cp "$PREBUILT/broadcast/v$i" /tmp/broadcast/
    continue
  fi
  nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc $flags scripts/gpu/broadcast_bench.cu \
    -o /tmp/broadcast/v$i 2>&1 | tee "$OUT/broadcast-build-v$i.txt" &
done
[ -n "${PREBUILT:-}" ] && cp "$PREBUILT/broadcast/tanh_ulp" /tmp/broadcast/ ||
  nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc scripts/gpu/tanh_ulp.cu \
  -o /tmp/broadcast/tanh_ulp 2>&1 | tee "$OUT/tanh-ulp-build.txt" &
wait
status=0
# opgen::tanh (opgen/math.h) on the device against double, every float.
/tmp/broadcast/tanh_ulp 2>&1 | tee "$OUT/tanh-ulp.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== v$i ${flags:-default}" | tee -a "$OUT/broadcast.txt"
  if [ ! -x /tmp/broadcast/v$i ]; then
    echo "v$i did not build" | tee -a "$OUT/broadcast.txt"
    status=1
    continue
  fi
  large=--large
  [ "${LARGE:-1}" = 1 ] && [ $i = 1 ] || large=
  # QUICK=1: only the first variant checks; the others are timed.
  [ "${QUICK:-0}" = 1 ] && [ $i != 1 ] && large=--time-only
  /tmp/broadcast/v$i $large 2>&1 | tee -a "$OUT/broadcast.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
if command -v ncu >/dev/null && [ "${NCU:-1}" = 1 ] && [ -x /tmp/broadcast/v1 ]; then
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  metrics+=,launch__registers_per_thread,launch__grid_size
  ncu --metrics "$metrics" --kernel-name regex:'Broadcast2dKernel|ColumnPassKernel|SumPartials' \
    /tmp/broadcast/v1 --profile 2>&1 | grep -v '^==PROF==' > "$OUT/broadcast-ncu.txt"
fi
# NCU_FULL=1: every ncu section (stall reasons, occupancy, memory) for the forward kernels of the
# 16-bit targets (--profile-forward: bias_gelu [4096, 4096], the general mul), every dtype.
if command -v ncu >/dev/null && [ "${NCU_FULL:-0}" = 1 ] && [ -x /tmp/broadcast/v1 ]; then
  ncu --set full --kernel-name regex:'Broadcast2dKernel|BroadcastNdKernel' \
    /tmp/broadcast/v1 --profile-forward 2>&1 | grep -v '^==PROF==' > "$OUT/broadcast-ncu-full.txt"
fi
# NCU_BACKWARD=1: every ncu section (occupancy, stall reasons, memory) for the backward passes of
# --profile (bias_gelu [16384, 1024] + [1024]: the [C] pass and its block sums; mul's [N, 1] pass
# and a same-shape multiply of as many bytes; every dtype), to see why the 16-bit passes run at
# 0.77-0.80 of the copy where a same-shape kernel moving the same bytes runs at 1.0
# (docs/benchmarks.md, rounds 20 and 21).
if command -v ncu >/dev/null && [ "${NCU_BACKWARD:-0}" = 1 ] && [ -x /tmp/broadcast/v1 ]; then
  ncu --set full --kernel-name regex:'ColumnPassKernel|SumPartialsKernel|RowPassKernel|ElementwiseKernel' \
    /tmp/broadcast/v1 --profile 2>&1 | grep -v '^==PROF==' > "$OUT/broadcast-ncu-backward.txt"
fi
exit $status
