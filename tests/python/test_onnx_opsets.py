"""The op forms of ONNX opsets 18 and later, on small graphs made with the onnx helpers, run by `qdeploy run` (the
reference backend) and checked against numpy; and the refusals (float8, blocked quantization, unknown domains) that
must name what is unsupported. Debian's onnx package (1.12) knows opsets up to 17, so models are written without its
checker, as a newer exporter writes them."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QDEPLOY = Path(os.environ.get("QDEPLOY_BIN", ROOT / "build" / "qdeploy"))
pytestmark = pytest.mark.skipif(not QDEPLOY.exists(), reason=f"{QDEPLOY} not built (scripts/build.sh)")

RNG = np.random.default_rng(0)


def make_model(nodes, inputs, outputs, opset, initializers=(), functions=(), extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="test")
    model.ir_version = 8
    model.functions.extend(functions)
    return model


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def run(tmp_path, model, feeds, expect_ok=True):
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    cmd = [str(QDEPLOY), "run", str(path), "--output-dir", str(tmp_path / "out")]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        cmd += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not expect_ok:
        return r
    assert r.returncode == 0, r.stderr
    return {o.name: np.load(tmp_path / "out" / f"{o.name}.npy") for o in model.graph.output}


def test_reduce_axes_input_opset18(tmp_path):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    axes = numpy_helper.from_array(np.array([1, -1], np.int64), "axes")
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
             helper.make_node("ReduceMax", ["x", "axes"], ["mx"], keepdims=0),
             helper.make_node("ReduceSumSquare", ["x"], ["all"], keepdims=0),
             helper.make_node("ReduceL2", ["x", "empty"], ["noop"], noop_with_empty_axes=1)]
    empty = numpy_helper.from_array(np.zeros((0,), np.int64), "empty")
    m = make_model(nodes, [vi("x", x.shape)], [vi("m", None), vi("mx", None), vi("all", None), vi("noop", None)],
                   18, [axes, empty])
    out = run(tmp_path, m, {"x": x})
    np.testing.assert_allclose(out["m"], x.mean(axis=(1, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["mx"], x.max(axis=(1, 3)), rtol=1e-6)
    np.testing.assert_allclose(out["all"], (x * x).sum(), rtol=1e-5)
    np.testing.assert_allclose(out["noop"], x, rtol=0)


def test_reduce_axes_attribute_refused_from_opset18(tmp_path):
    x = np.ones((2, 3), np.float32)
    m = make_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])], [vi("x", x.shape)], [vi("y", None)], 18)
    r = run(tmp_path, m, {"x": x}, expect_ok=False)
    assert r.returncode == 2 and "axes as its second input" in r.stderr, r.stderr


def test_split_num_outputs_opset18(tmp_path):
    x = RNG.standard_normal((2, 7)).astype(np.float32)
    m = make_model([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], [vi("x", x.shape)],
                   [vi("a", None), vi("b", None), vi("c", None)], 18)
    out = run(tmp_path, m, {"x": x})
    # ceil(7 / 3) = 3: parts of 3, 3 and 1.
    for name, part in zip("abc", (x[:, 0:3], x[:, 3:6], x[:, 6:7])):
        np.testing.assert_array_equal(out[name], part)


def test_pad_axes_input_opset18(tmp_path):
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    pads = numpy_helper.from_array(np.array([1, 2, 0, 1], np.int64), "pads")
    axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    value = numpy_helper.from_array(np.array(1.5, np.float32), "value")
    m = make_model([helper.make_node("Pad", ["x", "pads", "value", "axes"], ["y"])], [vi("x", x.shape)],
                   [vi("y", None)], 18, [pads, axes, value])
    out = run(tmp_path, m, {"x": x})
    np.testing.assert_array_equal(out["y"], np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)), constant_values=1.5))


def antialias_linear_1d(x, out_len, scale):
    """ONNX's antialiased linear resize along the last axis, half_pixel coordinates (its reference, restated)."""
    s = min(scale, 1.0)
    start = int(np.floor(-1 / s) + 1)
    n = 2 - 2 * start
    y = np.zeros(x.shape[:-1] + (out_len,), np.float64)
    for o in range(out_len):
        xo = (o + 0.5) / scale - 0.5
        left = np.ceil(xo) - 1
        ratio = xo - left
        w = np.clip(1 - np.abs((np.arange(start, start + n) - ratio) * s), 0, 1)
        w /= w.sum()
        idx = np.clip(left + np.arange(start, start + n), 0, x.shape[-1] - 1).astype(int)
        y[..., o] = (x[..., idx] * w).sum(-1)
    return y


