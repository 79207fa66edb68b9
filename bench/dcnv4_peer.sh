#!/usr/bin/env bash
# Builds the official DCNv4 op (OpenGVLab/DCNv4, DCNv4_op/) in place, as the peer of bench/dcnv4_bench.py and
# bench/dcnv4_official_check.py. Its source is never committed here: copy it into bench/peers/ (ignored by git) on a
# machine that has it, e.g. from a git mirror:
#   mkdir -p bench/peers && git --git-dir=MIRROR archive HEAD DCNv4_op | tar -x -C bench/peers
# then on the GPU machine (torch with CUDA, nvcc):
#   bench/dcnv4_peer.sh bench/peers/DCNv4_op        # prints the directory to put on PYTHONPATH
# The copy is patched for current PyTorch (no THC headers, Tensor::type() gone); the kernels are untouched.
set -euo pipefail
src=${1:?usage: bench/dcnv4_peer.sh DCNv4_op-directory}
cd "$src"
sed -i 's|#include <THC/THCAtomics.cuh>|#include <ATen/cuda/Atomic.cuh>|' src/cuda/*.cuh src/cuda/*.h 2>/dev/null || true
sed -i 's/\.type()\.is_cuda()/.is_cuda()/g' src/cuda/*.cu src/*.h 2>/dev/null || true
arch=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"{m}.{n}")')
TORCH_CUDA_ARCH_LIST="$arch" MAX_JOBS=${MAX_JOBS:-$(nproc)} python3 setup.py build_ext --inplace >build_ext.log 2>&1 || {
  tail -40 build_ext.log
  exit 1
}
python3 -c "import sys; sys.path.insert(0, '.'); from DCNv4 import ext; print('DCNv4 peer built:', ext.__file__)" >&2
pwd
