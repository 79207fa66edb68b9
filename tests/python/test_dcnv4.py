"""DCNv4: the pure-PyTorch op (python/qdeploy/dcnv4.py) against hand-computed values, and qdeploy's reference
(`qdeploy run`, the built-in plugin) against the PyTorch op on models exported with the custom-domain node."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from qdeploy.dcnv4 import ATTRS, DOMAIN, OP_TYPE, DCNv4Function, dcnv4

ROOT = Path(__file__).resolve().parents[2]
QDEPLOY = Path(os.environ.get("QDEPLOY_BIN", ROOT / "build" / "qdeploy"))
needs_cli = pytest.mark.skipif(not QDEPLOY.exists(), reason=f"{QDEPLOY} not built (scripts/build.sh)")


def one_point(n, ho, wo, g, k, point, dx, dy, m, pad_to=8):
    p = (3 * g * k + pad_to - 1) // pad_to * pad_to
    om = torch.zeros(n, ho, wo, p)
    om[..., 2 * point] = dx
    om[..., 2 * point + 1] = dy
    om[..., 2 * k + point] = m
    return om


def test_point_order_and_bilinear_by_hand():
    v = torch.arange(4 * 5, dtype=torch.float32).reshape(1, 4, 5, 1) * 10
    # Point 1 is (kernel-x 0, kernel-y 1): one pixel to the left.
    y = dcnv4(v, one_point(1, 4, 5, 1, 9, 1, 0.0, 0.0, 1.0), group=1, group_channels=1)
    assert y[0, 2, 3, 0] == v[0, 2, 2, 0]
    assert y[0, 2, 0, 0] == 0  # outside: zero padding
    # Centre point moved by (0.5, 0.25), mask 3 (raw, no softmax).
    y = dcnv4(v, one_point(1, 4, 5, 1, 9, 4, 0.5, 0.25, 3.0), group=1, group_channels=1)
    want = 3 * (0.75 * (0.5 * v[0, 1, 1, 0] + 0.5 * v[0, 1, 2, 0]) + 0.25 * (0.5 * v[0, 2, 1, 0] + 0.5 * v[0, 2, 2, 0]))
    assert torch.isclose(y[0, 1, 1, 0], want)
    # remove_center: K = 8 and point 4 is the one below the centre.
    y = dcnv4(v, one_point(1, 4, 5, 1, 8, 4, 0.0, 0.0, 1.0), group=1, group_channels=1, remove_center=1)
    assert y[0, 1, 1, 0] == v[0, 2, 1, 0]


def export(tmp_path, attrs, value, offset_mask):
    class M(torch.nn.Module):
        def forward(self, value, offset_mask):
            return DCNv4Function.apply(value, offset_mask, *[attrs[a] for a in ATTRS])

    path = tmp_path / "dcn.onnx"
    torch.onnx.export(M(), (value, offset_mask), str(path), input_names=["value", "offset_mask"], output_names=["y"],
                      opset_version=17, custom_opsets={DOMAIN: 1})
    return path


def run_cli(tmp_path, model, feeds, extra=()):
    cmd = [str(QDEPLOY), "run", str(model), "--output-dir", str(tmp_path / "out"), *extra]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        cmd += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    return subprocess.run(cmd, capture_output=True, text=True)


def attrs_of(**kw):
    a = dict(kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1, dilation_w=1, group=4,
             group_channels=16, offset_scale=1.0, im2col_step=256, remove_center=0)
    a.update(kw)
    return a


CASES = [
    ("paper_like", attrs_of(), (2, 9, 10)),
    ("stride2_dilation2_pad2_scale0.5",
     attrs_of(stride_h=2, stride_w=2, dilation_h=2, dilation_w=2, pad_h=2, pad_w=2, offset_scale=0.5, group=2,
              group_channels=8), (1, 11, 12)),
    ("remove_center_5x3", attrs_of(kernel_h=5, pad_h=2, remove_center=1, group=8, group_channels=4), (1, 7, 6)),
    ("1x1_no_pad", attrs_of(kernel_h=1, kernel_w=1, pad_h=0, pad_w=0, group=1, group_channels=8), (3, 4, 4)),
]


@needs_cli
@pytest.mark.parametrize("name,attrs,nhw", CASES, ids=[c[0] for c in CASES])
def test_reference_matches_pytorch(tmp_path, name, attrs, nhw):
    torch.manual_seed(0)
    n, h, w = nhw
    g, d = attrs["group"], attrs["group_channels"]
    k = attrs["kernel_h"] * attrs["kernel_w"] - attrs["remove_center"]
    ho = (h + 2 * attrs["pad_h"] - (attrs["dilation_h"] * (attrs["kernel_h"] - 1) + 1)) // attrs["stride_h"] + 1
    wo = (w + 2 * attrs["pad_w"] - (attrs["dilation_w"] * (attrs["kernel_w"] - 1) + 1)) // attrs["stride_w"] + 1
    p = (3 * g * k + 7) // 8 * 8
    value = torch.randn(n, h, w, g * d)
    offset_mask = torch.randn(n, ho, wo, p) * 2  # offsets of a few pixels: points leave the image too
    model = export(tmp_path, attrs, value, offset_mask)
    want = dcnv4(value, offset_mask, *[attrs[a] for a in ATTRS]).numpy()
    r = run_cli(tmp_path, model, {"value": value.numpy(), "offset_mask": offset_mask.numpy()})
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "y.npy")
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    err = np.abs(got - want).max() / scale
    print(f"{name}: max|qdeploy - pytorch| / range = {err:.2e}")
    assert err <= 1e-5, err


@needs_cli
def test_fp16_inputs_run_in_fp32_arithmetic(tmp_path):
    torch.manual_seed(1)
    attrs = attrs_of()
    value = torch.randn(1, 6, 6, 64).half()
    offset_mask = (torch.randn(1, 6, 6, 112) * 2).half()
    model = export(tmp_path, attrs, value.float(), offset_mask.float())
    import onnx
    m = onnx.load(str(model))
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    onnx.save(m, str(model))
    want = dcnv4(value, offset_mask, *[attrs[a] for a in ATTRS]).float().numpy()
    r = run_cli(tmp_path, model, {"value": value.numpy(), "offset_mask": offset_mask.numpy()})
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "y.npy")
    assert got.dtype == np.float16
    assert np.abs(got.astype(np.float32) - want).max() <= 2e-3 * max(1.0, float(np.abs(want).max()))


@needs_cli
def test_export_writes_the_documented_node_and_errors_name_it(tmp_path):
    attrs = attrs_of(kernel_h=0)
    model = export(tmp_path, attrs_of(), torch.zeros(1, 4, 4, 64), torch.zeros(1, 4, 4, 112))
    import onnx
    m = onnx.load(str(model))
    node = [n for n in m.graph.node if n.op_type == OP_TYPE][0]
    assert node.domain == DOMAIN
    assert sorted(a.name for a in node.attribute) == sorted(ATTRS)
    for a in node.attribute:
        if a.name == "kernel_h":
            a.i = attrs["kernel_h"]
    onnx.save(m, str(model))
    r = run_cli(tmp_path, model, {"value": np.zeros((1, 4, 4, 64), np.float32),
                                  "offset_mask": np.zeros((1, 4, 4, 112), np.float32)})
    assert r.returncode == 2
    assert "(ai.qdeploy::DCNv4@1, plugin built in)" in r.stderr and "'kernel_h' = 0" in r.stderr, r.stderr
