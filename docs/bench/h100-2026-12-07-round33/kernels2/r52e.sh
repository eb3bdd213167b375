#!/usr/bin/env bash
# Stop 50: embedding's sorted backward with the keys' window (PieceAt's fast path), pieces of 16,
# one row in flight (new, every check, memcheck), against HEAD 3adaabd's defaults (head), HEAD's
# code with pieces of 16 and one row (p16r1: the window alone), 9894cab's kernels (old), and the
# new code with pieces of 8 and 24. Timings once each.
cd .gpu/emb52 || exit 1
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/start.txt
{ echo "== new"; ./new; echo "rc=$?"; } > $OUT/new.txt 2>&1; tail -n 2 $OUT/new.txt | head -n 1
grep -i "mismatch\|fail" $OUT/new.txt | head -n 5
echo "== memcheck new --check-only" > $OUT/memcheck.txt
timeout 150 compute-sanitizer --tool memcheck ./new --check-only 2>&1 | tail -n 4 >> $OUT/memcheck.txt; tail -n 3 $OUT/memcheck.txt
{ echo "== p8 checks"; ./p8 --check-only; echo "rc=$?"; } 2>&1 | tail -n 2 | tee $OUT/p8-check.txt
for r in 1; do for v in head old p16r1 new p8 p24; do
  { echo "== $v"; ./$v --time-only; echo "rc=$?"; } > $OUT/$v-t$r.txt 2>&1
done; done
date -u +%FT%TZ | tee -a $OUT/start.txt
