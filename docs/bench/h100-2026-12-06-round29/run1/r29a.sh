#!/usr/bin/env bash
# Round 29, first lease: the row-wise examples as committed (base), with cheap values read by
# several lambdas kept (keep), and the one-input float32 long rows in 512-thread pairs (pairs);
# Nsight Compute on layer_norm's 16-bit backward in base and keep.
R=/tmp/r29a; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt; cat .gpu/r29.commit >> $R/start.txt
for v in base:pre44: keep:pre44k: pairs:pre44p:-DOPGEN_ROW_WIDE_PAIRS=1; do
  IFS=: read -r name dir flags <<< "$v"
  mkdir -p $R/$name
  OUT=$R/$name BUILD=/tmp/rx-$name PREBUILT=.gpu/$dir timeout 150 \
    bash scripts/gpu/rowwise_examples.sh "$flags" > $R/$name/log.txt 2>&1
  echo "$name rc=$?" >> $R/start.txt
done
for name in base keep; do
  OUT=$R/$name timeout 100 bash scripts/gpu/rowwise_ncu.sh /tmp/rx-$name/v1 \
    "layer_norm_grad 4096x4096 bfloat16" >> $R/start.txt 2>&1
done
if grep -q H200 $R/start.txt; then  # issue 13's table and issue 11's targets on the H200
  mkdir -p $R/launcher $R/broadcast
  OUT=$R/launcher PREBUILT=.gpu/pre TORCH=1 timeout 200 bash scripts/gpu/rowwise.sh "" \
    > $R/launcher/log.txt 2>&1
  echo "launcher rc=$?" >> $R/start.txt
  OUT=$R/broadcast PREBUILT=.gpu/pre44 LARGE=0 timeout 150 bash scripts/gpu/broadcast.sh "" \
    > $R/broadcast/log.txt 2>&1
  echo "broadcast rc=$?" >> $R/start.txt
fi
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r29a.tgz" -C $R .
cat $R/start.txt
for name in base keep pairs; do grep -E "layer_norm +backward (bfloat16|float16)|forward  float32   1024x32768" $R/$name/log.txt; done
