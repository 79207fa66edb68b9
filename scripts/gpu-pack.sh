#!/usr/bin/env bash
# Packs what a GPU-machine call needs into .device/ (git-ignored; name it in the device tool's `carry`):
# the portable binaries from build-gpu/ (stripped, xz-compressed: the carry limit is 64 MiB) and the Fashion-MNIST
# files the dataset generator reads. On the GPU machine, scripts/gpu-check.sh unpacks them into build-gpu/.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .device && mkdir -p .device/bin .device/fashion-mnist
pack() {  # pack BINARY NAME
  strip -o ".device/bin/$2" "$1"
  xz -T2 -6 ".device/bin/$2"
}
pack build-gpu/qdeploy qdeploy
pack build-gpu/tests/conformance/qdeploy_conformance qdeploy_conformance
# Only the GPU tests: the CPU tests run in CI.
for t in build-gpu/tests/test_cuda; do
  [ -x "$t" ] && [ -f "$t" ] && pack "$t" "$(basename "$t")"
done
cp /usr/share/datasets/fashion-mnist/*.gz .device/fashion-mnist/
du -sh .device
