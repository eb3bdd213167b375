#!/usr/bin/env bash
# Stop 53, Paddle-free: v1 = HEAD's defaults, v2 = -DOPGEN_ROW_CLUSTER_THREADS=1024 (cluster blocks
# of 1024 threads: the 16-bit backwards' one-chunk clusters of four where eight 512-thread blocks
# held a row of 32768).
R=/tmp/r58; rm -rf $R; mkdir -p $R/rx
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ
  cat .gpu/pre58/commit; } > $R/start.txt
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$PWD/.gpu/pre58 timeout 280 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_ROW_CLUSTER_THREADS=1024" > $R/rx/log.txt 2>&1; echo "rx rc=$?" >> $R/start.txt
mkdir -p $R/ncu; NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in v1 v2; do for op in layer_norm_grad rms_norm_grad; do
  timeout 40 $NCU -k 'regex:RegisterKernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics 'smsp__inst_executed.sum' /tmp/rx/$v --op $op --shape 1024x32768 \
    --dtype bfloat16 > $R/ncu/$op-$v.txt 2>&1
done; done
grep -H "Duration\|Registers Per\|inst_executed.sum\|Grid Size\|Cluster Size" $R/ncu/*.txt
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r58a.tgz -C $R .
cat $R/start.txt; grep -E "mismatches|spill" $R/rx/log.txt
python3 - $R/rx/log.txt <<'PY'
import re, sys
v = None; rows = {}
for line in open(sys.argv[1]):
    if line.startswith('== v'): v = line.split()[1]; continue
    m = re.match(r'(\w+)\s+(forward|backward)\s+(\w+)\s+(\d+x\d+)\s+gen\s+([\d.]+) ms\s+(\d+) GB/s ([\d.]+)', line)
    if m: rows.setdefault(m.group(1, 2, 3, 4), {})[v] = float(m[7])
print('op dir dtype shape v1 v2')
for k, d in rows.items():
    if abs(d.get('v1', 0) - d.get('v2', 0)) > 0.012 or k[3] == '1024x32768':
        print(*k, d.get('v1'), d.get('v2'))
PY
