#!/usr/bin/env bash
# Lead's round 5 on the H200: the merged double backward (bias_gelu) and softmax's fast 16-bit exp
set -u
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}; mkdir -p "$OUT"
PO="python3 -m opgen"
for d in bias_gelu softmax; do
  ($PO build examples/$d --arch 90 > "$OUT/build-$d.txt" 2>&1; echo "rc=$?" >> "$OUT/build-$d.txt") &
done; wait
(timeout 150 $PO test examples/bias_gelu --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs -k "double or backward" > "$OUT/tests-bias_gelu.log" 2>&1; echo "rc=$?" >> "$OUT/tests-bias_gelu.log") &
(timeout 150 $PO test examples/softmax --device gpu -- -q -p no:warnings -p no:cacheprovider -rfEs > "$OUT/tests-softmax.log" 2>&1; echo "rc=$?" >> "$OUT/tests-softmax.log") &
wait
cd "$OUT" && tar czf /tmp/res.tgz . && rm -rf "$OUT"/* && mv /tmp/res.tgz "$OUT"/
