#!/usr/bin/env bash
# Round 28: the Paddle-free benches on the GPU machine from binaries built elsewhere (.gpu/pre):
# the row-wise launcher with two cluster knobs, the generated examples, the broadcasting launcher,
# and Nsight Compute on the slow 16-bit backwards.
R=/tmp/r28; rm -rf $R; mkdir -p $R/launcher $R/broadcast $R/examples $R/ncu
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt; cat .gpu/src.commit >> $R/start.txt 2>/dev/null
OUT=$R/launcher PREBUILT=.gpu/pre TORCH=1 timeout 330 bash scripts/gpu/rowwise.sh "" \
  "-DOPGEN_ROW_CLUSTER_BLOCKS=2" "-DOPGEN_ROW_SMALL_CLUSTER_THREADS=256" \
  "-DOPGEN_ROW_CLUSTER_BLOCKS=2 -DOPGEN_ROW_SMALL_CLUSTER_THREADS=256" > $R/launcher/log.txt 2>&1
echo "launcher rc=$?" >> $R/start.txt
OUT=$R/examples PREBUILT=.gpu/pre timeout 150 bash scripts/gpu/rowwise_examples.sh "" \
  > $R/examples/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
OUT=$R/broadcast PREBUILT=.gpu/pre NCU=0 LARGE=0 timeout 100 bash scripts/gpu/broadcast.sh "" \
  > $R/broadcast/log.txt 2>&1
echo "broadcast rc=$?" >> $R/start.txt
OUT=$R/ncu timeout 100 bash scripts/gpu/rowwise_ncu.sh /tmp/rowwise/v1 \
  "rms_norm_grad 1024x32768 bfloat16" "rms_norm_grad 1024x32768 float32" \
  "layer_norm_grad 4096x4096 bfloat16" > $R/ncu/log.txt 2>&1
echo "ncu rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r28.tgz" -C $R .
cat $R/start.txt; tail -n 4 $R/*/log.txt
