#!/usr/bin/env bash
# Packs what a GPU-machine call needs into .device/ (git-ignored; name it in the device tool's `carry`):
# the portable binaries from build-gpu/ (stripped, xz-compressed: the carry limit is 64 MiB), the Fashion-MNIST
# files the dataset generator reads, and the ONNX node tests (the conformance step). On the GPU machine, scripts/gpu-check.sh unpacks them into build-gpu/.
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
# The first 30,000 Fashion-MNIST train images (`--source-limit 30000` makes the same scenes from the full files), so
# that a training call's carry (repo + data + resumable checkpoint) stays under 64 MiB.
cp /usr/share/datasets/fashion-mnist/t10k-*.gz .device/fashion-mnist/
/usr/bin/python3 - <<'PYEOF'
import gzip, struct
src, dst, keep = "/usr/share/datasets/fashion-mnist", ".device/fashion-mnist", 30000
for name, item in (("train-images-idx3-ubyte", 28 * 28), ("train-labels-idx1-ubyte", 1)):
    data = gzip.open(f"{src}/{name}.gz").read()
    ndim = data[3]
    header = bytearray(data[: 4 + 4 * ndim])
    header[4:8] = struct.pack(">I", keep)
    body = data[4 + 4 * ndim : 4 + 4 * ndim + keep * item]
    with gzip.GzipFile(f"{dst}/{name}.gz", "wb", mtime=0) as f:
        f.write(bytes(header) + body)
PYEOF
# The ONNX backend node tests (Debian's libonnx-testdata: ~27 MB raw, ~1.2 MB as tar.xz) for gpu-check.sh's
# conformance step, which unpacks them to /tmp.
tar -C /usr/share/libonnx-testdata/data -cf - node | xz -T2 -6 > .device/onnx-node-tests.tar.xz
du -sh .device/onnx-node-tests.tar.xz .device
# The carry limit is 64 MiB for everything (repository included): keep .device well under it.
size_kb=$(du -sk .device | cut -f1)
if [ "$size_kb" -gt $((45 * 1024)) ]; then
  echo "error: .device is ${size_kb} KiB, over the 45 MiB budget" >&2
  exit 1
fi
