#!/usr/bin/env bash
# Stop 52, Paddle-free: layer_norm's backward with xhat and dxhat kept (row.keep, 16-bit rows in
# registers) rather than recomputed in each of its three lambdas: v1 177a03b, v2 -DOPGEN_LN_KEEP=1
# (lnkeep.patch, in the copied header only).

R=/tmp/r56; rm -rf $R; mkdir -p $R/rx
P=$PWD/.gpu/pre56
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat $P/commit; } > $R/start.txt
( cd $P && tar xJf rowwise-examples.tar.xz ) || exit 1
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$P timeout 200 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_LN_KEEP=1" > $R/rx/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
mkdir -p $R/ncu; NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in v1 v2; do
  timeout 40 $NCU -k 'regex:RegisterKernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics 'smsp__inst_executed.sum' /tmp/rx/$v --op layer_norm_grad --shape 1024x32768 \
    --dtype bfloat16 > $R/ncu/layer_norm_grad-$v.txt 2>&1
done
grep -H "Duration\|Registers Per\|inst_executed.sum" $R/ncu/*.txt
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r56a.tgz -C $R .
cat $R/start.txt; grep -E "mismatches|spill" $R/rx/log.txt
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
