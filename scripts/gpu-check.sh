#!/usr/bin/env bash
# GPU checks, run ON the GPU machine from the repository root: GPU unit tests, compute-sanitizer, conformance and
# benchmarks. Results (logs, JSON, tables) go to OUTDIR. The binaries come prebuilt from the Debian machine
# (scripts/build-gpu.sh, carried as build-gpu/) because the GPU machine has no package registry.
# Usage: scripts/gpu-check.sh OUTDIR [STEP...]   steps: env tests sanitizer conformance bench (default: all)
# QD_TEST_FILTER narrows the tests (a gtest filter); QD_BENCH_ARGS adds flags to bench/yolov5s_vs_pytorch.py.
set -uo pipefail
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [STEP...]}
shift
STEPS=${*:-env tests sanitizer conformance bench}
B=build-gpu
mkdir -p "$OUT"
# Unpack the binaries scripts/gpu-pack.sh carried over.
if [ -d .device/bin ]; then
  mkdir -p $B/tests/conformance
  for f in .device/bin/*.xz; do
    n=$(basename "$f" .xz)
    case $n in
      qdeploy) dst=$B/qdeploy ;;
      qdeploy_conformance) dst=$B/tests/conformance/$n ;;
      *) dst=$B/tests/$n ;;
    esac
    xz -dc "$f" > "$dst" && chmod +x "$dst"
  done
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rc=0
for step in $STEPS; do
  echo "=== $step ==="
  case $step in
    env)
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
      ldd "$B/qdeploy" | tee -a "$OUT/gpu.txt"
      python3 -c 'import torch, onnxruntime; print("torch", torch.__version__, "ort", onnxruntime.__version__)' | tee -a "$OUT/gpu.txt"
      ;;
    tests)
      for t in "$B"/tests/test_*; do
        "$t" --gtest_brief=1 --gtest_filter="${QD_TEST_FILTER:-*}" > "$OUT/$(basename "$t").log" 2>&1 || rc=1
        grep -E "FAILED|PASSED|SKIPPED|SNR|max \|diff\|" "$OUT/$(basename "$t").log" | tail -40
      done
      ;;
    sanitizer)
      compute-sanitizer --tool memcheck --error-exitcode 3 "$B/tests/test_cuda" --gtest_brief=1 \
        --gtest_filter="${QD_TEST_FILTER:-*}" > "$OUT/memcheck.log" 2>&1 || rc=1
      tail -5 "$OUT/memcheck.log"
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
      ;;
    bench)
      PYTHONPATH=python python3 bench/yolov5s_vs_pytorch.py --qdeploy "$B/qdeploy" --out "$OUT/bench" \
        ${QD_BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 || rc=1
      tail -25 "$OUT/bench.log"
      ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
done
exit $rc
