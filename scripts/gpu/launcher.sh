#!/usr/bin/env bash
# Launcher experiments on the GPU machine, no Paddle needed: builds scripts/gpu/launcher_bench.cu
# once per set of launcher knobs (in parallel), times each against cudaMemcpy, then reads DRAM
# counters with ncu for the first two variants. Output under $OUT.
#   bash scripts/gpu/launcher.sh "-DOPGEN_WAVES=1" "-DOPGEN_WAVES=0 -DOPGEN_THREADS=128" ...
set -uo pipefail
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}
SIZES=${SIZES:-268435456}
mkdir -p "$OUT" /tmp/launcher
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv | tee "$OUT/launcher-gpu.txt"
i=0
for flags in "$@"; do
  i=$((i + 1))
  nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc $flags scripts/gpu/launcher_bench.cu \
    -o /tmp/launcher/v$i &
done
wait
i=0
for flags in "$@"; do
  i=$((i + 1))
  for n in $SIZES; do
    /tmp/launcher/v$i "$n" "v$i ${flags:-default}" | tee -a "$OUT/launcher.txt"
  done
done
if command -v ncu >/dev/null && [ "${NCU:-1}" = 1 ]; then
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  for v in 1 2; do
    [ -x /tmp/launcher/v$v ] || continue
    echo "== ncu v$v" | tee -a "$OUT/launcher-ncu.txt"
    ncu --metrics "$metrics" --kernel-name regex:'ElementwiseKernel' --launch-skip 1 \
      --launch-count 2 /tmp/launcher/v$v 67108864 "v$v" 2>&1 | grep -vE '^(v[0-9]|==PROF==)' |
      tail -n 30 | tee -a "$OUT/launcher-ncu.txt"
  done
fi
