#!/usr/bin/env bash
# GPU checks, run ON the GPU machine from the repository root: GPU unit tests, compute-sanitizer, conformance and
# benchmarks. Results (logs, JSON, tables) go to OUTDIR. The binaries come prebuilt from the Debian machine
# (scripts/build-gpu.sh, carried as build-gpu/) because the GPU machine has no package registry.
# Usage: scripts/gpu-check.sh OUTDIR [STEP...]   steps: env tests sanitizer conformance (default: all)
set -uo pipefail
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [STEP...]}
shift
STEPS=${*:-env tests sanitizer conformance}
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
      ldd "$B/qdeploy" | tee "$OUT/ldd.txt"
      python3 -c 'import torch, onnxruntime; print("torch", torch.__version__, "ort", onnxruntime.__version__)' | tee -a "$OUT/gpu.txt"
      ;;
    tests)
      for t in "$B"/tests/test_*; do
        "$t" --gtest_brief=1 2>&1 | tee -a "$OUT/tests.log" | tail -3 || rc=1
      done
      ;;
    sanitizer)
      compute-sanitizer --tool memcheck --error-exitcode 3 "$B/tests/test_cuda" --gtest_brief=1 > "$OUT/memcheck.log" 2>&1 || rc=1
      tail -5 "$OUT/memcheck.log"
      ;;
    conformance)
      "$B/tests/conformance/qdeploy_conformance" /usr/share/libonnx-testdata/data/node > "$OUT/conformance.log" 2>&1 || true
      tail -2 "$OUT/conformance.log"
      ;;
    *) echo "unknown step $step"; rc=2 ;;
  esac
done
exit $rc
