#!/usr/bin/env bash
# Packs what a GPU-machine call needs into .device/ (git-ignored; name it in the device tool's `carry`):
# the portable binaries from build-gpu/ (stripped, one xz-compressed tar: the carry limit is 64 MiB), the Fashion-MNIST
# files the dataset generator reads, and the ONNX node tests (the conformance step). On the GPU machine,
# scripts/gpu-check.sh unpacks them into build-gpu/.
# Usage: scripts/gpu-pack.sh [STEP...] (gpu-check.sh's steps; default all): the conformance runner and the node
# tests go only with `conformance`, the Fashion-MNIST files only with steps that generate data, so that the carry
# (repository included) stays under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=" ${*:-env tests sanitizer conformance bench pipeline precision qat} "
wants() {  # wants STEP...: is one of them among the steps?
  for s in "$@"; do [[ $STEPS == *" $s "* ]] && return 0; done
  return 1
}
rm -rf .device && mkdir -p .device/bin
# The binaries, stripped, in one xz-compressed tar: they share most of their code, which a single stream stores once
# if xz's window spans them (each is ~55 MB stripped: a 192 MiB window, not -9's 64 MiB, which with an A/B binary
# made 44 MB instead of 32).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
strip -o "$stage/qdeploy" build-gpu/qdeploy
wants conformance && strip -o "$stage/qdeploy_conformance" build-gpu/tests/conformance/qdeploy_conformance
wants soak && strip -o "$stage/qdeploy_soak" build-gpu/tests/qdeploy_soak
# Only the GPU tests (the CPU tests run in CI), and only for the steps that run them.
if wants tests sanitizer; then
  for t in build-gpu/tests/test_cuda; do
    [ -x "$t" ] && [ -f "$t" ] && strip -o "$stage/$(basename "$t")" "$t"
  done
fi
# QD_PACK_EXTRA: other qdeploy binaries for an A/B (scripts/switch-ab.sh), e.g. the build before a change; each goes
# as qdeploy-NAME beside qdeploy (nearly identical, so the tar grows by little), unpacked into build-gpu/.
for f in ${QD_PACK_EXTRA:-}; do strip -o "$stage/qdeploy-$(basename "$f")" "$f"; done
tar -C "$stage" -cf - $(cd "$stage" && ls) | xz -T1 --lzma2=preset=9,dict=192MiB > .device/bin/binaries.tar.xz
# The first 20,000 Fashion-MNIST train images (`--source-limit 20000` makes the same scenes from the full files), so
# that a training call's carry (repo + data + binaries) stays under 64 MiB; QD_QAT_SOURCE_LIMIT=N carries the first N
# instead (give gpu-check.sh the same value: its scenes then come from those).
# The bench step's INT8 calibration needs only 8 train scenes: made here (a few hundred KB) rather than carrying the
# Fashion-MNIST files, so that a bench call fits beside the test binaries.
if wants bench; then
  build-gpu/qdeploy dataset fmnist-det --split train --count 8 --seed 1 --source-limit 30000 --out .device/calib --quiet \
    > /dev/null
fi
# The val scenes come from t10k (and the fmnist step's test split); only the qat step makes train scenes (from the
# first 30,000 train images).
if wants pipeline precision qat fmnist; then
  mkdir -p .device/fashion-mnist
  cp /usr/share/datasets/fashion-mnist/t10k-*.gz .device/fashion-mnist/
fi
if wants qat; then
/usr/bin/python3 - <<'PYEOF'
import gzip, os, struct
src, dst = "/usr/share/datasets/fashion-mnist", ".device/fashion-mnist"
keep = int(os.environ.get("QD_QAT_SOURCE_LIMIT", 20000))
for name, item in (("train-images-idx3-ubyte", 28 * 28), ("train-labels-idx1-ubyte", 1)):
    data = gzip.open(f"{src}/{name}.gz").read()
    ndim = data[3]
    header = bytearray(data[: 4 + 4 * ndim])
    header[4:8] = struct.pack(">I", keep)
    body = data[4 + 4 * ndim : 4 + 4 * ndim + keep * item]
    with gzip.GzipFile(f"{dst}/{name}.gz", "wb", mtime=0) as f:
        f.write(bytes(header) + body)
PYEOF
fi
# The ONNX backend node tests (Debian's libonnx-testdata: ~27 MB raw, ~1.2 MB as tar.xz) for gpu-check.sh's
# conformance step, which unpacks them to /tmp.
if wants conformance; then
  tar -C /usr/share/libonnx-testdata/data -cf - node | xz -T2 -6 > .device/onnx-node-tests.tar.xz
fi
du -sh .device
# The carry limit is 64 MiB for everything that travels: the repository's tracked and untracked (not ignored) files
# and .device, in bytes (apparent sizes, not disk blocks); keep half a MiB spare.
size_kb=$(du -sk --apparent-size .device | cut -f1)
repo_kb=$(git ls-files -z --cached --others --exclude-standard | du -ck --apparent-size --files0-from=- 2>/dev/null | tail -1 | cut -f1)
if [ $((size_kb + repo_kb)) -gt $((63 * 1024 + 512)) ]; then
  echo "error: .device (${size_kb} KiB) + the repository (${repo_kb} KiB) is over the 63.5 MiB budget; pack fewer" \
       "steps (scripts/gpu-pack.sh STEP...) or binaries (two builds: scripts/bench-rounds.sh, one per call)" >&2
  exit 1
fi
