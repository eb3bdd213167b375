#!/usr/bin/env bash
# Round 29, second lease: rows that share a block stage their next rows (16-bit, column sums, one
# chunk a thread; v1 rows of 512 lanes and more, v2 all), against the committed examples (base),
# and the 512-thread cluster blocks of one chunk held to two an SM (minb); Nsight Compute on
# layer_norm's and rms_norm's 16-bit backwards at 1024 x 32768.
R=/tmp/r29b; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $R/start.txt
date -u +%FT%TZ >> $R/start.txt; cat .gpu/r29.commit >> $R/start.txt
S1="-DOPGEN_ROW_STAGE_GROUPS=1" S2="-DOPGEN_ROW_STAGE_GROUPS=2"
run() {  # NAME DIR FLAGS...
  local name=$1 dir=$2; shift 2
  mkdir -p $R/$name
  OUT=$R/$name BUILD=/tmp/rx-$name PREBUILT=.gpu/$dir timeout 200 \
    bash scripts/gpu/rowwise_examples.sh "$@" > $R/$name/log.txt 2>&1
  echo "$name rc=$?" >> $R/start.txt
}
run base pre44 ""
run stage pre44s "$S1" "$S2"
[ -f .gpu/pre44m/rowwise-examples.tar.xz ] && run minb pre44m "-DOPGEN_ROW_CLUSTER_MIN_BLOCKS=2"
mkdir -p $R/launcher  # the launcher's functors against the host reference, staging on
source scripts/gpu/prebuilt.sh && (PREBUILT=.gpu/pre44s; use_prebuilt rowwise &&
  cp $PREBUILT/rowwise/v1 /tmp/rowwise-stage && cp $PREBUILT/rowwise/flags-v1.txt $R/launcher/)
timeout 120 /tmp/rowwise-stage --check-only > $R/launcher/check.txt 2>&1
echo "launcher check (staging 2, every shape) rc=$?" >> $R/start.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/rowwise-stage --check-only \
  --quick > $R/launcher/memcheck.txt 2>&1
echo "memcheck (staging 2, quick shapes, every dtype) rc=$?" >> $R/start.txt
OUT=$R/base timeout 150 bash scripts/gpu/rowwise_ncu.sh /tmp/rx-base/v1 \
  "layer_norm_grad 1024x32768 bfloat16" "rms_norm_grad 1024x32768 bfloat16" >> $R/start.txt 2>&1
date -u +%FT%TZ >> $R/start.txt
tar czf "$OUT/r29b.tgz" -C $R .
cat $R/start.txt
for name in base stage minb; do
  [ -f $R/$name/log.txt ] && awk -v n=$name '/^== v/{v=$2} /(layer_norm|rms_norm|add_rms_norm) +backward/{printf "%s %s %-12s %-9s %-11s %s\n", n, v, $1, $3, $4, $9}' $R/$name/log.txt
done
