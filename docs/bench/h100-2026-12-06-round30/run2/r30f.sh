#!/usr/bin/env bash
# Round 30, last lease (Paddle-free): float32 rows of 32768, the launcher's default (v1) against
# long rows sent to the loop over global memory (v2: -DOPGEN_ROW_REG_BYTES=64
# -DOPGEN_ROW_MAX_CLUSTER=1) and to clusters of four 512-thread blocks of four chunks (v3:
# -DOPGEN_ROW_REG_BYTES=64): host checks of the quick float32 shapes, then the times at 1024 x 32768
# in float32, each variant twice, taking turns.
R=/tmp/r30f; rm -rf $R; mkdir -p $R /tmp/prebuilt
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } \
  > $R/start.txt
xz -dc .gpu/pre45/rowwise.tar.xz | tar xf - -C /tmp/prebuilt
B=/tmp/prebuilt/rowwise
for v in 1 2 3; do
  timeout 60 $B/v$v --check-only --quick --float-only > $R/check-v$v.txt 2>&1
  echo "v$v ($(cat $B/flags-v$v.txt)) checks rc=$?" >> $R/start.txt
done
for round in 1 2; do
  for v in 1 2 3; do
    timeout 60 $B/v$v --time-only --shape 1024x32768 --dtype float32 > $R/time-v$v-$round.txt 2>&1
  done
done
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r30f.tgz" -C $R .
cat $R/start.txt; tail -n 3 $R/check-v*.txt; for f in $R/time-*.txt; do echo "== $f"; cat $f; done
