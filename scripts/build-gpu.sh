#!/usr/bin/env bash
# Builds portable binaries for the GPU machine (Ubuntu 24.04, no package registry): sm_90a, static CUDA runtime,
# static libstdc++/protobuf/BLAS/image libraries; only glibc and the CUDA driver are taken from the host.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-gpu scripts/build.sh -DQD_STATIC=ON -DQD_CUDA=ON -DQD_CUDA_ARCH=90a "$@"
