#!/usr/bin/env bash
# Checks qdeploy against PyTorch on the project's own architectures (seeded random weights, exported to ONNX):
#  - the reference backend's outputs match PyTorch's (max abs diff <= 1e-4 x the output's range)
#  - inspect's MAC counts match the published figures (YOLOv5s 640: 16.5 GFLOPs = 8.2 GMACs; YOLOv5n: 4.5 GFLOPs)
# Usage: check_torch_models.sh QDEPLOY_BINARY
set -euo pipefail
QD=${1:?usage: check_torch_models.sh QDEPLOY_BINARY}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3

compare() {  # compare DIR OUTPUT_NAME
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import numpy as np
d, name = sys.argv[1], sys.argv[2]
a = np.load(f"{d}/qd/{name}.npy"); b = np.load(f"{d}/torch_{name}.npy")
assert a.shape == b.shape, (a.shape, b.shape)
rng = float(b.max() - b.min()); diff = float(np.abs(a - b).max())
ok = diff <= 1e-4 * max(rng, 1e-6)
print(f"  {name}: shape {list(a.shape)} max abs diff {diff:.3g}, output range {rng:.4g}, ratio {diff / max(rng, 1e-12):.2e} {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PYEOF
}

check() {  # check MODEL IMGSZ [--head-only]
  local d="$T/$1${3:-}"
  "$PY" "$HERE/torch_reference.py" --model "$1" --imgsz "$2" ${3:-} --out "$d" >/dev/null
  local in=images
  case $1 in bn|gn) in=input ;; esac
  "$QD" run "$d/model.onnx" --input "$in=$d/input.npy" --output-dir "$d/qd" >/dev/null
  echo "$1 ${3:-} at $2:"
  for f in "$d"/torch_*.npy; do
    n=$(basename "$f" .npy); compare "$d" "${n#torch_}"
  done
}

check yolov5n 320
check yolov5n 320 --head-only
check yolov5s-v5.0 256
check bn 32
check gn 32

macs() {  # macs MODEL -> GMACs at 640
  "$PY" -m qdeploy.export --model "$1" --out "$T/$1_640.onnx" >/dev/null 2>&1
  "$QD" inspect "$T/$1_640.onnx" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["macs"] / 1e9)'
}
export PYTHONPATH="$HERE/../../python"
s=$(macs yolov5s); n=$(macs yolov5n)
echo "YOLOv5s at 640: $s GMACs; YOLOv5n at 640: $n GMACs"
"$PY" -c "import sys; s, n = $s, $n; sys.exit(0 if 8.1 < s < 8.3 and 4.4 < 2 * n < 4.6 else 1)" \
  || { echo "FAIL: expected YOLOv5s 8.2 GMACs (16.5 GFLOPs) and YOLOv5n 4.5 GFLOPs"; exit 1; }
echo "ok"
