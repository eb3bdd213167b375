#!/usr/bin/env bash
# Round 31, call 7: the benches alone, one after another (snapshot in /tmp/src from call 6):
# issue 13's table (the four row-wise examples, PyTorch and copy), issue 11's shapes, per call, relu6.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat /tmp/src/src.commit; } > $OUT/start.txt
TAG=r31b bash scripts/gpu/side_by_side.sh ${LIMIT:-555} p:rowwise-bench,broadcast-bench,percall,bench > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; tail -n 5 /tmp/side-by-side/p.log
for f in /tmp/side-by-side/p/bench-*.txt /tmp/side-by-side/p/percall*.txt; do echo "== $f"; grep "forward\|backward" $f | grep -v "copy\|naive" | awk -F'│' '{print $2,$3,$5,$6,$8,$9,$10}' | head -40; done
