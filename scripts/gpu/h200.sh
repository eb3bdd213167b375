#!/usr/bin/env bash
# The GPU session on the H200 (see ../../docs/benchmarks.md and ../shared/gpu/README.md): after
# Paddle GPU is shipped, `bash scripts/gpu/h200.sh STAGE...` runs, with logs under $OUT:
#   tests     relu6 and a fresh `opgen new` op: generated tests on gpu:0, all dtypes
#   gpu1      the same tests with every tensor on gpu:1 (a machine with two GPUs)
#   large     relu6 forward over more than 2^31 elements
#   sanitize  compute-sanitizer memcheck over relu6's GPU tests
#   bench     opgen bench on the GPU: table, JSON, PNG (and the per-call section)
#   percall   opgen bench's per-call section alone (issue 15): relu6 at 1, 1024 and 2^16
#             elements through its wrapper, its raw API and PyTorch's F.relu6, same run (~1 min)
#   fuzz      50 fuzzed ops against numpy on the GPU, float32 and float16 (docs/fuzzing.md)
#   fuzz-memcheck  the same 50 ops under compute-sanitizer memcheck (run `fuzz` first: it builds)
#   broadcast examples/bias_gelu and a broadcasting mul (tests/specs/mul.yaml): generated tests
#             on gpu:0
#   broadcast-bench  opgen bench --shapes of both for the patterns of issue 11
#   mul-bench  the broadcasting mul's alone (its build takes minutes: a group of its own)
#   embedding examples/embedding (kind: custom): generated tests on gpu:0, all dtypes; memcheck
#             over its small cases; through Paddle against torch F.embedding, and an
#             out-of-range id on the GPU (scripts/gpu/embedding_op.py); about 4 minutes
#   custom-inplace  kind: custom in-place variants (`inplace:`) on gpu:0: two generated ops'
#             test_inplace_* tests, then under memcheck (scripts/gpu/custom_inplace.sh; ~2 min)
#   elementwise-inplace  issue 12: an elementwise op with two outputs and `inplace:`
#             (tests/specs/bias_relu_mask.yaml, out over x; then mask over x): its in-place
#             CUDA kernel in a static program on gpu:0 against the host
#             (scripts/gpu/elementwise_inplace.py), its generated test_inplace_* tests, then
#             the check under memcheck (~4 min)
#   custom-dynamic  kind: custom outputs sized by the data (-1): tests/data/masked_select's
#             generated tests on gpu:0 and under memcheck, and a -1 spec's unchanged skeleton's
#             (scripts/gpu/custom_dynamic.sh; ~4 min)
#   embedding-kernels  its CUDA kernels alone against the host and torch (scripts/gpu/embedding.sh,
#             default knobs, no ncu); about 1 minute
#   broadcast-kernels  the broadcasting launcher alone (nvcc, scripts/gpu/broadcast.sh): every
#             host check (outputs past 2^31 included), timings against cudaMemcpy, ncu; then
#             four knob variants timed (about 3 minutes in all)
#   hardening bad calls each in its own process (scripts/gpu/error_cases.py); a two-input,
#             two-output op's generated tests (NaN/inf inputs, one-output gradients, double
#             backward); a copy whose launch skips the last element must fail its tests
#   deploy    relu6 and bias_gelu on gpu:0: to_static forward and gradients, jit.save then
#             jit.load and the predictor (enable_use_gpu) in fresh processes, auto_cast O1/O2,
#             relu6_ (scripts/gpu/deploy_checks.py; about 1 minute after the build)
#   rowwise   issue 13: builds examples/softmax, layer_norm, rms_norm and add_rms_norm (four at
#             once), then their generated tests on gpu:0 (all dtypes; OPGEN_TEST_GPU=1: gpu:1)
#   rowwise-bench  opgen bench of the four on issue 13's anchor shapes (float32, bfloat16,
#             float16), PyTorch's softmax / layer_norm / rms_norm and the copy in the same run
#   rowwise-memcheck  compute-sanitizer memcheck over those examples' GPU tests (float32 and
#             bfloat16)
#   rowwise-kernels  the four examples' generated functors alone (no Paddle needed:
#             scripts/gpu/rowwise_examples.sh), beside the hand-written ones and a copy, every
#             dtype and anchor shape (about 4 minutes)
#   rowwise-calls  each rowwise example's call per dtype at 4096 x 4096: its time and the host's
#             time to issue it (scripts/gpu/rowwise_call_profile.py), then layer_norm's kernels
#             under ncu (run `rowwise` first: it builds them)
#   rowwise-launcher  the row-wise launcher alone (scripts/gpu/rowwise.sh, default knobs, no
#             PyTorch): memcheck, every check against the host reference in double (softmax,
#             rms_norm, layer_norm, add_rms_norm; all dtypes), timings; about 4 minutes
#   rowwise-words  the examples' functors timed with OPGEN_ROW_WORDS=0 (16-bit vectors chosen
#             lane by lane) and with the default (as 32-bit words), same run (about 3 minutes)
#   rowwise-bf16  the same with OPGEN_ROW_BF16_LANES=0 (bfloat16 lanes through CUDA's conversion)
#             and with the default (read out of their words), same run (about 3 minutes)
#   add-rms   examples/add_rms_norm against a generated add followed by examples/rms_norm and
#             against numpy, read on the host, then timed (scripts/gpu/add_rms_compare.py;
#             builds both; about 3 minutes)
#   rowwise-fuzz  16 random rowwise ops (tests/rowwise_fuzzing.py, seed 6): their CUDA forward
#             kernels against the evaluator in float32, float16 and bfloat16, then their generated
#             tests on gpu:0 in float32 and float16 (docs/fuzzing.md, "Row-wise ops"). A row-wise
#             op takes about 80 s to build there, so 2 to a library, 8 libraries at a time
#             (5 min 20 s in round 16)
#   softmax-e tests/specs/softmax_e.yaml (a per-element output read by a later output): its
#             generated tests on gpu:0, all dtypes
#   backward-probe  issue 11: bias_gelu's forward and autograd step per dtype, then the same
#             under nsys (every kernel and CUDA call), scripts/gpu/backward_probe.py
#   (the rowwise stages build what they need; run `rowwise` first so the others find it built)
# PREBUILT=DIR (scripts/gpu/prebuild.sh) hands the Paddle-free benches binaries built elsewhere.
# scripts/gpu/side_by_side.sh runs groups of stages at once (and a committed snapshot of the tree).
set -uo pipefail
source .gpu/bin/env.sh || exit 1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} GLOG_minloglevel=3
OUT=${OUT:-/tmp/opgen-out}
mkdir -p "$OUT"
opgen() { python3 -m opgen "$@"; }
status=0
fresh() {  # a fresh `opgen new` op, built for this GPU
  [ -f /tmp/fresh/fresh_op/fresh_op.yaml ] ||
    { rm -rf /tmp/fresh && opgen new fresh_op --elementwise --dir /tmp/fresh >/dev/null; }
  opgen build /tmp/fresh/fresh_op --arch 90
}
# docs/fuzzing.md: 50 ops, 10 to a library, 5 builds at a time, 1000003-element inputs included
fuzz=(tests/fuzzing.py --device gpu --count 50 --seed 5 --batch 10 --jobs 5
  --dtypes float32,float16 --large --generated-tests none --workdir /tmp/fuzz-gpu)
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
[ "${SKIP_RELU6:-0}" = 1 ] || opgen build examples/relu6 --arch 90 || exit 1  # SKIP_RELU6=1: stages that do not use it
for stage in "$@"; do
  echo "== $stage"
  case $stage in
    tests)
      opgen test examples/relu6 --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 15 | tee "$OUT/tests-relu6.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      fresh && opgen test /tmp/fresh/fresh_op --device gpu -- -q -p no:warnings 2>&1 | tail -n 5 | tee "$OUT/tests-new-op.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    gpu1)
      nvidia-smi -L | tee "$OUT/gpus.txt"
      OPGEN_TEST_GPU=1 opgen test examples/relu6 --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 15 | tee "$OUT/tests-relu6-gpu1.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      fresh && OPGEN_TEST_GPU=1 opgen test /tmp/fresh/fresh_op --device gpu -- -q -p no:warnings 2>&1 | tail -n 5 | tee "$OUT/tests-new-op-gpu1.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    fuzz)
      python3 "${fuzz[@]}" --json "$OUT/fuzz-gpu.json" 2>&1 | tail -n 40 | tee "$OUT/fuzz-gpu.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    fuzz-memcheck)
      compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 40 \
        python3 "${fuzz[@]}" > "$OUT/fuzz-gpu-memcheck.log" 2>&1
      [ $? = 0 ] || status=1
      tail -n 40 "$OUT/fuzz-gpu-memcheck.log" ;;
    large)
      OPGEN_TEST_LARGE=1 opgen test examples/relu6 --device gpu -- -q -p no:warnings -k beyond 2>&1 | tail -n 5 | tee "$OUT/tests-large.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    sanitize)
      (cd examples/relu6 && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck --error-exitcode 9 \
        python3 -m pytest test_relu6.py -q -p no:warnings -p no:cacheprovider -k "not 1000003") \
        > "$OUT/sanitizer.log" 2>&1
      [ $? = 0 ] || status=1
      # which code each reported error came from: the kernel's host frames
      grep -A4 "Program hit\|Invalid" "$OUT/sanitizer.log" | grep "Host Frame" | sort | uniq -c |
        sort -rn | head -n 8
      tail -n 4 "$OUT/sanitizer.log" ;;
    bench)
      opgen bench examples/relu6 --device gpu --sizes 2^16,2^20,2^24,2^26,2^28 \
        --json "$OUT/bench-relu6.json" --plot "$OUT/bench-relu6.png" 2>&1 | tee "$OUT/bench-relu6.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    percall)
      opgen bench examples/relu6 --device gpu --sizes 2^16 --dtype float32 --compare copy \
        --json "$OUT/percall-relu6.json" 2>&1 | tee "$OUT/percall-relu6.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    hardening)
      python3 scripts/gpu/error_cases.py --device gpu --arch 90 --work /tmp/error-cases 2>&1 |
        tee "$OUT/error-cases.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      rm -rf /tmp/hard && mkdir -p /tmp/hard/trig_pair /tmp/hard/broken
      cp tests/specs/trig_pair.yaml /tmp/hard/trig_pair/
      opgen generate /tmp/hard/trig_pair/trig_pair.yaml >/dev/null || status=1
      cp -r /tmp/hard/trig_pair /tmp/hard/broken/
      # the same-shape launch one element short; a sabotage that no longer applies fails the stage
      sed -i 's/Launch(f, plan.numel, in, out,/Launch(f, plan.numel - 1, in, out,/' \
        /tmp/hard/broken/trig_pair/csrc/opgen/broadcast.cuh
      grep -q 'plan.numel - 1, in, out,' /tmp/hard/broken/trig_pair/csrc/opgen/broadcast.cuh ||
        { echo "the sabotage did not apply to broadcast.cuh"; status=1; }
      # both builds at once (75-140 s each there); a failed build fails its tests below
      opgen build /tmp/hard/trig_pair --arch 90 & opgen build /tmp/hard/broken/trig_pair --arch 90 >/dev/null &
      wait
      opgen test /tmp/hard/trig_pair --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 8 |
        tee "$OUT/tests-trig-pair.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      opgen test /tmp/hard/broken/trig_pair --device gpu -- -q -p no:warnings -k "test_forward and float32 and 1000003" 2>&1 |
        tail -n 8 | tee "$OUT/tests-broken-kernel.txt"
      [ "${PIPESTATUS[0]}" != 0 ] || { echo "the broken kernel passed its tests"; status=1; } ;;
    broadcast)
      rm -rf /tmp/mul && mkdir -p /tmp/mul/mul && cp tests/specs/mul.yaml /tmp/mul/mul/ &&
        opgen generate /tmp/mul/mul/mul.yaml >/dev/null || status=1
      # both builds at once (about 140 s each there); a failed build fails its tests below
      opgen build examples/bias_gelu --arch 90 & opgen build /tmp/mul/mul --arch 90 &
      wait
      opgen test examples/bias_gelu --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 8 |
        tee "$OUT/tests-bias-gelu.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      opgen test /tmp/mul/mul --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 8 |
        tee "$OUT/tests-mul.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    broadcast-bench|mul-bench)
      [ -f /tmp/mul/mul/mul.yaml ] || { mkdir -p /tmp/mul/mul && cp tests/specs/mul.yaml /tmp/mul/mul/ &&
        opgen generate /tmp/mul/mul/mul.yaml >/dev/null; }
      if [ "$stage" = broadcast-bench ]; then
        opgen bench examples/bias_gelu --device gpu --shapes 16384x1024:1024,4096x4096:4096 \
          --json "$OUT/bench-bias-gelu.json" 2>&1 | tee "$OUT/bench-bias-gelu.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      fi
      opgen bench /tmp/mul/mul --device gpu \
        --shapes 64x1x512:1x256x512,16384x1024:16384x1,16384x1024:[],16384x1024:16384x1024 \
        --json "$OUT/bench-mul.json" 2>&1 | tee "$OUT/bench-mul.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    broadcast-kernels)
      # the defaults with every check; then, timed only, the knobs still open (docs/benchmarks.md)
      OUT="$OUT" QUICK=1 bash scripts/gpu/broadcast.sh "" "-DOPGEN_BCAST_WAVES=2" \
        "-DOPGEN_BCAST_WAVES=2 -DOPGEN_BCAST_UNROLL=1" "-DOPGEN_BCAST_COLUMN_PREFETCH=0" \
        "-DOPGEN_BCAST_COLUMN_VECTOR_BYTES=8" || status=1 ;;
    embedding)
      opgen build examples/embedding --arch 90 || { status=1; continue; }
      opgen test examples/embedding --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 15 | tee "$OUT/tests-embedding.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      (cd examples/embedding && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck --error-exitcode 9 \
        python3 -m pytest test_embedding.py -q -p no:warnings -p no:cacheprovider -k "one or typical") \
        > "$OUT/embedding-memcheck.log" 2>&1
      [ $? = 0 ] || status=1
      tail -n 5 "$OUT/embedding-memcheck.log"
      python3 scripts/gpu/embedding_op.py examples/embedding 2>&1 | tee "$OUT/embedding-op.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    custom-inplace)
      bash scripts/gpu/custom_inplace.sh || status=1 ;;
    custom-dynamic)
      bash scripts/gpu/custom_dynamic.sh || status=1 ;;
    elementwise-inplace)
      for over in out mask; do  # both variants built at once
        dir=/tmp/elementwise-inplace/$over/bias_relu_mask
        rm -rf "$dir" && mkdir -p "$dir"
        sed "s/^inplace: {x: out}/inplace: {x: $over}/" tests/specs/bias_relu_mask.yaml > "$dir/bias_relu_mask.yaml"
        { opgen generate "$dir/bias_relu_mask.yaml" >/dev/null && opgen build "$dir" --arch 90; } \
          > "$OUT/build-elementwise-inplace-$over.txt" 2>&1 &
      done
      wait
      for over in out mask; do
        dir=/tmp/elementwise-inplace/$over/bias_relu_mask
        tail -n 1 "$OUT/build-elementwise-inplace-$over.txt"
        [ -f "$dir/bias_relu_mask.py" ] || { status=1; continue; }
        python3 scripts/gpu/elementwise_inplace.py "$dir" 2>&1 | tee "$OUT/elementwise-inplace-$over.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        OPGEN_TEST_DEVICES=gpu opgen test "$dir" --device gpu -- -q -p no:warnings -rs -k inplace 2>&1 |
          tail -n 8 | tee "$OUT/tests-elementwise-inplace-$over.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/gpu/elementwise_inplace.py "$dir" \
          > "$OUT/elementwise-inplace-$over-memcheck.log" 2>&1
        [ $? = 0 ] || status=1
        tail -n 3 "$OUT/elementwise-inplace-$over-memcheck.log"
      done ;;
    embedding-kernels)
      NCU=0 bash scripts/gpu/embedding.sh || status=1 ;;
    deploy)
      opgen build examples/bias_gelu --arch 90 >/dev/null &&
        python3 scripts/gpu/deploy_checks.py --out "$OUT" 2>&1 | grep -v "^\s*warnings.warn\|Warning" |
        tee "$OUT/deploy.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1
      OPGEN_TEST_DEVICES=gpu opgen test examples/relu6 --device gpu -- -q -p no:warnings -rs -k "test_amp or test_inplace" 2>&1 |
        tail -n 8 | tee "$OUT/tests-relu6-amp-inplace.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    rowwise)
      for op in softmax layer_norm rms_norm add_rms_norm; do
        opgen build examples/$op --arch 90 > "$OUT/build-$op.txt" 2>&1 &
      done
      wait
      for op in softmax layer_norm rms_norm add_rms_norm; do
        tail -n 1 "$OUT/build-$op.txt"
        opgen test examples/$op --device gpu -- -q -p no:warnings -rs 2>&1 | tail -n 8 |
          tee "$OUT/tests-$op.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      done ;;
    rowwise-bench)
      rows=4096x4096,16384x1024,65536x256,1024x32768,262144x128
      for op in softmax layer_norm rms_norm add_rms_norm; do
        opgen bench examples/$op --device gpu --shapes $rows --dtype float32 --dtype bfloat16 \
          --dtype float16 --json "$OUT/bench-$op.json" 2>&1 | tee "$OUT/bench-$op.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      done ;;
    rowwise-kernels)
      OUT="$OUT" bash scripts/gpu/rowwise_examples.sh || status=1 ;;
    rowwise-launcher)
      OUT="$OUT" TORCH=0 bash scripts/gpu/rowwise.sh || status=1 ;;
    rowwise-words)
      # OPGEN_ROW_WORDS (on by default since round 19): the examples' functors without and with it
      OUT="$OUT" bash scripts/gpu/rowwise_examples.sh "-DOPGEN_ROW_WORDS=0" "" || status=1 ;;
    rowwise-bf16)
      # OPGEN_ROW_BF16_LANES (on by default, not yet measured): the examples' functors without and
      # with it
      OUT="$OUT" bash scripts/gpu/rowwise_examples.sh "-DOPGEN_ROW_BF16_LANES=0" "" || status=1 ;;
    add-rms)
      for op in rms_norm add_rms_norm; do
        opgen build examples/$op --arch 90 > "$OUT/build-$op.txt" 2>&1 &
      done
      wait
      python3 scripts/gpu/add_rms_compare.py --shapes 4096x4096,16384x1024,1024x32768 \
        --dtypes float32,bfloat16,float16 2>&1 | tee "$OUT/add-rms.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    rowwise-calls)
      for op in softmax layer_norm rms_norm add_rms_norm; do
        python3 scripts/gpu/rowwise_call_profile.py $op 2>&1 | tee -a "$OUT/rowwise-calls.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
      done
      ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python3 scripts/gpu/rowwise_call_profile.py layer_norm --calls 1 2>&1 |
        grep -v '^==PROF==' > "$OUT/rowwise-calls-ncu.txt" ;;
    rowwise-memcheck)
      for op in softmax layer_norm rms_norm add_rms_norm; do
        (cd examples/$op && OPGEN_TEST_DEVICES=gpu compute-sanitizer --tool memcheck \
          --error-exitcode 9 --print-limit 40 python3 -m pytest test_$op.py -q -p no:warnings \
          -p no:cacheprovider -k "float32 or bfloat16") > "$OUT/sanitizer-$op.log" 2>&1
        [ $? = 0 ] || status=1
        tail -n 4 "$OUT/sanitizer-$op.log"
      done ;;
    rowwise-fuzz)
      python3 -u tests/rowwise_fuzzing.py --device gpu --count 16 --seed 6 --batch 2 --jobs 8 \
        --dtypes float32,float16,bfloat16 --generated-tests float32,float16,bfloat16 \
        --workdir /tmp/rowwise-fuzz 2>&1 | tee "$OUT/rowwise-fuzz-gpu.txt" | tail -n 60
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    softmax-e)
      rm -rf /tmp/softmax_e && mkdir -p /tmp/softmax_e/softmax_e &&
        cp tests/specs/softmax_e.yaml /tmp/softmax_e/softmax_e/ &&
        opgen generate /tmp/softmax_e/softmax_e >/dev/null &&
        opgen build /tmp/softmax_e/softmax_e --arch 90 &&
        opgen test /tmp/softmax_e/softmax_e --device gpu -- -q -p no:warnings -rs 2>&1 |
        tail -n 8 | tee "$OUT/tests-softmax-e.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    backward-probe)
      opgen build examples/bias_gelu --arch 90 > "$OUT/build-bias-gelu.txt" 2>&1 || status=1
      python3 scripts/gpu/backward_probe.py examples/bias_gelu 2>&1 | tee "$OUT/backward-probe.txt"
      if command -v nsys > /dev/null; then
        nsys profile -o /tmp/probe --force-overwrite true python3 scripts/gpu/backward_probe.py \
          examples/bias_gelu --iters 20 > /dev/null 2>&1
        nsys stats -r cuda_gpu_kern_sum,cuda_api_sum /tmp/probe.nsys-rep > "$OUT/backward-nsys.txt" 2>&1
        head -n 60 "$OUT/backward-nsys.txt"
      else
        ncu --print-summary per-kernel python3 scripts/gpu/backward_probe.py examples/bias_gelu \
          --iters 3 2>&1 | grep -v "^==PROF==" > "$OUT/backward-ncu.txt"
        grep -E "^  [a-zA-Z_]" "$OUT/backward-ncu.txt" | sort | uniq -c | head -n 40
      fi ;;
    *) echo "unknown stage $stage"; status=2 ;;
  esac
done
exit $status
