#!/usr/bin/env bash
# A/B of programmatic dependent launch on YOLOv5s (after the bench step exported it): GPU latency with and without
# QD_NO_PDL, fp16 and int8, batch 1 and 32. Run on the GPU machine.
B=build-gpu
M=/tmp/qdeploy-bench/yolov5s.onnx
for prec in fp16 int8; do
  extra=()
  [ "$prec" = int8 ] && extra=(--calib-cache /tmp/qdeploy-bench/yolov5s.cache)
  for mode in pdl nopdl; do
    if [ $mode = nopdl ]; then export QD_NO_PDL=1; else unset QD_NO_PDL; fi
    echo "--- $prec $mode"
    "$B/qdeploy" bench "$M" --device cuda --precision $prec --batch 1,32 --cuda-graph --iterations 200 "${extra[@]}" 2>&1 \
      | grep -E "GPU compute|throughput"
  done
done
unset QD_NO_PDL
