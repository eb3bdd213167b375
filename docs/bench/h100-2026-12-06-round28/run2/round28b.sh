#!/usr/bin/env bash
# Round 28, second lease: three launcher knobs for the backwards with column sums (rows sharing
# blocks stage their next rows; 32 slices in the partials' sum; one-chunk clusters), the launcher
# alone and the generated examples, plus memcheck of the variant with all three.
R=/tmp/r28b; rm -rf $R; mkdir -p $R/launcher $R/examples
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt
K1="-DOPGEN_ROW_PREFETCH_GROUPS=1" K2="-DOPGEN_ROW_SUM_SLICES=32" K3="-DOPGEN_ROW_CLUSTER_CHUNKS=1"
OUT=$R/launcher PREBUILT=.gpu/pre TORCH=0 timeout 300 bash scripts/gpu/rowwise.sh "" "$K1" "$K2" "$K3" \
  "$K1 $K2 $K3" > $R/launcher/log.txt 2>&1
echo "launcher rc=$?" >> $R/start.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/rowwise/v5 --check-only --quick \
  > $R/launcher/memcheck-v5.txt 2>&1
echo "memcheck v5 rc=$?" >> $R/start.txt
OUT=$R/examples PREBUILT=.gpu/pre timeout 150 bash scripts/gpu/rowwise_examples.sh "" "$K1 $K2 $K3" \
  > $R/examples/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r28b.tgz" -C $R .
cat $R/start.txt; tail -n 3 $R/*/log.txt $R/launcher/memcheck-v5.txt
