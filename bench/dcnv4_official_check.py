#!/usr/bin/env python3
"""qdeploy's DCNv4 against the official op (OpenGVLab/DCNv4's CUDA extension, built by bench/dcnv4_peer.sh) on the
GPU machine: the same inputs through the official op, the pure-PyTorch op (python/qdeploy/dcnv4.py), qdeploy's CPU
reference and qdeploy's CUDA kernels (`qdeploy run --device cpu|cuda` on a one-node model). fp32 must agree
within 1e-5 of the output range; fp16 (official and qdeploy CUDA) is reported.

  PYTHONPATH=$(bench/dcnv4_peer.sh bench/peers/DCNv4_op) python3 bench/dcnv4_official_check.py \
      --qdeploy build-gpu/qdeploy [--json out/dcnv4_check.json]

Exit 1 when an fp32 comparison misses the tolerance.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from qdeploy.dcnv4 import ATTRS, DOMAIN, dcnv4  # noqa: E402

# The official kernels take 3x3 kernels only (K = 9, or 8 with remove_center).
CASES = [
    ("paper 4x32", dict(group=4, group_channels=32), (2, 14, 14)),
    ("4x16", dict(group=4, group_channels=16), (3, 9, 11)),
    ("8x16 remove_center", dict(group=8, group_channels=16, remove_center=1), (1, 8, 8)),
    ("stride2 pad0 dilation2", dict(group=4, group_channels=16, stride_h=2, stride_w=2, pad_h=0, pad_w=0,
                                    dilation_h=2, dilation_w=2), (2, 13, 12)),
    ("offset_scale 0.5", dict(group=2, group_channels=32, offset_scale=0.5), (1, 10, 10)),
]


def official_spec(n, ho, wo, g, d):
    """A launch configuration of the official forward (DCNv4's dcnv4_forward): d_stride channels per thread, and a
    block of m output pixels of one image. Its kernel takes a block's image index from the first pixel, so m must
    divide ho*wo (a block that spans two images reads the wrong image's value and offsets); n does not matter."""
    del n
    d_stride = 8 if d % 8 == 0 else (4 if d % 4 == 0 else 1)
    m = max(x for x in range(1, 65) if (ho * wo) % x == 0 and x * g * d // d_stride <= 512)
    return d_stride, m * g * d // d_stride


def attrs_of(kw):
    a = dict(kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1, dilation_w=1, group=4,
             group_channels=16, offset_scale=1.0, im2col_step=256, remove_center=0)
    a.update(kw)
    return a


def official(value, offset_mask, a):
    """The official op's forward (its extension's dcnv4_forward, as DCNv4Function calls it)."""
    from DCNv4 import ext
    n, _, _, _ = value.shape
    _, ho, wo, _ = offset_mask.shape
    d_stride, threads = official_spec(n, ho, wo, a["group"], a["group_channels"])
    with torch.no_grad():
        return ext.dcnv4_forward(value, offset_mask, *[a[k] for k in ATTRS], d_stride, threads, False)


def qdeploy_run(binary, device, tmp, a, value, offset_mask):
    # The one-node model written with onnx.helper (as the export in python/qdeploy/dcnv4.py writes it), so that the
    # check does not depend on which exporters the installed torch has.
    import onnx
    from onnx import helper
    v, o = value.cpu(), offset_mask.cpu()
    elem = onnx.TensorProto.FLOAT16 if v.dtype == torch.float16 else onnx.TensorProto.FLOAT
    node = helper.make_node("DCNv4", ["value", "offset_mask"], ["y"], domain=DOMAIN, name="dcn",
                            **{k: (float(a[k]) if k == "offset_scale" else int(a[k])) for k in ATTRS})
    graph = helper.make_graph([node], "dcn", [helper.make_tensor_value_info("value", elem, list(v.shape)),
                                              helper.make_tensor_value_info("offset_mask", elem, list(o.shape))],
                              [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = 8
    model = tmp / "dcn.onnx"
    model.write_bytes(m.SerializeToString())
    np.save(tmp / "v.npy", v.numpy())
    np.save(tmp / "o.npy", o.numpy())
    out = tmp / f"out_{device}"
    r = subprocess.run([binary, "run", str(model), "--device", device, "--input", f"value={tmp / 'v.npy'}",
                        "--input", f"offset_mask={tmp / 'o.npy'}", "--output-dir", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return torch.from_numpy(np.load(out / "y.npy")).float()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qdeploy", default=str(ROOT / "build-gpu" / "qdeploy"))
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, kw, (n, h, w) in CASES:
            a = attrs_of(kw)
            g, dd = a["group"], a["group_channels"]
            k = 9 - a["remove_center"]
            ho = (h + 2 * a["pad_h"] - (a["dilation_h"] * 2 + 1)) // a["stride_h"] + 1
            wo = (w + 2 * a["pad_w"] - (a["dilation_w"] * 2 + 1)) // a["stride_w"] + 1
            p = (3 * g * k + 7) // 8 * 8
            value = torch.randn(n, h, w, g * dd, device="cuda")
            offset_mask = torch.randn(n, ho, wo, p, device="cuda") * 2
            for dtype in (torch.float32, torch.float16):
                v, o = value.to(dtype), offset_mask.to(dtype)
                ref = official(v, o, a).float().cpu()
                scale = max(1.0, ref.abs().max().item())
                got = {"pytorch": dcnv4(v.float(), o.float(), *[a[x] for x in ATTRS]).cpu()}
                if dtype == torch.float32:
                    got["qdeploy cpu"] = qdeploy_run(args.qdeploy, "cpu", tmp, a, v, o)
                got["qdeploy cuda"] = qdeploy_run(args.qdeploy, "cuda", tmp, a, v, o)
                for who, y in got.items():
                    err = (y - ref).abs().max().item() / scale
                    passed = err <= 1e-5 if dtype == torch.float32 else err <= 5e-3
                    ok &= passed or dtype != torch.float32
                    rows.append(dict(case=name, dtype=str(dtype).split(".")[-1], vs_official=who, rel_err=err,
                                     ok=passed))
                    print(f"{name:26s} {rows[-1]['dtype']:8s} {who:13s} max|diff|/range {err:.2e} "
                          f"{'ok' if passed else 'FAIL'}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
