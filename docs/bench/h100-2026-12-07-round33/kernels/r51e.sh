#!/usr/bin/env bash
# Stop 50: embedding's sorted backward, Paddle-free (scripts/gpu/embedding_bench.cu built here at
# HEAD with knobs, .gpu/emb51/): new = defaults (pieces of 64, 2 rows in flight), old = 9894cab's
# kernels (one warp a run), rows1/rows3/rows4 = 1/3/4 rows in flight, p32 = pieces of 32, p16r1,
# p32r4. Which rows-in-flight suits 4-byte and 16-bit dtypes.
cd .gpu/emb51 || exit 1
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/start.txt
{ echo "== new"; ./new; echo "rc=$?"; } 2>&1 | tee $OUT/new.txt | tail -n 3
for v in old rows4 rows1 rows3 p32 p16r1 p32r4 new; do
  { echo "== $v"; ./$v --time-only; echo "rc=$?"; } > $OUT/$v-t.txt 2>&1
done
{ echo "== rows4 checks"; ./rows4 --check-only; echo "rc=$?"; } 2>&1 | tail -n 3 | tee $OUT/rows4-check.txt
date -u +%FT%TZ | tee -a $OUT/start.txt
for v in new old rows1 rows3 rows4 p32 p16r1 p32r4; do
  echo "== $v"; grep -h "ids\|backward default" $OUT/$v-t.txt | paste - - | awk '{print $1, $3, $4, $5, $6, $(NF-6)}'
done
