#!/usr/bin/env bash
# The quantization results table for the shipped detector: FP32; INT8 PTQ with minmax, entropy, percentile, mse
# calibration; PTQ entropy with the Detect head kept in float (partial quantization); INT8 from the QAT model's own
# Q/DQ scales; the QAT model through `qdeploy qat2ptq` (its float model with its model.cache, as TensorRT runs it, and
# with its model.json, the QAT weight scales). mAP on the fixed FMNIST-Det val set (1,000 scenes, seed 0), all on the
# CPU reference backend.
# Usage: scripts/eval-matrix.sh QDEPLOY OUTDIR [FMNIST_DIR] [INT8_MODE] [VAL_COUNT]
#   INT8_MODE: exact (default) or fake; fake-quant agrees with exact within 1 LSB and runs several times faster.
#   VAL_COUNT: evaluate on the first N val scenes only (default 1000, the whole set; fewer to try the script out).
# Runs the evaluations in parallel, two BLAS threads each; writes OUTDIR/<config>.json, OUTDIR/qat2ptq/ (qat2ptq's
# output) and OUTDIR/table.md.
set -euo pipefail
QD=${1:?usage: eval-matrix.sh QDEPLOY OUTDIR [FMNIST_DIR] [INT8_MODE] [VAL_COUNT]}
OUT=${2:?}
FM=${3:-/usr/share/datasets/fashion-mnist}
MODE=${4:-exact}
COUNT=${5:-1000}
M=models/yolov5n_fmnist_det.onnx
QAT=models/yolov5n_fmnist_det_qat.onnx
mkdir -p "$OUT"
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
$QD dataset fmnist-det --split val --count "$COUNT" --seed 0 --out "$D/val" --fmnist-dir "$FM" --quiet >/dev/null
$QD dataset fmnist-det --split train --count 64 --seed 1 --source-limit 30000 --out "$D/calib" --fmnist-dir "$FM" \
  --quiet >/dev/null
export OPENBLAS_NUM_THREADS=2
# Background jobs, each with the file it writes; wait_all fails (naming them) if any of them failed.
source "$(dirname "$0")/lib/bg-jobs.sh"
for algo in minmax entropy percentile mse; do
  bg "$OUT/calibrate_$algo.log" $QD calibrate $M --data "$D/calib/images" --algo $algo --cache "$OUT/$algo.cache"
done
wait_all
# The QAT model as a float model plus INT8 scales (docs/quantization.md, "qat2ptq").
$QD qat2ptq $QAT -o "$OUT/qat2ptq" > "$OUT/qat2ptq.log" 2>&1
EVAL=(--images "$D/val/images" --annotations "$D/val/annotations/instances_val.json" --json -q)
INT8=(--precision int8 --int8-mode "$MODE")
bg "$OUT/fp32.json" $QD eval $M "${EVAL[@]}"
for algo in minmax entropy percentile mse; do
  bg "$OUT/ptq_$algo.json" $QD eval $M "${EVAL[@]}" "${INT8[@]}" --calib-cache "$OUT/$algo.cache"
done
# Partial quantization as in the seeds: the three output convs of the Detect head stay in float.
bg "$OUT/ptq_entropy_head_fp32.json" \
  $QD eval $M "${EVAL[@]}" "${INT8[@]}" --calib-cache "$OUT/entropy.cache" --fp32-layers '/model.24/.*'
bg "$OUT/qat.json" $QD eval $QAT "${EVAL[@]}" "${INT8[@]}"
# qat2ptq's model with its cache (weight scales re-derived from max|w|, as TensorRT does), and with its precision JSON
# (the QAT weight scales: what the QAT model computes).
bg "$OUT/qat2ptq_cache.json" \
  $QD eval "$OUT/qat2ptq/model.onnx" "${EVAL[@]}" "${INT8[@]}" --calib-cache "$OUT/qat2ptq/model.cache"
bg "$OUT/qat2ptq_json.json" \
  $QD eval "$OUT/qat2ptq/model.onnx" "${EVAL[@]}" "${INT8[@]}" --precision-config "$OUT/qat2ptq/model.json"
wait_all
{
  echo "| configuration | mAP50-95 | mAP50 |"
  echo "|---|---|---|"
  for c in fp32 ptq_minmax ptq_entropy ptq_percentile ptq_mse ptq_entropy_head_fp32 qat qat2ptq_cache qat2ptq_json; do
    python3 -c "import json; s = json.load(open('$OUT/$c.json'))['stats']; print('| $c | %.3f | %.3f |' % (s['AP'], s['AP50']))"
  done
} > "$OUT/table.md"
cat "$OUT/table.md"
