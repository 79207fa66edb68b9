#!/usr/bin/env bash
# YOLOv5s at 640 through `qdeploy bench` in ROUNDS rounds with the carried build-gpu/qdeploy (round 0 fills its own
# timing cache; the last exports a per-layer profile to OUTDIR/profile.json), run on the GPU machine. For an A/B of
# two builds whose binaries do not fit one carry together (64 MiB with the repository; scripts/switch-ab.sh needs
# both): two device calls back to back on the warm machine, one build each (docs/gpu-machine.md).
# Usage: scripts/bench-rounds.sh OUTDIR [ROUNDS] [BATCHES] [PRECISION]
# QD_AB_FLAGS adds `qdeploy bench` flags (default: PyTorch's bindings, --input-format fp16:nhwc --output-format fp16).
set -uo pipefail
OUT=${1:?usage: scripts/bench-rounds.sh OUTDIR [ROUNDS] [BATCHES] [PRECISION]}
ROUNDS=${2:-4}
BATCHES=${3:-1,32}
PREC=${4:-int8}
B=build-gpu
M=/tmp/qdeploy-bench/yolov5s.onnx
CACHE=/tmp/qdeploy-bench/yolov5s.cache
mkdir -p "$OUT"
if [ ! -f "$M" ]; then
  PYTHONPATH=python timeout 120 python3 bench/yolov5s_vs_pytorch.py --qdeploy "$B/qdeploy" --out /tmp/qdeploy-bench-export \
    --no-compile --precisions fp16 --batches 1 > /dev/null 2>&1 || { echo "bench-rounds: exporting $M failed"; exit 1; }
fi
extra=()
if [ "$PREC" = int8 ]; then
  if [ ! -f "$CACHE" ]; then
    calib=/tmp/qd-data/calib/images
    [ -d .device/calib/images ] && calib=.device/calib/images  # carried by gpu-pack.sh for the bench step
    "$B/qdeploy" calibrate "$M" --data "$calib" --algo minmax --cache "$CACHE" > /dev/null || exit 1
  fi
  extra=(--calib-cache "$CACHE")
fi
tc=/tmp/qdeploy-bench/timing-$(md5sum < "$B/qdeploy" | cut -c1-12).cache  # this binary's own kernel choices
for r in $(seq 0 $((ROUNDS - 1))); do
  prof=()
  [ "$r" = $((ROUNDS - 1)) ] && prof=(--export-profile "$OUT/profile.json")
  echo "--- round $r"
  "$B/qdeploy" bench "$M" --device cuda --precision "$PREC" --batch "$BATCHES" --cuda-graph --iterations 200 \
    --timing-cache "$tc" "${extra[@]}" "${prof[@]}" ${QD_AB_FLAGS:---input-format fp16:nhwc --output-format fp16} 2>&1 |
    grep -E "^batch|GPU compute"
done
