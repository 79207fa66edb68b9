#!/usr/bin/env bash
# The main job on the built-in default: the shipped YOLOv5n detector trained on FMNIST-Det, quantized to INT8 with
# its shipped calibration cache, detecting objects in the shipped sample scenes. Prints the model summary, the
# detections and timings, and writes annotated images to out/demo/.
# With an NVIDIA GPU (nvidia-smi finds one) and a qdeploy built with CUDA, it builds an INT8 plan for the GPU and
# runs it with the pre- and post-processing on the GPU too; otherwise the CPU reference backend in exact INT8
# arithmetic. It prints which one it used.
# It builds only the CLI (not the tests), and without a GPU no CUDA code at all: machine code for a GPU this machine
# does not have would be most of the build's time and could not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
if has_gpu; then
  cuda=(-DQD_CUDA=AUTO)
  echo "=== building build/qdeploy with the CUDA backend (GPU: $(nvidia-smi -L | head -n 1)) ==="
else
  cuda=(-DQD_CUDA=OFF)
  echo "=== building build/qdeploy for the CPU (no NVIDIA GPU found by nvidia-smi, so no CUDA code) ==="
fi
echo "(the first build compiles about 150 files: about 10 CPU-minutes, 5 on two idle cores; later runs reuse it)"
# ninja prints one line per file, or one updating line on a terminal: done/total, percent, elapsed seconds.
export NINJA_STATUS=${NINJA_STATUS:-"[%f/%t %p %es] "}
BUILD_DIR=build TARGETS=qdeploy scripts/build.sh "${cuda[@]}"
QD=build/qdeploy
MODEL=models/yolov5n_fmnist_det.onnx

echo
echo "=== model ==="
$QD inspect "$MODEL"
echo
if has_gpu && [[ "$($QD --version)" == *"CUDA backend"* ]]; then
  echo "=== build: INT8 plan for the GPU ($(nvidia-smi -L | head -n 1)) ==="
  mkdir -p out/demo
  $QD build "$MODEL" -o out/demo/yolov5n_fmnist_det_int8.plan --device cuda --precision int8 \
    --calib-cache models/yolov5n_fmnist_det.cache
  echo "=== detect: INT8 plan on the GPU: CUDA engine, GPU letterbox and NMS ==="
  $QD detect out/demo/yolov5n_fmnist_det_int8.plan models/samples --out out/demo
else
  why="no NVIDIA GPU found by nvidia-smi"
  has_gpu && why="this qdeploy was built without CUDA (is nvcc installed? /usr/local/cuda/bin/nvcc)"
  echo "=== detect: INT8 (exact integer arithmetic, entropy-calibrated scales) on the CPU ($why) ==="
  $QD detect "$MODEL" models/samples --out out/demo --precision int8 --calib-cache models/yolov5n_fmnist_det.cache
fi
echo
echo "annotated images: $(ls out/demo/*.jpg | tr '\n' ' ')"
