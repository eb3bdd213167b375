#!/usr/bin/env bash
# examples/embedding's CUDA kernels on the GPU machine, no Paddle needed: builds
# scripts/gpu/embedding_bench.cu once per set of knobs (in parallel), checks every variant against
# the host (the first fully, the others with QUICK=1 only timed), times ids [65536], D = 1024
# against a device-to-device copy, then PyTorch's F.embedding on the same shapes
# (scripts/gpu/embedding_torch.py). Output under $OUT; exits non-zero on any mismatch.
#   bash scripts/gpu/embedding.sh                                   # the default knobs
#   bash scripts/gpu/embedding.sh "" "-DEMBEDDING_UNROLL=4" "-DEMBEDDING_STREAMING_STORES=0"
set -uo pipefail
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT" /tmp/embedding
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.memory --format=csv |
  tee "$OUT/embedding-gpu.txt"
[ $# -gt 0 ] || set -- ""
i=0
for flags in "$@"; do
  i=$((i + 1))
  nvcc -O3 -std=c++17 -arch=sm_90 -I"$CUDA_HOME/include/cccl" -Itemplates/common/csrc \
    -Iexamples/embedding/csrc $flags scripts/gpu/embedding_bench.cu -o /tmp/embedding/v$i \
    2>&1 | tee "$OUT/embedding-build-v$i.txt" &
done
wait
status=0
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== v$i ${flags:-default}" | tee -a "$OUT/embedding.txt"
  if [ ! -x /tmp/embedding/v$i ]; then
    echo "v$i did not build" | tee -a "$OUT/embedding.txt"
    status=1
    continue
  fi
  mode=
  [ "${QUICK:-1}" = 1 ] && [ $i != 1 ] && mode=--time-only
  /tmp/embedding/v$i $mode 2>&1 | tee -a "$OUT/embedding.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
echo "== torch" | tee -a "$OUT/embedding.txt"
python3 scripts/gpu/embedding_torch.py 2>&1 | tee -a "$OUT/embedding.txt"
if command -v ncu >/dev/null && [ "${NCU:-1}" = 1 ] && [ -x /tmp/embedding/v1 ]; then
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size
  timeout 120 ncu --metrics "$metrics" --kernel-name regex:'GatherKernel|ScatterAdd|SegmentSum' \
    --launch-count 12 /tmp/embedding/v1 --time-only 2>&1 | grep -v '^==PROF==' \
    > "$OUT/embedding-ncu.txt"
fi
exit $status
