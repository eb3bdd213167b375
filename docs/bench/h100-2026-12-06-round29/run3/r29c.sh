#!/usr/bin/env bash
# Round 29, third lease: each staged row's per-row inputs loaded with it (v1, the default)
# against loaded when the row starts (v2), the examples' functors; the launcher's functors with
# the default against the host reference on every shape and under memcheck in every dtype;
# Nsight Compute on layer_norm's bfloat16 backward at 1024 x 32768 and 4096 x 4096 (v1).
R=/tmp/r29c; rm -rf $R; mkdir -p $R/examples $R/launcher
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt; cat .gpu/r29.commit >> $R/start.txt
OUT=$R/examples BUILD=/tmp/rx-r PREBUILT=.gpu/pre44r timeout 200 \
  bash scripts/gpu/rowwise_examples.sh "" "-DOPGEN_ROW_PREFETCH_ROW_VALUES=0" > $R/examples/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
H200=0; grep -q H200 $R/start.txt && H200=1  # then PyTorch beside, and the broadcasting launcher
OUT=$R/launcher PREBUILT=.gpu/pre44r TORCH=$H200 timeout 240 bash scripts/gpu/rowwise.sh "" \
  > $R/launcher/log.txt 2>&1
echo "launcher (checks every shape, memcheck float32) rc=$?" >> $R/start.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/rowwise/v1 --check-only \
  --quick > $R/launcher/memcheck-all-dtypes.txt 2>&1
echo "memcheck v1 (quick shapes, every dtype) rc=$?" >> $R/start.txt
OUT=$R/examples timeout 120 bash scripts/gpu/rowwise_ncu.sh /tmp/rx-r/v1 \
  "layer_norm_grad 1024x32768 bfloat16" "layer_norm_grad 4096x4096 bfloat16" >> $R/start.txt 2>&1
if [ $H200 = 1 ]; then
  mkdir -p $R/broadcast
  OUT=$R/broadcast PREBUILT=.gpu/pre44 LARGE=0 timeout 150 bash scripts/gpu/broadcast.sh "" \
    > $R/broadcast/log.txt 2>&1
  echo "broadcast rc=$?" >> $R/start.txt
fi
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r29c.tgz" -C $R .
cat $R/start.txt
awk '/^== v/{v=$2} / gen / && ($1=="layer_norm") && $2=="backward" {printf "%s %-10s %-9s %-11s %s\n", v, $1, $3, $4, $10}' $R/examples/log.txt