def test_resize_antialias_and_axes_opset18(tmp_path):
    x = RNG.standard_normal((1, 2, 3, 20)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([0.375], np.float32), "scales")
    m = make_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1, axes=[3])],
                   [vi("x", x.shape)], [vi("y", None)], 18, [scales])
    out = run(tmp_path, m, {"x": x})
    assert out["y"].shape == (1, 2, 3, 7)
    np.testing.assert_allclose(out["y"], antialias_linear_1d(x.astype(np.float64), 7, 0.375), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("policy,want", [("not_larger", (1, 1, 6, 12)), ("not_smaller", (1, 1, 8, 16))])
def test_resize_keep_aspect_ratio_policy(tmp_path, policy, want):
    x = RNG.standard_normal((1, 1, 4, 8)).astype(np.float32)
    sizes = numpy_helper.from_array(np.array([6, 16], np.int64), "sizes")
    m = make_model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], axes=[2, 3], mode="nearest",
                                     keep_aspect_ratio_policy=policy, coordinate_transformation_mode="asymmetric",
                                     nearest_mode="floor")],
                   [vi("x", x.shape)], [vi("y", None)], 18, [sizes])
    y = run(tmp_path, m, {"x": x})["y"]
    assert y.shape == want
    scale = want[2] / 4
    rows = np.floor(np.arange(want[2]) / scale).astype(int)
    cols = np.floor(np.arange(want[3]) / scale).astype(int)
    np.testing.assert_array_equal(y, x[:, :, rows][:, :, :, cols])


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(tmp_path, opset):
    x = RNG.standard_normal((2, 6, 3, 4)).astype(np.float32)
    groups = 3
    n = groups if opset == 18 else 6  # opset 18: a scale per group; 21: per channel
    scale = RNG.uniform(0.5, 1.5, n).astype(np.float32)
    bias = RNG.standard_normal(n).astype(np.float32)
    m = make_model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-4)],
                   [vi("x", x.shape)], [vi("y", None)], opset,
                   [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    y = run(tmp_path, m, {"x": x})["y"]
    g = x.reshape(2, groups, -1).astype(np.float64)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-4)).reshape(x.shape)
    per_channel = np.repeat(scale, 2) if opset == 18 else scale
    per_channel_b = np.repeat(bias, 2) if opset == 18 else bias
    np.testing.assert_allclose(y, norm * per_channel[None, :, None, None] + per_channel_b[None, :, None, None],
                               rtol=1e-4, atol=1e-5)


def test_gelu_and_swish(tmp_path):
    from math import erf

    x = np.linspace(-6, 6, 97, dtype=np.float32)
    nodes = [helper.make_node("Gelu", ["x"], ["exact"]), helper.make_node("Gelu", ["x"], ["tanh"], approximate="tanh"),
             helper.make_node("Swish", ["x"], ["swish"], alpha=1.5)]
    m = make_model(nodes, [vi("x", x.shape)], [vi("exact", None), vi("tanh", None), vi("swish", None)], 24)
    out = run(tmp_path, m, {"x": x})
    xd = x.astype(np.float64)
    np.testing.assert_allclose(out["exact"], 0.5 * xd * (1 + np.vectorize(erf)(xd / np.sqrt(2))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["tanh"], 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3))),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["swish"], xd / (1 + np.exp(-1.5 * xd)), rtol=1e-5, atol=1e-6)


def test_quantize_opset21_output_dtype_and_int16(tmp_path):
    x = np.linspace(-3, 3, 40, dtype=np.float32)
    scale = numpy_helper.from_array(np.array(0.02, np.float32), "s")
    zp16 = numpy_helper.from_array(np.array(7, np.int16), "z16")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["q8"], output_dtype=TensorProto.INT8),
             helper.make_node("QuantizeLinear", ["x", "s", "z16"], ["q16"]),
             helper.make_node("DequantizeLinear", ["q16", "s", "z16"], ["dq16"])]
    m = make_model(nodes, [vi("x", x.shape)],
                   [vi("q8", None, TensorProto.INT8), vi("q16", None, TensorProto.INT16), vi("dq16", None)], 21,
                   [scale, zp16])
    out = run(tmp_path, m, {"x": x})
    q = np.rint(x / np.float32(0.02))
    np.testing.assert_array_equal(out["q8"], np.clip(q, -128, 127).astype(np.int8))
    np.testing.assert_array_equal(out["q16"], (q + 7).astype(np.int16))
    np.testing.assert_allclose(out["dq16"], q * np.float32(0.02), rtol=1e-6, atol=1e-7)


