#!/usr/bin/env bash
# Real third-party models (PP-OCRv4 det at 640x640 and 480x800, PP-OCR cls at 48x192) against ONNX Runtime: the
# reference backend's outputs must be within 1e-4 of each output's range (max abs difference). The detector's
# probability map saturates at 0 and 1, so its pre-sigmoid logits (p2o.Add.281) are compared too.
# The models and references come from scripts/models/{fetch-ocr-models,reference-outputs}.sh; exits 77 (skipped)
# when they are not there.
# Usage: check_ocr_refs.sh QDEPLOY [CACHE_DIR]
set -euo pipefail
QD=${1:?usage: check_ocr_refs.sh QDEPLOY [CACHE_DIR]}
C=${2:-${QD_CACHE:-$HOME/.cache/qdeploy}/models}
if [ ! -d "$C/refs/det_640" ] || [ ! -f "$C/ppocrv4_det.onnx" ]; then
  echo "skipped: no PP-OCR models/references in $C (run scripts/models/reference-outputs.sh)"
  exit 77
fi
PY=${QD_PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
for case in det_640 det_480x800 det_320_noise cls cls_b4; do
  R="$C/refs/$case"
  [ -d "$R" ] || continue
  model=$("$PY" -c "import json; print(json.load(open('$R/meta.json'))['model'])")
  extra=()
  [ -f "$R/output_p2o.Add.281.npy" ] && extra=(--extra-output p2o.Add.281)
  # QD_RUN_FLAGS (e.g. "--device cuda") runs the models through an engine; --extra-output needs the reference.
  if [ -n "${QD_RUN_FLAGS:-}" ]; then extra=($QD_RUN_FLAGS); fi
  "$QD" run "$C/$(basename "$model")" --input "x=$R/input_x.npy" "${extra[@]}" --output-dir "$T/$case" >/dev/null
  "$PY" - "$R" "$T/$case" "$case" <<'PYEOF' || fail=1
import glob, os, sys
import numpy as np
ref_dir, out_dir, case = sys.argv[1:]
ok = True
for ref in sorted(glob.glob(f"{ref_dir}/output_*.npy")):
    name = os.path.basename(ref)[len("output_"):]
    if os.environ.get("QD_RUN_FLAGS") and not os.path.exists(f"{out_dir}/{name}"):
        continue  # an intermediate tensor only the reference backend can output
    want, got = np.load(ref), np.load(f"{out_dir}/{name}")
    rng = float(want.max() - want.min())
    diff = float(np.abs(got.astype(np.float64) - want).max()) if got.shape == want.shape else float("inf")
    good = diff <= 1e-4 * max(rng, 1e-6)
    ok &= good
    print(f"{case:14s} {name[:-4]:18s} {str(list(want.shape)):18s} max abs diff {diff:.3g}  range {rng:.4g}  "
          f"ratio {diff / max(rng, 1e-12):.2e}  {'ok' if good else 'FAIL'}")
sys.exit(0 if ok else 1)
PYEOF
done
exit $fail
