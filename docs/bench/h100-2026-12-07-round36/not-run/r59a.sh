#!/usr/bin/env bash
# Stop 53, Paddle-free: v1 = 1024-thread clusters after the
# 512-thread ones, before the loop (OPGEN_ROW_CLUSTER_FALLBACK, on); v2 = -DOPGEN_ROW_CLUSTER_FALLBACK=0.
R=/tmp/r59; rm -rf $R; mkdir -p $R/rx
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ
  cat .gpu/pre59/commit; } > $R/start.txt
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$PWD/.gpu/pre59 timeout 280 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_ROW_CLUSTER_FALLBACK=0" > $R/rx/log.txt 2>&1; echo "rx rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r59a.tgz -C $R .
cat $R/start.txt; grep -E "mismatches|spill" $R/rx/log.txt
python3 scripts/gpu/rowwise_examples_diff.py $R/rx/log.txt --always 1024x32768
