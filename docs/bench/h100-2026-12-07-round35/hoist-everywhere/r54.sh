#!/usr/bin/env bash
# Stop 51, second lease, Paddle-free: the column inputs' vectors loaded once a thread before its
# rows (-DOPGEN_ROW_HOIST_COLUMNS=1, register schedules that stage their rows: clusters and
# 1024-thread blocks) against the default: the row-wise examples' generated functors (v1 default,
# v2 hoisted), the launcher's host checks with it (every shape),
# Nsight Compute on layer_norm's bfloat16 backward at 1024 x 32768.
R=/tmp/r54; rm -rf $R; mkdir -p $R/rx $R/ncu
P=$PWD/.gpu/pre54
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat $P/commit; } > $R/start.txt
( cd $P && tar xJf rowwise-examples.tar.xz && tar xJf rowwise.tar.xz ) || exit 1
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$P timeout 200 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_ROW_HOIST_COLUMNS=1" > $R/rx/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
timeout 120 $P/rowwise/v1 --check-only > $R/check.txt 2>&1
echo "launcher checks (hoisted, every shape) rc=$?" >> $R/start.txt
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 80 $NCU -k 'regex:RegisterKernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum' \
  /tmp/rx/v2 --op layer_norm_grad --shape 1024x32768 --dtype bfloat16 > $R/ncu/layer_norm_grad-v2.txt 2>&1
echo "ncu rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r54.tgz -C $R .
cat $R/start.txt; tail -n 2 $R/check.txt
python3 - $R/rx/log.txt <<'PY'
import re, sys
v = None; rows = {}
for line in open(sys.argv[1]):
    if line.startswith('== v'): v = line.split()[1]; continue
    m = re.match(r'(\w+)\s+(forward|backward)\s+(\w+)\s+(\d+x\d+)\s+gen\s+([\d.]+) ms\s+(\d+) GB/s ([\d.]+)', line)
    if m: rows.setdefault(m.group(1, 2, 3, 4), {})[v] = float(m[7])
for k, d in rows.items():
    if abs(d.get('v1', 0) - d.get('v2', 0)) > 0.012 or (k[3] == '1024x32768' and k[1] == 'backward'):
        print(*k, d.get('v1'), d.get('v2'))
PY
grep -E "Duration|Registers Per|Achieved Occ|inst_executed.sum|Eligible Warps" $R/ncu/layer_norm_grad-v2.txt | head; grep issue_stalled $R/ncu/layer_norm_grad-v2.txt | sort -k3 -n -r | head -n 4
