#!/usr/bin/env bash
# Runs groups of scripts/gpu/h200.sh stages side by side on the GPU machine, one process per group,
# each under a time limit, then packs every group's output into one file (a `run` call brings back
# at most 8 files):
#   bash scripts/gpu/side_by_side.sh LIMIT_S NAME:STAGE[,STAGE...] ...
#   e.g. bash scripts/gpu/side_by_side.sh 450 a:tests b:broadcast c:rowwise d:hardening,embedding
# Group NAME's log is $OUT/NAME.log inside $OUT/${TAG:-r}.tgz, its stage files under NAME/.
# With .gpu/src.tgz (`git archive HEAD | gzip > .gpu/src.tgz; git rev-parse HEAD > .gpu/src.commit`,
# carried once) the stages run in that commit, unpacked to /tmp/src (over the last one, so its
# builds are kept), not in the working tree that travels with each call.
set -uo pipefail
if [ -f .gpu/src.tgz ]; then
  mkdir -p /tmp/src/.gpu && tar xzf .gpu/src.tgz -C /tmp/src && cp .gpu/src.commit /tmp/src/ || exit 1
fi
if [ -f /tmp/src/src.commit ]; then
  cp -r .gpu/bin /tmp/src/.gpu/ && cd /tmp/src || exit 1
fi
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
R=${R:-/tmp/side-by-side}
rm -rf "$R" && mkdir -p "$R"
limit=$1
shift
{ date -u +%FT%TZ; cat src.commit 2>/dev/null || git rev-parse HEAD 2>/dev/null; } > "$R/start.txt"
for group in "$@"; do
  name=${group%%:*}
  stages=${group#*:}
  skip=1  # the stages that use examples/relu6 build it first
  case ",$stages," in *,tests,*|*,gpu1,*|*,large,*|*,sanitize,*|*,bench,*|*,percall,*|*,deploy,*) skip=0 ;; esac
  ( OUT=$R/$name SKIP_RELU6=$skip timeout "$limit" bash scripts/gpu/h200.sh ${stages//,/ } \
      > "$R/$name.log" 2>&1
    echo "rc=$?" >> "$R/$name.log" ) &
done
wait
date -u +%FT%TZ >> "$R/start.txt"
for log in "$R"/*.log; do echo "=== $log"; tail -n 25 "$log"; done
tar czf "$OUT/${TAG:-r}.tgz" -C "$R" .
