"""Exports a seeded random-weight PyTorch model to ONNX and writes a seeded input and PyTorch's output as .npy, so
the C++ reference backend can be checked against PyTorch on the exact architectures the project ships.

    /usr/bin/python3 tests/models/torch_reference.py --model yolov5n --imgsz 320 --out DIR [--head-only]
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from qdeploy.models import build_model, is_classifier  # noqa: E402
from qdeploy.onnx_export import export_classifier, export_detector, prepare_for_export  # noqa: E402


def randomize_bn(model, gen):
    """Fresh BatchNorms fold to identity; give them random statistics so the check covers real-looking weights."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--imgsz", type=int, default=320)
    ap.add_argument("--nc", type=int, default=80)
    ap.add_argument("--head-only", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = build_model(a.model, a.nc)
    randomize_bn(model, gen)
    model = prepare_for_export(model)
    if is_classifier(a.model):
        x = torch.rand(1, 3, 32, 32, generator=gen)
        export_classifier(model, out / "model.onnx", prepared=True)
        with torch.no_grad():
            ys = {"output": model(x)}
    else:
        x = torch.rand(1, 3, a.imgsz, a.imgsz, generator=gen)
        export_detector(model, out / "model.onnx", imgsz=a.imgsz, head_only=a.head_only, prepared=True)
        model.detect.head_only = a.head_only
        with torch.no_grad():
            y = model(x)
        names = ("s8", "s16", "s32") if a.head_only else ("output0",)
        ys = dict(zip(names, y if isinstance(y, (list, tuple)) else [y]))
    np.save(out / "input.npy", x.numpy())
    for name, t in ys.items():
        np.save(out / f"torch_{name}.npy", t.numpy())
    print("wrote", out)


if __name__ == "__main__":
    main()
