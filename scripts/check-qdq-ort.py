#!/usr/bin/env python3
"""ONNX Runtime against qdeploy's INT8 reference on a Q/DQ model from `qdeploy export --target trt11`.

Usage: scripts/check-qdq-ort.py MODEL_QDQ.onnx NAME=IN.npy REF.npy [TOL]

The Python twin of scripts/check-qdq-ort.js compare (same report, same exit codes: 0 within TOL, default 0.05 of the
reference's range; 1 over it; 2 bad input). Needs onnxruntime and numpy. REF.npy comes from
`qdeploy run MODEL --precision int8 --calib-cache C --input NAME=IN.npy --output-dir DIR`.
"""
import sys

import numpy as np
import onnxruntime as ort


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    model, feed, ref_path = argv[:3]
    tol = float(argv[3]) if len(argv) > 3 else 0.05
    name, in_path = feed.split("=", 1)
    x = np.load(in_path).astype(np.float32)
    ref = np.load(ref_path).astype(np.float32)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    y = sess.run(None, {name: x})[0].astype(np.float32)
    if y.size != ref.size:
        print(f"error: output has {y.size} values, the reference {ref.size}", file=sys.stderr)
        return 2
    rng = max(float(ref.max() - ref.min()), 1e-12)
    d = np.abs(y.reshape(-1) - ref.reshape(-1))
    over = int((d > 0.01 * rng).sum())
    rel = float(d.max()) / rng
    print(f"onnxruntime {ort.__version__}: {y.size} values, reference range {rng:.6g}, max |diff| {d.max():.6g} "
          f"({100 * rel:.4f}% of the range), {over} ({100 * over / y.size:.4f}%) off by more than 1% of the range; "
          f"tolerance {100 * tol}%")
    return 0 if rel <= tol else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
