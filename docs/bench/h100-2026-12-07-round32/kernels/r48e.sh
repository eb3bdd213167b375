#!/usr/bin/env bash
# Stop 48: embedding's sorted backward in pieces (binaries of scripts/gpu/embedding_bench.cu built
# here, .gpu/emb48/): new = the change (EMBEDDING_PIECE_ROWS 64, EMBEDDING_SUM_ROWS 2), old =
# 9894cab's kernels (one warp a run) with the same cases, p8 = pieces of 8 rows and 3 rows in
# flight (most runs long: the combine path everywhere), rows4 = 4 rows in flight. Most needed first.
cd .gpu/emb48 || exit 1
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/start.txt
{ echo "== new"; ./new; echo "rc=$?"; } 2>&1 | tee $OUT/new.txt
{ echo "== old"; ./old --time-only; echo "rc=$?"; } 2>&1 | tee $OUT/old.txt
{ echo "== p8"; ./p8; echo "rc=$?"; } 2>&1 | tee $OUT/p8.txt
echo "== memcheck new --check-only" | tee $OUT/memcheck.txt
timeout 120 compute-sanitizer --tool memcheck ./new --check-only 2>&1 | tail -n 4 | tee -a $OUT/memcheck.txt
{ echo "== rows4"; ./rows4 --time-only; echo "rc=$?"; } 2>&1 | tee $OUT/rows4.txt
date -u +%FT%TZ | tee -a $OUT/start.txt
