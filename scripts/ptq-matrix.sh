#!/usr/bin/env bash
# The PTQ table of docs/quantization.md ("PTQ without training", results on the shipped detector) on the FMNIST-Det
# val set: each configuration calibrated on the CPU reference (64 train scenes), then evaluated on the CPU reference
# (fake-quant INT8) and as a CUDA INT8 plan. Writes OUTDIR/table.md (mAP50-95, mAP50, difference to the CPU FP32 in
# points, share of conv MACs in INT8), OUTDIR/<config>.<cpu|cuda>.json (eval's output) and the calibration logs.
# Usage: scripts/ptq-matrix.sh QDEPLOY OUTDIR [FMNIST_DIR] [VAL_COUNT] [--no-cuda]
#   VAL_COUNT: the first N val scenes (default 1000, the whole set; fewer to try the script out).
#   --no-cuda: the CPU columns only (a machine without a GPU).
#   CALIB_COUNT (environment): calibration scenes (default 64, as in the docs; fewer to try the script out).
# CPU work runs in parallel (JOBS processes, default nproc/3, three BLAS threads each); the CUDA evaluations run one
# after the other next to it.
set -euo pipefail
set -f  # the layer regexes go through word splitting: no globbing
CUDA=1
ARGS=()
for a in "$@"; do
  if [ "$a" = --no-cuda ]; then CUDA=0; else ARGS+=("$a"); fi
done
QD=${ARGS[0]:?usage: ptq-matrix.sh QDEPLOY OUTDIR [FMNIST_DIR] [VAL_COUNT] [--no-cuda]}
QD=$(realpath "$QD")
OUT=${ARGS[1]:?}
FM=${ARGS[2]:-/usr/share/datasets/fashion-mnist}
COUNT=${ARGS[3]:-1000}
CALIB_COUNT=${CALIB_COUNT:-64}
cd "$(dirname "$0")/.."
M=models/yolov5n_fmnist_det.onnx
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export OPENBLAS_NUM_THREADS=3
JOBS=${JOBS:-$(( $(nproc) / 3 > 0 ? $(nproc) / 3 : 1 ))}

"$QD" dataset fmnist-det --split val --count "$COUNT" --seed 0 --out "$D/val" --fmnist-dir "$FM" --quiet >/dev/null
"$QD" dataset fmnist-det --split train --count "$CALIB_COUNT" --seed 1 --source-limit 30000 --out "$D/calib" --fmnist-dir "$FM" \
  --quiet >/dev/null

# Configurations: name | calibrate flags (empty: FP32; -: the model and cache of the row before) | model | cache |
# layers kept in float (fp32 on the CPU, fp16 on CUDA; calibrate leaves them out of the weight fit).
# HEAD: every conv that reads a tensor the Detect head reads (the head's three convs and the PAN's downsampling
# convs /model.18 and /model.21), so that those tensors stay in float: 7.2% of the conv MACs.
HEAD='/model\.24/.*,/model\.18/conv/Conv,/model\.21/conv/Conv'  # no '|': it separates the fields below
CONFIGS=(
  "fp32|||-|"
  "mse|--algo mse|$M|mse.cache|"
  "auto|--algo auto|$M|auto.cache|"
  "auto_bc_ar|--algo auto --bias-correction --adaround -o $OUT/auto_bc_ar.onnx|$OUT/auto_bc_ar.onnx|auto_bc_ar.cache|"
  "auto_bc_ar_head|--algo auto --bias-correction --adaround --float-layers $HEAD -o $OUT/auto_bc_ar_head.onnx|$OUT/auto_bc_ar_head.onnx|auto_bc_ar_head.cache|$HEAD"
)
LABELS=(
  "FP32"
  "PTQ mse (the default)"
  "PTQ \`--algo auto\`"
  "auto + \`--bias-correction --adaround\`"
  "auto + both, the Detect head's inputs in float (\`/model.24/*\`, \`/model.18\`, \`/model.21\`)"
)

# Runs "$@" in the background, at most JOBS at a time; wait_all fails (naming the log) if any failed.
BG_JOBS=$JOBS
source "$(dirname "$0")/lib/bg-jobs.sh"

