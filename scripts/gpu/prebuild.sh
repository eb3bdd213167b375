#!/usr/bin/env bash
# Builds the Paddle-free GPU benches for sm_90 on this machine (nvcc, no GPU needed), so the GPU
# machine's time goes to running them: carry DIR/<bench>.tar.xz and pass PREBUILT=DIR to
# scripts/gpu/rowwise.sh, rowwise_examples.sh or broadcast.sh with the same knobs in the same order.
#   bash scripts/gpu/prebuild.sh DIR rowwise "" "-DOPGEN_ROW_WORDS=0"
#   bash scripts/gpu/prebuild.sh DIR rowwise-examples "-DOPGEN_ROW_BF16_LANES=0" ""
#   bash scripts/gpu/prebuild.sh DIR broadcast ""          # also builds tanh_ulp
# Builds run one after another (nvcc of these files needs several GB and minutes each here). Each
# binary's knobs go to DIR/<bench>/flags-v<i>.txt; the runners refuse other knobs. Then all of
# DIR/<bench> is packed into DIR/<bench>.tar.xz, a seventh of its size: carry that file alone.
set -euo pipefail
[ $# -ge 2 ] ||
  { echo "usage: prebuild.sh DIR rowwise|rowwise-examples|broadcast [FLAGS...]" >&2; exit 2; }
dir=$1 bench=$2
shift 2
[ $# -gt 0 ] || set -- ""
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$dir/$bench"
nvcc_() { nvcc -O3 -std=c++17 -arch=sm_90 "$@"; }
case $bench in
  rowwise)
    src=(-Xptxas -warn-spills -Itemplates/common/csrc -Itemplates/rowwise/csrc scripts/gpu/rowwise_bench.cu) ;;
  rowwise-examples)
    gen=$dir/$bench/gen
    mkdir -p "$gen/opgen"
    cp scripts/gpu/rowwise_shim/opgen/rowwise_op.h "$gen/opgen/"
    for op in softmax rms_norm layer_norm add_rms_norm; do cp "examples/$op/csrc/$op.h" "$gen/"; done
    src=(-Xptxas -warn-spills -Itemplates/common/csrc -Itemplates/rowwise/csrc -I"$gen" -Iscripts/gpu
      scripts/gpu/rowwise_examples.cu) ;;
  broadcast)
    src=(-Itemplates/common/csrc -Itemplates/elementwise/csrc scripts/gpu/broadcast_bench.cu)
    nvcc_ -Itemplates/common/csrc -Itemplates/elementwise/csrc scripts/gpu/tanh_ulp.cu -o "$dir/$bench/tanh_ulp" ;;
  *) echo "prebuild.sh: unknown bench '$bench'" >&2; exit 2 ;;
esac
i=0
for flags in "$@"; do
  i=$((i + 1))
  start=$(date +%s)
  # shellcheck disable=SC2086  # the knobs are separate words
  nvcc_ $flags "${src[@]}" -o "$dir/$bench/v$i" > "$dir/$bench/build-v$i.txt" 2>&1 ||
    { tail -n 20 "$dir/$bench/build-v$i.txt" >&2; exit 1; }
  printf '%s\n' "$flags" > "$dir/$bench/flags-v$i.txt"
  echo "$bench v$i (${flags:-default}): built in $(( $(date +%s) - start )) s"
done
# What to carry: the binaries packed (the runners unpack DIR/<bench>.tar.xz where DIR/<bench>/ is
# absent, scripts/gpu/prebuilt.sh).
tar cf - -C "$dir" "$bench" | xz -T0 -6 > "$dir/$bench.tar.xz"
echo "carry $dir/$bench.tar.xz ($(( $(stat -c %s "$dir/$bench.tar.xz") / 1048576 )) MiB)"
