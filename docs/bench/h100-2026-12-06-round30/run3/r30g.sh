#!/usr/bin/env bash
# Round 30, the kept change (Paddle-free): OPGEN_ROW_LONG_LOOP (on, v1) against off (v2): v1's host
# checks on every shape and dtype and under memcheck (float32 quick set, which has rows of 32768),
# then the float32 anchor shapes timed, v1 everywhere and v2 at 1024 x 32768, twice, taking turns.
R=/tmp/r30g; rm -rf $R; mkdir -p $R /tmp/prebuilt
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } \
  > $R/start.txt
xz -dc .gpu/pre45b/rowwise.tar.xz | tar xf - -C /tmp/prebuilt
B=/tmp/prebuilt/rowwise
timeout 90 $B/v1 --check-only > $R/check-v1.txt 2>&1; echo "v1 checks (every shape) rc=$?" >> $R/start.txt
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $B/v1 --check-only --quick \
  --float-only > $R/memcheck-v1.txt 2>&1; echo "v1 memcheck rc=$?" >> $R/start.txt
for round in 1 2; do
  timeout 60 $B/v1 --time-only --dtype float32 > $R/time-v1-$round.txt 2>&1
  timeout 60 $B/v2 --time-only --shape 1024x32768 --dtype float32 > $R/time-v2-$round.txt 2>&1
done
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r30g.tgz" -C $R .
cat $R/start.txt; tail -n 2 $R/check-v1.txt $R/memcheck-v1.txt; for f in $R/time-*.txt; do echo "== $f"; grep -v "^device" $f; done
