#!/usr/bin/env bash
# The main job on the built-in default: the shipped YOLOv5n detector trained on FMNIST-Det, quantized to INT8 with
# its shipped calibration cache, detecting objects in the shipped sample scenes. Prints the model summary, the
# detections and timings, and writes annotated images to out/demo/.
# The CUDA engine is not built yet, so this runs the CPU reference backend in exact INT8 arithmetic.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=build scripts/build.sh >/dev/null
QD=build/qdeploy
MODEL=models/yolov5n_fmnist_det.onnx

echo "=== model ==="
$QD inspect "$MODEL"
echo
echo "=== detect: INT8 (exact integer arithmetic, entropy-calibrated scales) on the CPU ==="
$QD detect "$MODEL" models/samples --out out/demo --precision int8 --calib-cache models/yolov5n_fmnist_det.cache
echo
echo "annotated images: $(ls out/demo/*.jpg | tr '\n' ' ')"