EVAL=(--images "$D/val/images" --annotations "$D/val/annotations/instances_val.json" -q)
eval_cmd() {  # eval_cmd DEVICE NAME MODEL CACHE LAYERS -> writes OUT/NAME.DEVICE.json
  local dev=$1 name=$2 model=$3 cache=$4 layers=$5
  local args=("$QD" eval "${model:-$M}" "${EVAL[@]}" --json --device "$dev")
  if [ "$cache" = - ]; then
    [ "$dev" = cpu ] || args+=(--precision fp16)
  else
    args+=(--precision int8 --calib-cache "$OUT/$cache")
    [ "$dev" = cpu ] && args+=(--int8-mode fake)
    if [ -n "$layers" ]; then
      if [ "$dev" = cpu ]; then args+=(--fp32-layers "$layers"); else args+=(--fp16-layers "$layers"); fi
    fi
  fi
  "${args[@]}" > "$OUT/$name.$dev.json"
}
# One job per configuration: its calibration (if any), a marker file for the CUDA queue, its CPU evaluation; the
# FP32 evaluation and the short calibrations' evaluations run while the weight fits still run.
config_job() {  # config_job NAME FLAGS MODEL CACHE LAYERS
  local name=$1 flags=$2 model=$3 cache=$4 layers=$5
  if [ -n "$flags" ]; then
    # shellcheck disable=SC2086 # flags is a list
    "$QD" calibrate "$M" --data "$D/calib/images" --cache "$OUT/$cache" $flags > "$OUT/calibrate_$name.log" 2>&1 ||
      { touch "$D/$name.failed"; return 1; }
  fi
  touch "$D/$name.ready"
  eval_cmd cpu "$name" "$model" "$cache" "$layers"
}
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r name flags model cache layers <<< "$c"
  bg "$OUT/eval_$name.cpu.log" config_job "$name" "$flags" "$model" "$cache" "$layers"
done
if [ $CUDA = 1 ]; then  # one GPU: the CUDA evaluations one after the other, each once its calibration is there
  for c in "${CONFIGS[@]}"; do
    IFS='|' read -r name flags model cache layers <<< "$c"
    while [ ! -e "$D/$name.ready" ]; do
      [ ! -e "$D/$name.failed" ] || { echo "ptq-matrix: calibration failed: $OUT/calibrate_$name.log" >&2; exit 1; }
      sleep 2
    done
    eval_cmd cuda "$name" "$model" "$cache" "$layers" 2> "$OUT/eval_$name.cuda.log" ||
      { echo "ptq-matrix: failed: $OUT/eval_$name.cuda.log" >&2; exit 1; }
  done
fi
wait_all

# The share of conv MACs in INT8 (the same on both devices: the plan's precisions come from the same rules).
macs() {  # macs CACHE LAYERS
  [ "$1" = - ] && { echo 0; return; }
  local args=("$QD" inspect "$M" --precision int8 --calib-cache "$OUT/$1" --json)
  [ -z "$2" ] || args+=(--fp32-layers "$2")
  "${args[@]}" | python3 -c "import json, sys; i = json.load(sys.stdin)['int8']; print(i['int8_macs'] / i['total_macs'])"
}
{
  echo "FMNIST-Det val, $COUNT scenes; calibration on $CALIB_COUNT train scenes; CPU: reference backend, fake-quant INT8;"
  [ $CUDA = 0 ] || echo "CUDA: INT8 plans (float layers and the FP32 row in fp16);"
  echo "vs FP32: difference to the CPU FP32 in mAP50-95 points."
  echo
  if [ $CUDA = 1 ]; then
    echo "| configuration | CPU mAP50-95 | CPU mAP50 | CPU vs FP32 | CUDA mAP50-95 | CUDA mAP50 | CUDA vs FP32 | conv MACs in INT8 |"
    echo "|---|---|---|---|---|---|---|---|"
  else
    echo "| configuration | CPU mAP50-95 | CPU mAP50 | CPU vs FP32 | conv MACs in INT8 |"
    echo "|---|---|---|---|---|"
  fi
  for i in "${!CONFIGS[@]}"; do
    IFS='|' read -r name flags model cache layers <<< "${CONFIGS[$i]}"
    share=$(macs "$cache" "$layers")
    python3 - "$OUT" "$name" "${LABELS[$i]}" "$share" $CUDA <<'EOF'
import json, sys
out, name, label, share, cuda = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5] == "1"
ref = json.load(open(f"{out}/fp32.cpu.json"))["stats"]["AP"]
row = [label]
for dev in ["cpu", "cuda"] if cuda else ["cpu"]:
    s = json.load(open(f"{out}/{name}.{dev}.json"))["stats"]
    delta = "" if name == "fp32" and dev == "cpu" else "%+.2f" % (100 * (s["AP"] - ref))
    row += ["%.4f" % s["AP"], "%.4f" % s["AP50"], delta]
row.append("%.1f%%" % (100 * share))
print("| " + " | ".join(row) + " |")
EOF
  done
} > "$OUT/table.md"
cat "$OUT/table.md"
