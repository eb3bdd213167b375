#!/usr/bin/env bash
# Stop 51, Paddle-free, binaries built on the CPU machine at .gpu/pre53/commit:
# 1. scripts/gpu/embedding_bench.cu at HEAD (9bab71b's kernels: pieces of 16, one row): every
#    check, memcheck of the checks, timings.
# 2. the row-wise examples' generated functors: v1 default, v2 one-chunk cluster blocks held to
#    two an SM (-DOPGEN_ROW_CLUSTER_MIN_BLOCKS=2);
#    Nsight Compute on layer_norm's and rms_norm's bfloat16 backwards at 1024 x 32768, v1 and v2.
R=/tmp/r53a; rm -rf $R; mkdir -p $R/emb $R/rx $R/ncu1 $R/ncu2
P=$PWD/.gpu/pre53
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; date -u +%FT%TZ; cat $P/commit; } > $R/start.txt
cat $R/start.txt
E=$P/embedding_bench
{ echo "== checks"; timeout 100 $E --check-only; echo "rc=$?"; } > $R/emb/check.txt 2>&1
tail -n 2 $R/emb/check.txt; grep -i "mismatch\|fail" $R/emb/check.txt | head -n 5
{ echo "== memcheck --check-only"; timeout 150 compute-sanitizer --tool memcheck $E --check-only 2>&1 | tail -n 4; } > $R/emb/memcheck.txt
tail -n 2 $R/emb/memcheck.txt
{ timeout 60 $E --time-only; echo "rc=$?"; } > $R/emb/time.txt 2>&1
date -u +%FT%TZ >> $R/start.txt
OUT=$R/rx BUILD=/tmp/rx PREBUILT=$P timeout 240 bash scripts/gpu/rowwise_examples.sh "" \
  "-DOPGEN_ROW_CLUSTER_MIN_BLOCKS=2" > $R/rx/log.txt 2>&1
echo "examples rc=$?" >> $R/start.txt
if grep -q H200 $R/start.txt; then  # issue 13's table on the H200 itself: PyTorch in the same lease
  timeout 150 python3 scripts/gpu/rowwise_torch.py > $R/rx/rowwise-torch.txt 2>&1
  echo "torch rc=$?" >> $R/start.txt
fi
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in 1 2; do
  for op in layer_norm_grad rms_norm_grad; do
    timeout 100 $NCU -k 'regex:RegisterKernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
      --section ComputeWorkloadAnalysis --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum' \
      /tmp/rx/v$v --op $op --shape 1024x32768 --dtype bfloat16 > $R/ncu$v/$op.txt 2>&1
    echo "ncu v$v $op rc=$?" >> $R/start.txt
  done
done
date -u +%FT%TZ >> $R/start.txt
tar czf $OUT/r53a.tgz -C $R .
cat $R/start.txt
awk '/^== v/{v=$2} /(layer_norm|rms_norm) +backward/ && /1024x32768|4096x4096/ {printf "%s %-12s %-9s %-11s %s\n", v, $1, $3, $4, $9}' $R/rx/log.txt
for v in 1 2; do for op in layer_norm_grad rms_norm_grad; do echo "== v$v $op"; grep -E "Duration|Registers Per|Achieved Occ|Block Limit (Reg|Shared)|Shared Memory Config|Max Active Clusters|Grid Size|Eligible Warps|inst_executed.sum" $R/ncu$v/$op.txt | head -n 12; grep "issue_stalled" $R/ncu$v/$op.txt | sort -k3 -n -r | head -n 6; done; done
