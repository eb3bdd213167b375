#!/usr/bin/env bash
# Lead's round 4 on the H200 (Paddle shipped): bash .gpu/round4.sh A|B
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
PO="python3 -m opgen"
case $1 in
A)
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
  (mkdir -p "$OUT/dyn"; OUT=$OUT/dyn timeout 500 bash scripts/gpu/custom_dynamic.sh > "$OUT/dyn/log.txt" 2>&1; echo "rc=$?" >> "$OUT/dyn/log.txt") &
  builds=()
  for d in examples/relu6 examples/embedding; do
    ($PO build $d --arch 90 > "$OUT/build-$(basename $d).txt" 2>&1; echo "rc=$?" >> "$OUT/build-$(basename $d).txt") &
    builds+=($!)
  done
  wait "${builds[@]}"
  (timeout 200 $PO test examples/embedding --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs > "$OUT/tests-embedding.log" 2>&1; echo "rc=$?" >> "$OUT/tests-embedding.log")
  wait ;;
B)
  timeout 100 python3 scripts/gpu/embedding_op.py examples/embedding > "$OUT/embedding-op.txt" 2>&1; echo "rc=$?" >> "$OUT/embedding-op.txt"
  :
esac
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