def with_attribute_default(function, attr):
    """FunctionProto.attribute_proto (field 11: an attribute's default) is newer than Debian's onnx 1.12: append it
    as raw bytes, as a newer exporter writes it."""
    body = attr.SerializeToString()
    n, varint = len(body), b""
    while True:
        byte = n & 0x7F
        n >>= 7
        varint += bytes([byte | (0x80 if n else 0)])
        if not n:
            break
    out = onnx.FunctionProto()
    out.ParseFromString(function.SerializeToString() + b"\x5a" + varint + body)
    return out


def test_local_functions_are_inlined(tmp_path):
    # custom::ScaledRelu(x) = Relu(x) * alpha, alpha an attribute referenced by the body (default 2.0); called twice,
    # once with alpha given and once without, and once from inside another function.
    alpha_const = helper.make_node("Constant", [], ["a"])
    ref = alpha_const.attribute.add()
    ref.name, ref.ref_attr_name, ref.type = "value_float", "alpha", onnx.AttributeProto.FLOAT
    scaled = helper.make_function("custom", "ScaledRelu", ["x"], ["y"],
                                  [alpha_const, helper.make_node("Relu", ["x"], ["r"]),
                                   helper.make_node("Mul", ["r", "a"], ["y"])],
                                  [helper.make_opsetid("", 18)], attributes=["alpha"])
    scaled = with_attribute_default(scaled, helper.make_attribute("alpha", 2.0))
    twice = helper.make_function("custom", "Twice", ["x"], ["y"],
                                 [helper.make_node("ScaledRelu", ["x"], ["t"], domain="custom"),
                                  helper.make_node("ScaledRelu", ["t"], ["y"], domain="custom")],
                                 [helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)])
    nodes = [helper.make_node("ScaledRelu", ["x"], ["y1"], domain="custom", alpha=0.5),
             helper.make_node("ScaledRelu", ["x"], ["y2"], domain="custom"),
             helper.make_node("Twice", ["x"], ["y3"], domain="custom")]
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    m = make_model(nodes, [vi("x", x.shape)], [vi("y1", None), vi("y2", None), vi("y3", None)], 18,
                   functions=[scaled, twice], extra_opsets=[("custom", 1)])
    out = run(tmp_path, m, {"x": x})
    relu = np.maximum(x, 0)
    np.testing.assert_allclose(out["y1"], relu * 0.5, rtol=1e-6)
    np.testing.assert_allclose(out["y2"], relu * 2.0, rtol=1e-6)
    np.testing.assert_allclose(out["y3"], relu * 4.0, rtol=1e-6)


def test_refusals_name_what_is_unsupported(tmp_path):
    x = np.ones((2, 4), np.float32)
    cases = []
    f8 = TensorProto()
    f8.name, f8.data_type, f8.raw_data = "w", 17, bytes(8)
    f8.dims.extend([2, 4])
    cases.append((make_model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", x.shape)], [vi("y", None)], 19,
                             [f8]), "float8e4m3fn"))
    s = numpy_helper.from_array(np.full((2, 2), 0.1, np.float32), "s")
    cases.append((make_model([helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=2,
                                               output_dtype=TensorProto.INT8)],
                             [vi("x", x.shape)], [vi("q", None, TensorProto.INT8)], 21, [s]), "blocked quantization"))
    cases.append((make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", x.shape)], [vi("y", None)], 29),
                  "opset 29 is not supported"))
    cases.append((make_model([helper.make_node("aten_gelu", ["x"], ["y"], domain="pkg.onnxscript.torch_lib")],
                             [vi("x", x.shape)], [vi("y", None)], 20, extra_opsets=[("pkg.onnxscript.torch_lib", 1)]),
                  "inline"))
    for i, (model, text) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        r = run(d, model, {"x": x}, expect_ok=False)
        assert r.returncode == 2, (text, r.stderr)
        assert text in r.stderr, r.stderr
