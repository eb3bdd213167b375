#!/usr/bin/env bash
# Round 15 on the H200, run B (after Paddle 2.6.2 was shipped: ../shared/gpu/pack.sh's parts),
# the working tree with this round's launcher and examples (layer_norm's backward reducing two
# means in one round): the four row-wise examples' and the broadcasting ops' generated tests on
# gpu:0; then, a separate command, layer_norm's GPU tests (float32, bfloat16) under
# compute-sanitizer memcheck.
set -u
bash .gpu/bin/install.sh > /tmp/install.log 2>&1; tail -n 3 /tmp/install.log
SKIP_RELU6=1 OUT=$OUT bash scripts/gpu/h200.sh rowwise broadcast 2>&1 | tail -n 60
source .gpu/bin/env.sh; export GLOG_minloglevel=3
(cd examples/layer_norm && OPGEN_TEST_DEVICES=gpu timeout 200 compute-sanitizer --tool memcheck \
  --error-exitcode 9 --print-limit 40 python3 -m pytest test_layer_norm.py -q -p no:warnings \
  -p no:cacheprovider -k "float32 or bfloat16") > "$OUT/sanitizer-layer_norm.log" 2>&1
echo "memcheck rc=$?"
