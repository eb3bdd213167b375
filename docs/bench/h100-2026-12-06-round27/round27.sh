#!/usr/bin/env bash
# Round 27: the Paddle-free benches on the GPU machine from binaries built elsewhere (.gpu/pre).
R=/tmp/r27; rm -rf $R; mkdir -p $R/launcher $R/broadcast $R/examples
date -u +%FT%TZ > $R/start.txt; git rev-parse HEAD >> $R/start.txt 2>/dev/null
OUT=$R/launcher PREBUILT=.gpu/pre TORCH=1 timeout 330 bash scripts/gpu/rowwise.sh "" \
  "-DOPGEN_ROW_WIDE_SUM_THREADS=512" "-DOPGEN_ROW_PDL=1" > $R/launcher/log.txt 2>&1
echo "launcher rc=$?" >> $R/start.txt
OUT=$R/broadcast PREBUILT=.gpu/pre NCU=0 LARGE=0 timeout 120 bash scripts/gpu/broadcast.sh "" \
  > $R/broadcast/log.txt 2>&1
echo "broadcast rc=$?" >> $R/start.txt
OUT=$R/examples PREBUILT=.gpu/pre timeout 150 bash scripts/gpu/rowwise_examples.sh "" \
  > $R/examples/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r27.tgz" -C $R .
cat $R/start.txt; tail -n 4 $R/*/log.txt
