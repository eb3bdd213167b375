#!/usr/bin/env bash
# Stop 52, with the last part of Paddle: the row-wise examples' functors (Paddle-free) at HEAD's
# rule, the column inputs hoisted only in kernels with column sums (v1), against
# -DOPGEN_ROW_HOIST_COLUMNS=0 (v2, round 34's kernels).
bash .gpu/bin/stage.sh || exit 1
R=/tmp/r55; rm -rf $R; mkdir -p $R/rx
P=$PWD/.gpu/pre55
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat $P/commit; } > $R/start.txt
( cd $P && tar xJf rowwise-examples.tar.xz ) || exit 1
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$P timeout 200 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_ROW_HOIST_COLUMNS=0" > $R/rx/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r55a.tgz -C $R .
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
