#!/usr/bin/env bash
# Round 28, third lease: the committed launcher (one-chunk clusters for 16-bit rows with column
# sums, 32 slices for 128 partials or more) against the old defaults, launcher and generated
# examples, PyTorch in the same run, memcheck of the new default in every dtype.
R=/tmp/r28c; rm -rf $R; mkdir -p $R/launcher $R/examples
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt; cat .gpu/src.commit >> $R/start.txt
OLD="-DOPGEN_ROW_CLUSTER_CHUNKS=0 -DOPGEN_ROW_WIDE_SUM_PARTIALS=0"
OUT=$R/launcher PREBUILT=.gpu/pre TORCH=1 timeout 240 bash scripts/gpu/rowwise.sh "" "$OLD" \
  > $R/launcher/log.txt 2>&1
echo "launcher rc=$?" >> $R/start.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/rowwise/v1 --check-only --quick \
  > $R/launcher/memcheck-all-dtypes.txt 2>&1
echo "memcheck v1 (all dtypes) rc=$?" >> $R/start.txt
OUT=$R/examples PREBUILT=.gpu/pre timeout 150 bash scripts/gpu/rowwise_examples.sh "" "$OLD" \
  > $R/examples/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r28c.tgz" -C $R .
cat $R/start.txt; tail -n 3 $R/*/log.txt $R/launcher/memcheck-all-dtypes.txt
