#!/usr/bin/env bash
# Stop 49, after r49p.sh (Paddle installed, /tmp/src at .gpu/src.commit): the benches one after
# another: issue 13's table, issue 11's shapes, per call, relu6.
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat /tmp/src/src.commit; } > $OUT/start.txt
TAG=r49b bash scripts/gpu/side_by_side.sh ${LIMIT:-555} p:rowwise-bench,broadcast-bench,percall,bench > $OUT/side.txt 2>&1
echo "side by side rc=$?" >> $OUT/start.txt; date -u +%FT%TZ >> $OUT/start.txt
cat $OUT/start.txt; tail -n 5 /tmp/side-by-side/p.log
for f in /tmp/side-by-side/p/bench-*.txt /tmp/side-by-side/p/percall*.txt; do echo "== $f"; grep "forward\|backward" $f | grep -v "copy\|naive" | awk -F'│' '{print $2,$3,$5,$6,$8,$9,$10}' | head -40; done
