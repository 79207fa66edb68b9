#!/usr/bin/env bash
# Configures and builds qdeploy into BUILD_DIR (default: build). Extra arguments go to cmake; TARGETS (space-separated)
# builds those ninja targets instead of everything.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD
  set -- -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "$@"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# shellcheck disable=SC2086 # TARGETS is a list
ninja -C "$BUILD_DIR" -j "$JOBS" ${TARGETS:-}
