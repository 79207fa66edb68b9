#!/usr/bin/env bash
# GPU checks, run ON the GPU machine from the repository root: GPU unit tests, compute-sanitizer, conformance and
# benchmarks. Results (logs, JSON, tables) go to OUTDIR. The binaries come prebuilt from the Debian machine
# (scripts/build-gpu.sh, carried as build-gpu/) because the GPU machine has no package registry.
# Usage: scripts/gpu-check.sh OUTDIR [STEP...]
#   steps: env tests sanitizer conformance bench (the default: all of these), and on demand:
#   pipeline  the detection pipeline (decode -> GPU letterbox -> engine -> GPU NMS) at 672, batch 1 and 16, fp16,
#             INT8 and INT8 with int8 NHWC input / fp16 output bindings (QD_PIPELINE_PRECISIONS: fp16 int8 int8io),
#             on the FMNIST-Det val set: per-stage GPU times and mAP (docs/benchmarks.md)
#   precision the precision / speed table and chart of the shipped detector (scripts/precision-speed.py) at 640
#             (its QAT row from the shipped QAT model, or QD_PRECISION_QAT=MODEL.onnx)
#   exports   real exports of python/qdeploy's models with the installed torch (dynamo and legacy exporters) checked
#             against ONNX Runtime and against each other (scripts/onnx-exports.py)
#   classifiers  ResNet-50, MobileNetV2/V3-Large, EfficientNet-B0, RegNetY-400MF, ConvNeXt-T and ShuffleNetV2 against
#             PyTorch eager and torch.compile, FP16 and INT8, batch 1, 32 and 256, with correctness checks
#             (bench/classifiers.py; QD_CLASSIFIERS_ARGS adds flags, e.g. --models resnet50,convnext_tiny)
#   fmnist    the shipped Fashion-MNIST classifiers (models/*_fmnist.onnx) as CUDA FP16 and INT8 plans (INT8 with their
#             shipped caches): top-1 on the 10,000 test images, OUT/fmnist.md (the models' cards, docs/benchmarks.md)
#   soak      the shipped detector's INT8 engine, 4 threads x 8 contexts x 10,000 runs per thread on the sample
#             images, every output against the single-threaded run, memory curve (tests/soak/soak.cpp;
#             QD_SOAK_ARGS replaces its counts): OUT/soak/soak.csv, soak.svg, soak.log
#   qat       QAT fine-tuning of the shipped detector (python -m qdeploy.qat; QD_QAT_ARGS replaces its flags), then INT8 GPU
#             plans built from its Q/DQ model (all INT8, and with layers in fp16: QD_QAT_FALLBACKS) evaluated on the val set
# QD_TEST_FILTER narrows the tests (a gtest filter), QD_TEST_SHARDS runs them (and the sanitizer's runs, whose tools
# QD_SANITIZER_TOOLS names) as that many processes at once, or only shard QD_TEST_SHARD_INDEX of them;
# QD_BENCH_ARGS adds flags to bench/yolov5s_vs_pytorch.py.
set -uo pipefail
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [STEP...]}
shift
STEPS=${*:-env tests sanitizer conformance bench}
B=build-gpu
mkdir -p "$OUT"
# Unpack the binaries scripts/gpu-pack.sh carried over.
if [ -f .device/bin/binaries.tar.xz ]; then
  mkdir -p $B/tests/conformance /tmp/qd-bin
  # Unpacked again whenever the tar differs from the last one (by checksum: a warm machine keeps /tmp between calls,
  # and the tar carried by a later call, e.g. the other build of an A/B, need not be newer).
  sum=$(md5sum < .device/bin/binaries.tar.xz | cut -d' ' -f1)
  if [ "$(cat /tmp/qd-bin/.stamp 2>/dev/null)" != "$sum" ]; then
    rm -rf /tmp/qd-bin && mkdir -p /tmp/qd-bin
    xz -dc .device/bin/binaries.tar.xz | tar -C /tmp/qd-bin -xf - && echo "$sum" > /tmp/qd-bin/.stamp
  fi
  for f in /tmp/qd-bin/*; do
    n=$(basename "$f")
    case $n in
      qdeploy | qdeploy-*) dst=$B/$n ;;
      qdeploy_conformance) dst=$B/tests/conformance/$n ;;
      *) dst=$B/tests/$n ;;
    esac
    cmp -s "$f" "$dst" && continue  # copied already (a concurrent run may be executing it)
    rm -f "$dst" && cp "$f" "$dst" && chmod +x "$dst"
  done
fi
# FMNIST-Det scenes for the pipeline and qat steps (generated here: the data sets are not carried).
D=/tmp/qd-data
fmnist_det() {  # fmnist_det DIR SPLIT COUNT SEED
  [ -f "$D/$1/annotations/instances_$2.json" ] || "$B/qdeploy" dataset fmnist-det --split "$2" --count "$3" --seed "$4" \
    --source-limit "${QD_QAT_SOURCE_LIMIT:-20000}" --out "$D/$1" --fmnist-dir .device/fashion-mnist --quiet > /dev/null
}
val_eval() {  # val_eval MODEL_OR_PLAN [FLAGS...]: qdeploy eval on the 1,000-scene val set
  local m=$1
  shift
  "$B/qdeploy" eval "$m" --images "$D/val/images" --annotations "$D/val/annotations/instances_val.json" "$@"
}
# in_shards LOG CMD...: CMD (a gtest binary, or a wrapper of one) as QD_TEST_SHARDS gtest shards at once, their logs
# concatenated into LOG; rc=1 when a shard fails.
# QD_TEST_SHARD_INDEX=k runs shard k alone (one process: a sanitizer over a part of the binary per call).
in_shards() {
  local log=$1 shards=${QD_TEST_SHARDS:-1} pids=() i pid
  local first=${QD_TEST_SHARD_INDEX:-0} last=${QD_TEST_SHARD_INDEX:-$((shards - 1))}
  shift
  for ((i = first; i <= last; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$@" > "$log.$i" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  for ((i = first; i <= last; i++)); do cat "$log.$i"; done > "$log" && rm -f "$log".*
}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# cuDNN 9 (qdeploy loads it at run time for its cuDNN kernel candidates): here it comes with PyTorch's pip packages.
cudnn_lib=$(python3 -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$cudnn_lib" ] && [ -d "$cudnn_lib" ] && export LD_LIBRARY_PATH="$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
for step in $STEPS; do
  echo "=== $step ==="
  case $step in
    env)
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
      ldd "$B/qdeploy" | tee -a "$OUT/gpu.txt"
      echo "cuDNN: ${cudnn_lib:-not found} $(ls "$cudnn_lib"/libcudnn.so.9* 2>/dev/null | head -1)" | tee -a "$OUT/gpu.txt"
      python3 -c 'import torch, onnxruntime; print("torch", torch.__version__, "ort", onnxruntime.__version__)' | tee -a "$OUT/gpu.txt"
      ;;
    tests)
      # QD_TEST_SHARDS=N runs each binary as N gtest shards at once (the GPU machine's cores share the suites' host-side
      # reference loops: the ConvInt8 suite alone took over 400 s in one process), logs concatenated.
      for t in "$B"/tests/test_*; do
        [ -f "$t" ] && [ -x "$t" ] || continue  # (a local build folder also has CTest's .cmake files here)
        log="$OUT/$(basename "$t").log"
        in_shards "$log" "$t" --gtest_brief=1 --gtest_filter="${QD_TEST_FILTER:-*}"
        grep -E "FAILED|PASSED|SKIPPED|SNR|max \|diff\|" "$log" | tail -40
      done
      ;;
    sanitizer)
      # compute-sanitizer over the GPU test binary: QD_SANITIZER_TOOLS (default memcheck; also racecheck, synccheck,
      # initcheck), each run as QD_TEST_SHARDS gtest shards side by side (QD_SANITIZER_TIMEOUT: seconds per shard, for
      # a call's time limit); OUT/TOOL.log holds the shards' logs.
      # The kernel timeline's recording test skips itself here (CUPTI is the sanitizer's while it runs).
      # The tests' builds time their kernels in a plain run of the same tests first, into a timing cache they share
      # (QD_TEST_TIMING_CACHE, tests/test_util.h): timing every candidate of every build at the sanitizer's pace took
      # most of a sanitized run. A warm machine keeps the cache for the next tool's call.
      key=$(echo "${QD_TEST_FILTER:-*} ${QD_TEST_SHARDS:-1} ${QD_TEST_SHARD_INDEX:-}" | md5sum | cut -c1-12)
      export QD_TEST_TIMING_CACHE=/tmp/qd-timing/$key.json
      if [ ! -f "$QD_TEST_TIMING_CACHE" ]; then
        mkdir -p /tmp/qd-timing
        t0=$(date +%s)
        in_shards "$OUT/sanitizer-timing.log" "$B/tests/test_cuda" --gtest_brief=1 --gtest_filter="${QD_TEST_FILTER:-*}"
        echo "timing run (plain): $(($(date +%s) - t0)) s"
        grep -E "PASSED|FAILED TEST" "$OUT/sanitizer-timing.log"
      fi
      for tool in ${QD_SANITIZER_TOOLS:-memcheck}; do
        log="$OUT/$tool.log"
        in_shards "$log" timeout "${QD_SANITIZER_TIMEOUT:-0}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
          "$B/tests/test_cuda" --gtest_brief=1 --gtest_filter="${QD_TEST_FILTER:-*}"
        clean=$(grep -cE "SUMMARY: 0 errors|\(0 errors" "$log")
        ran=${QD_TEST_SHARDS:-1}
        [ -n "${QD_TEST_SHARD_INDEX:-}" ] && ran=1
        echo "$tool: $clean of $ran shards ended with 0 errors${QD_TEST_SHARD_INDEX:+ (shard $QD_TEST_SHARD_INDEX of ${QD_TEST_SHARDS:-1})}"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|tests ran" "$log" | sort | uniq -c | head -20
      done
      ;;
    conformance)
      # The node tests come packed by gpu-pack.sh (the GPU machine has no libonnx-testdata); two logs, one per mode:
      # the reference backend (as in CI) and the CUDA engine (fp32 plans through qd::build_engine + Engine::run).
      NODE=/usr/share/libonnx-testdata/data/node
      if [ -f .device/onnx-node-tests.tar.xz ]; then
        rm -rf /tmp/qd-onnx-node && mkdir -p /tmp/qd-onnx-node
        xz -dc .device/onnx-node-tests.tar.xz | tar -C /tmp/qd-onnx-node -xf - && NODE=/tmp/qd-onnx-node/node
      fi
      "$B/tests/conformance/qdeploy_conformance" "$NODE" > "$OUT/conformance-reference.log" 2>&1 || rc=1
      tail -1 "$OUT/conformance-reference.log"
      "$B/tests/conformance/qdeploy_conformance" "$NODE" --device cuda --precision fp32 --verbose \
        > "$OUT/conformance-cuda.log" 2>&1 || rc=1
      grep -v "^passed " "$OUT/conformance-cuda.log" | tail -40
      # onnx 1.23's node tests (opsets up to 28), carried in the repository, in both modes.
      rm -rf /tmp/qd-onnx123 && mkdir -p /tmp/qd-onnx123
      tar -C /tmp/qd-onnx123 -xJf tests/conformance/onnx-1.23-node-tests.tar.xz
      "$B/tests/conformance/qdeploy_conformance" /tmp/qd-onnx123/node \
        --expect-pass tests/conformance/onnx-1.23-expected-pass.txt > "$OUT/conformance-1.23-reference.log" 2>&1 || rc=1
      tail -1 "$OUT/conformance-1.23-reference.log"
      "$B/tests/conformance/qdeploy_conformance" /tmp/qd-onnx123/node --device cuda --precision fp32 --verbose \
        > "$OUT/conformance-1.23-cuda.log" 2>&1 || rc=1
      grep -v "^passed " "$OUT/conformance-1.23-cuda.log" | grep -v "^unsupported" | tail -40
      tail -1 "$OUT/conformance-1.23-cuda.log"
      ;;
    exports)
      # python/qdeploy's models exported with the installed torch (legacy opset 13, dynamo at its default opset and
      # at 18), run by qdeploy (reference and CUDA) against ONNX Runtime, and the dynamo exports' detections against
      # the legacy ones' (scripts/onnx-exports.py).
      python3 scripts/onnx-exports.py export /tmp/qd-exports > "$OUT/exports.log" 2>&1 || rc=1
      grep -E "opset|failed" "$OUT/exports.log" | grep -v Warning
      python3 scripts/onnx-exports.py check /tmp/qd-exports "$B/qdeploy" --cuda 2>&1 | tee -a "$OUT/exports.log" || rc=1
      cp /tmp/qd-exports/exports.json /tmp/qd-exports/check.json "$OUT/" 2>/dev/null
      ;;
    bench)
      # Images for the int8 plan's (minmax) calibration: carried by gpu-pack.sh, else generated here.
      calib=.device/calib/images
      [ -d $calib ] || { fmnist_det calib train 8 1; calib=$D/calib/images; }
      PYTHONPATH=python python3 bench/yolov5s_vs_pytorch.py --qdeploy "$B/qdeploy" --out "$OUT/bench" \
        --precisions fp16,fp16:qdeploy,int8 --calib-images "$calib" ${QD_BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 || rc=1
      tail -25 "$OUT/bench.log"
      tar -C "$OUT" -cJf "$OUT/bench.tar.xz" bench && rm -rf "$OUT/bench"  # few files come back from the machine
      ;;
    fmnist)
      {
        echo "| model | CUDA FP16 top-1 | CUDA INT8 top-1 |"
        echo "|---|---|---|"
        for m in models/*_fmnist.onnx; do
          n=$(basename "$m" .onnx)
          row="| \`$n\` |"
          for p in fp16 int8; do
            ex=()
            [ $p = int8 ] && ex=(--calib-cache "models/$n.cache")
            top1=$("$B/qdeploy" eval "$m" --fmnist .device/fashion-mnist --device cuda --precision $p "${ex[@]}" \
              2>> "$OUT/fmnist.log" | grep -oE 'top-1 [0-9.]+%' | cut -d' ' -f2)
            [ -n "$top1" ] || rc=1
            row="$row ${top1:-failed} |"
          done
          echo "$row"
        done
      } > "$OUT/fmnist.md"
      cat "$OUT/fmnist.md"
      ;;
    classifiers)
      # Minutes per model (torch.compile at three batches most of it): a few models per call.
      PYTHONPATH=python python3 bench/classifiers.py --qdeploy "$B/qdeploy" --out "$OUT/classifiers" \
        ${QD_CLASSIFIERS_ARGS:-} > "$OUT/classifiers.log" 2>&1 || rc=1
      grep -E "^\[.*(done in|FAILED)" "$OUT/classifiers.log"
      cat "$OUT/classifiers/results.md" 2>/dev/null
      tar -C "$OUT" -cJf "$OUT/classifiers.tar.xz" classifiers && rm -rf "$OUT/classifiers"
      ;;
    pipeline)
      fmnist_det val val 1000 0
      {
        PYTHONPATH=python python3 -m qdeploy.export --model yolov5n --nc 10 --weights models/yolov5n_fmnist_det.onnx \
          --imgsz 672 --dynamic --out "$D/det672.onnx"
        # int8io: the INT8 plan with an int8 NHWC input (quantized by the preprocessing kernel) and an fp16 output.
        for prec in ${QD_PIPELINE_PRECISIONS:-fp16 int8 int8io}; do
          fl=(--precision $prec)
          [ $prec = int8io ] && fl=(--precision int8 --input-format int8:nhwc --output-format fp16)
          "$B/qdeploy" build "$D/det672.onnx" --device cuda "${fl[@]}" --calib-cache models/yolov5n_fmnist_det.cache \
            --min images:1x3x672x672 --opt images:16x3x672x672 --max images:16x3x672x672 -o "$D/det672_$prec.plan"
          for b in 1 16; do
            for conf in 0.001 0.25; do
              echo "--- $prec batch $b conf $conf"
              val_eval "$D/det672_$prec.plan" --imgsz 672 --letterbox cudla --batch $b --conf $conf 2>&1 \
                | grep -v "^eval:"
            done
          done
        done
      } > "$OUT/pipeline.log" 2>&1 || rc=1
      grep -E "^---|pre- \+|per image|Average Precision  \(AP\) @\[ IoU=0.50:0.95 \| area=   all" "$OUT/pipeline.log"
      ;;
    precision)
      fmnist_det val val 1000 0
      {
        PYTHONPATH=python python3 -m qdeploy.export --model yolov5n --nc 10 --weights models/yolov5n_fmnist_det.onnx \
          --imgsz 640 --dynamic --out "$D/det640.onnx"
        python3 scripts/precision-speed.py --qdeploy "$B/qdeploy" --model "$D/det640.onnx" \
          --cache models/yolov5n_fmnist_det.cache --qat "${QD_PRECISION_QAT:-models/yolov5n_fmnist_det_qat.onnx}" \
          --images "$D/val/images" \
          --annotations "$D/val/annotations/instances_val.json" --batches 1,16 --out "$D/precision"
      } > "$OUT/precision.log" 2>&1 || rc=1
      tar -C "$D/precision" -cJf "$OUT/precision.tar.xz" results.json table.md tradeoff.svg chart.json
      grep "^|" "$OUT/precision.log"
      ;;
    qat)
      fmnist_det val val 1000 0
      fmnist_det train train 8000 1
      rm -rf "$D/qat" && mkdir -p "$D/qat/train"
      ln -s "$D/train/images" "$D/qat/train/images" && ln -s "$D/train/annotations" "$D/qat/train/annotations"
      ln -s "$D/val" "$D/qat/val"  # validation losses on held-out scenes (the train scenes are the FP32 model's)
      {
        PYTHONPATH=python python3 -m qdeploy.qat --model yolov5n --nc 10 --weights models/yolov5n_fmnist_det.onnx \
          --data "$D/qat" --placement 1 --calib-batches 16 --batch 32 --workers 12 --out "$D/qat/run" \
          ${QD_QAT_ARGS:---epochs 2 --max-batches 250 --mosaic 0 --task-weight 0.3 --warmup 50 --lr 1e-4 --ema 0.998 \
            --learn-ranges --range-lr-scale 0.1 --float-layers model.1.conv,model.24.m.+}
        echo "--- fp16"
        val_eval models/yolov5n_fmnist_det.onnx --device cuda --precision fp16 --quiet
        # Fallback sets (share of the conv MACs: /model.0 8.5%, /model.1 5.7%, the Detect head /model.24 1.5%);
        # QD_QAT_FALLBACKS (space-separated, each a --fp16-layers list or `none`) replaces them. Layers that trained
        # in float (--float-layers, the default recipe's /model.1 and head) have no Q/DQ, so they are fp16 in every
        # plan: `none` is then already 92.8% INT8 (docs/quantization.md, "Quantization-aware training (QAT)").
        fbs=(none /model.0/conv/Conv '/model.24/.*' '/model.1/conv/Conv,/model.24/.*' '/model.0/conv/Conv,/model.24/.*')
        [ -n "${QD_QAT_FALLBACKS:-}" ] && read -ra fbs <<< "$QD_QAT_FALLBACKS"
        # Asymmetric activations (uint8 zero points) have no GPU INT8 kernels: OUT/qat.onnx goes to the CPU reference.
        [[ " ${QD_QAT_ARGS:-} " == *" --asymmetric-activations "* ]] && fbs=() &&
          echo "--- asymmetric activations: evaluate OUT/qat.onnx with qdeploy eval --device cpu --precision int8"
        for fb in "${fbs[@]}"; do
          echo "--- qat int8, fp16 layers: $fb"
          [ "$fb" = none ] && fl=() || fl=(--fp16-layers "$fb")
          val_eval "$D/qat/run/qat.onnx" --device cuda --precision int8 "${fl[@]}" --quiet
        done
      } > "$OUT/qat.log" 2>&1 || rc=1
      cp "$D/qat/run/qat.onnx" "$OUT/qat.onnx" 2>/dev/null
      grep -E "^---|val loss|IoU=0.50:0.95 \| area=   all \| maxDets=100 \] = |IoU=0.50      \|" "$OUT/qat.log" \
        | grep -v "Recall"
      ;;
    soak)
      # shellcheck disable=SC2086 # QD_SOAK_ARGS is a list of flags
      "$B/tests/qdeploy_soak" models/yolov5n_fmnist_det.onnx --precision int8 \
        --calib-cache models/yolov5n_fmnist_det.cache --images models/samples --out "$OUT/soak" \
        ${QD_SOAK_ARGS:---threads 4 --contexts 8 --runs 10000} > "$OUT/soak.log" 2>&1 || rc=1
      tail -3 "$OUT/soak.log"
      ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
done
exit $rc
