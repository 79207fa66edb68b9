#!/usr/bin/env bash
# A/B of an environment switch (e.g. QD_NO_PDL, QD_NO_WGMMA) or of another qdeploy binary on YOLOv5s at 640, run on
# the GPU machine after bench/yolov5s_vs_pytorch.py exported the model (the bench step, or `--no-compile --precisions
# fp16 --batches 1`): GPU latency with the switch off and on (on: VAR=1, or, where VAR names an executable file, that
# binary instead of build-gpu/qdeploy), fp16 and int8, at the given batches, alternating for ROUNDS rounds. Each side
# keeps its own timing cache (its own kernel choices); round 0 fills them, and its times are printed too.
# Usage: scripts/switch-ab.sh VAR|BINARY OUTDIR [ROUNDS] [BATCHES]   (per-layer profiles of the last round: OUTDIR)
# Two builds whose binaries do not fit one carry (every kernel changed, so that xz shares little between them): run
# scripts/bench-rounds.sh in two calls back to back instead, one build each.
# QD_AB_PRECISIONS narrows the precisions (default "fp16 int8"); QD_AB_FLAGS adds `qdeploy bench` flags to both
# sides (e.g. "--input-format fp16:nhwc --output-format fp16", the bindings PyTorch's FP16 model has).
set -uo pipefail
VAR=${1:?usage: scripts/switch-ab.sh VAR|BINARY OUTDIR [ROUNDS] [BATCHES]}
OUT=${2:?usage: scripts/switch-ab.sh VAR|BINARY OUTDIR [ROUNDS] [BATCHES]}
ROUNDS=${3:-3}
BATCHES=${4:-1,8,32}
B=build-gpu
M=/tmp/qdeploy-bench/yolov5s.onnx
CACHE=/tmp/qdeploy-bench/yolov5s.cache
mkdir -p "$OUT"
TAG=$VAR
[ -x "$VAR" ] && [ -f "$VAR" ] && TAG=$(basename "$VAR")
if [ ! -f "$CACHE" ]; then
  calib=/tmp/qd-data/calib/images
  [ -d .device/calib/images ] && calib=.device/calib/images  # carried by gpu-pack.sh for the bench step
  "$B/qdeploy" calibrate "$M" --data "$calib" --algo minmax --cache "$CACHE" > /dev/null || exit 1
fi
for r in $(seq 0 $((ROUNDS - 1))); do
  for prec in ${QD_AB_PRECISIONS:-fp16 int8}; do
    extra=()
    [ "$prec" = int8 ] && extra=(--calib-cache "$CACHE")
    for side in off on; do
      bin=$B/qdeploy
      if [ "$TAG" != "$VAR" ]; then
        [ $side = on ] && bin=$VAR
      elif [ $side = on ]; then export "$VAR=1"; else unset "$VAR"; fi
      prof=()
      [ "$r" = $((ROUNDS - 1)) ] && prof=(--export-profile "$OUT/profile-$prec-$TAG-$side.json")
      echo "--- round $r $prec $TAG=$side"
      "$bin" bench "$M" --device cuda --precision "$prec" --batch "$BATCHES" --cuda-graph --iterations 200 \
        --timing-cache "/tmp/qdeploy-bench/timing-$TAG-$side.cache" "${extra[@]}" "${prof[@]}" ${QD_AB_FLAGS:-} 2>&1 |
        grep -E "^batch|GPU compute|throughput"
    done
  done
done
[ "$TAG" = "$VAR" ] && unset "$VAR"
