#!/usr/bin/env bash
# Profiles single kernels of scripts/gpu/rowwise_bench.cu with Nsight Compute on the GPU machine:
# for each "op shape dtype" triple, the third launch of the op's main kernel (RegisterKernel or
# LoopKernel, after two warm-up launches; a backward's SumPartialsKernel too), with the sections
# that say what bounds it (throughput, occupancy, warp stalls, memory). Output under $OUT.
#   bash scripts/gpu/rowwise_ncu.sh /tmp/rowwise/v1 "softmax 4096x4096 bfloat16" ...
# The generated examples' binary (scripts/gpu/rowwise_examples.sh, /tmp/rowwise-examples/v1)
# takes the same triples: its generated functor's launches come before the hand-written one's.
set -uo pipefail
OUT=${OUT:-/tmp/opgen-out}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
mkdir -p "$OUT/ncu"
bench=$1
shift
for triple in "$@"; do
  read -r op shape dtype <<< "$triple"
  log="$OUT/ncu/$op-$shape-$dtype.txt"
  timeout 120 "$NCU" -k 'regex:RegisterKernel|LoopKernel|SumPartialsKernel' --launch-skip 2 \
    --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis \
    "$bench" --time-only --op "$op" --shape "$shape" --dtype "$dtype" --iters 2 > "$log" 2>&1
  echo "$triple: exit $? ($(grep -c "Duration" "$log") kernels)"
done
