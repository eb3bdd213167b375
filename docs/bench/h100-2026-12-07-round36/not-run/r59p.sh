#!/usr/bin/env bash
# Stop 53, after the parts: Paddle 2.6.2 installed, then add_rms_norm and softmax (whose float32
# backwards at 32768 columns now take clusters of 1024-thread blocks) built for sm_90 and their
# generated tests on gpu:0, every dtype; then add_rms_norm's float32 tests under memcheck.
R=$OUT
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } > $R/start.txt
bash .gpu/bin/stage.sh >> $R/start.txt 2>&1 && bash .gpu/bin/install.sh > $R/install.log 2>&1 ||
  { tail -n 20 $R/install.log; exit 1; }
date -u +%FT%TZ >> $R/start.txt
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
for op in add_rms_norm softmax; do
  python3 -m opgen build examples/$op --arch 90 > $R/build-$op.txt 2>&1 &
done
wait
date -u +%FT%TZ >> $R/start.txt
for op in add_rms_norm softmax; do
  tail -n 1 $R/build-$op.txt
  timeout 150 python3 -m opgen test examples/$op --device gpu -- -q -p no:warnings -rs 2>&1 |
    tail -n 8 | tee $R/tests-$op.txt
done
(cd examples/add_rms_norm && OPGEN_TEST_DEVICES=gpu timeout 200 compute-sanitizer --tool memcheck \
  --error-exitcode 9 --print-limit 40 python3 -m pytest test_add_rms_norm.py -q -p no:warnings \
  -p no:cacheprovider -k float32) > $R/sanitizer-add_rms_norm.log 2>&1
echo "memcheck rc=$?" >> $R/start.txt; tail -n 4 $R/sanitizer-add_rms_norm.log
date -u +%FT%TZ >> $R/start.txt
cat $R/start.txt
