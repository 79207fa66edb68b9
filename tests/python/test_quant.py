"""Fake quantization: calibrators, rounding and gradients, Q/DQ placement and tying, and the Q/DQ ONNX export."""

import copy
import functools

import numpy as np
import pytest
import torch

from qdeploy.models import build_model
from qdeploy.quant import (TensorQuantizer, activation_quantizers, calibrate, export_qat_detector, keep_float,
                           quantize_model, set_quantization)
from qdeploy.quant.calib import HistogramCalibrator, MaxCalibrator

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402


@pytest.fixture(scope="module")
def gaussian():
    torch.manual_seed(0)
    return torch.randn(1_000_000)


def histogram(x, batches=4):
    cal = HistogramCalibrator()
    for chunk in x.chunk(batches):
        cal.collect(chunk)
    return cal


def test_max_calibrator_per_tensor_and_per_channel():
    cal = MaxCalibrator()
    cal.collect(torch.tensor([0.5, -2.0]))
    cal.collect(torch.tensor([1.5]))
    assert float(cal.compute_amax()) == 2.0
    w = torch.tensor([[1.0, -3.0], [0.25, 0.5], [-2.0, 0.0]])
    cal = MaxCalibrator(axis=0)
    cal.collect(w)
    assert cal.compute_amax().tolist() == [3.0, 0.5, 2.0]


def test_histogram_calibrators_on_uniform():
    torch.manual_seed(0)
    cal = histogram(torch.rand(400_000) * 2 - 1)  # |x| uniform on [0, 1]: nothing worth clipping
    assert float(cal.compute_amax("percentile", 99.99)) == pytest.approx(1.0, abs=0.002)
    assert float(cal.compute_amax("mse")) == pytest.approx(1.0, abs=0.02)
    assert float(cal.compute_amax("entropy")) == pytest.approx(1.0, abs=0.02)


def test_histogram_calibrators_on_gaussian(gaussian):
    cal = histogram(gaussian)
    peak = float(gaussian.abs().max())
    # Two-sided 99.99 % of a unit Gaussian lies within 3.89.
    assert float(cal.compute_amax("percentile", 99.99)) == pytest.approx(3.89, abs=0.05)
    assert float(cal.compute_amax("percentile", 99.0)) == pytest.approx(2.576, abs=0.02)
    mse = float(cal.compute_amax("mse"))
    entropy = float(cal.compute_amax("entropy"))
    assert 2.5 < mse < peak  # clips the sparse tail: rounding error in the bulk costs more than clipping it
    assert 3.0 < entropy <= peak


def test_histogram_grows_without_exceeding_2048_bins(gaussian):
    cal = HistogramCalibrator()
    cal.collect(gaussian[:1000] * 0.01)  # a first batch with a tiny range
    cal.collect(gaussian)
    assert len(cal.hist) <= 2048 and cal.hist.sum() == 1000 + len(gaussian)
    assert float(cal.compute_amax("percentile", 99.99)) == pytest.approx(3.89, abs=0.1)


def test_fake_quant_rounding_range_and_straight_through_gradient():
    q = TensorQuantizer()
    q.set_amax(127.0)  # scale 1: values are rounded to integers
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, 126.6, 200.0, -200.0], requires_grad=True)
    y = q(x)
    assert y.tolist() == [0.0, 2.0, 2.0, -0.0, 127.0, 127.0, -128.0]  # half to even; activations reach -128
    y.sum().backward()
    assert x.grad.tolist() == [1, 1, 1, 1, 1, 0, 0]  # identity inside the range, zero where clipped
    w = TensorQuantizer(axis=0, channels=2, narrow=True)
    w.set_amax(torch.tensor([127.0, 254.0]))
    assert w(torch.tensor([[-300.0], [-300.0]])).flatten().tolist() == [-127.0, -254.0]  # weights: [-127, 127]


def fit_range(q, x, steps):
    """Trains q's learned range against its reconstruction error of x (Adam, lr 0.01): (first, last) loss."""
    opt = torch.optim.Adam(q.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        loss = ((q(x) - x) ** 2).mean()
        losses.append(float(loss))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses[0], losses[-1]


def test_learned_range_moves_the_scale_and_freezes_into_amax():
    """LSQ: with a calibrated range far too wide for the data, training the scale against the reconstruction error
    shrinks it; freeze_range() puts it back into amax (what export writes) and drops the parameter."""
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    for q, shape in ((TensorQuantizer(), ()), (TensorQuantizer(axis=0, channels=64, narrow=True), (64,))):
        q.set_amax(torch.full(shape, 40.0))
        q.learn_range()
        assert [n for n, _ in q.named_parameters()] == ["learned_scale"]
        first, loss = fit_range(q, x, 200)
        assert loss < 0.05 * first  # from a step of 40/127 to near the MSE-optimal range
        q.freeze_range()
        assert list(q.parameters()) == [] and "learned_scale" not in q.state_dict()
        assert float(q.amax.max()) < 8.0  # |x| < ~5: a much tighter range than 40
        assert float(((q(x) - x) ** 2).mean()) == pytest.approx(loss, rel=0.05)


def test_learned_asymmetric_range_moves_both_ends_and_freezes_into_amin_amax():
    """LSQ+ on an asymmetric quantizer: from a range far too wide on both sides for SiLU-like data, training the scale
    and the low end against the reconstruction error tightens both; freeze_range() turns them into [amin, amax] whose
    uint8 grid is the learned one (same outputs), and drops the parameters."""
    torch.manual_seed(0)
    x = torch.nn.functional.silu(torch.randn(64, 256) * 2)  # [-0.28, ~8]
    q = TensorQuantizer()
    q.start_calibration("max")
    q(torch.tensor([-3.0, 40.0]))
    q.finish_calibration("max")
    q.make_asymmetric()
    q.learn_range()
    with pytest.raises(RuntimeError):
        q.make_asymmetric()  # asymmetric first, then learn_range
    assert sorted(n for n, _ in q.named_parameters()) == ["learned_low", "learned_scale"]
    first, loss = fit_range(q, x, 300)
    assert loss < 0.1 * first
    learned = q(x).detach()
    q.freeze_range()
    assert list(q.parameters()) == []
    assert -3.0 < float(q.amin) < -0.1 and float(q.amax) < 20.0  # both ends moved in from [-3, 40]
    assert torch.allclose(q(x), learned, atol=1e-5)


def test_uncalibrated_quantizer_refuses_to_run():
    with pytest.raises(RuntimeError, match="calibrat"):
        TensorQuantizer()(torch.ones(1))


def shared_names(model):
    names = {}
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, TensorQuantizer):
            names.setdefault(id(module), []).append(name)
    return [sorted(v) for v in names.values() if len(v) > 1]


def test_placement_1_ties_quantizers_across_concat_and_pool():
    model = quantize_model(build_model("yolov5n", 10), placement=1)
    groups = shared_names(model)
    # C3's two branches read the same tensor; SPPF's pools and the concat after them share one scale.
    assert ["model.2.cv1.conv.input_quantizer", "model.2.cv2.conv.input_quantizer"] in groups
    assert ["model.9.cv2.conv.input_quantizer", "model.9.m.input_quantizer"] in groups
    # The backbone P4 output feeds conv 7 and, through the head's concat, C3 13: one scale for all three.
    assert ["model.13.cv1.conv.input_quantizer", "model.13.cv2.conv.input_quantizer",
            "model.7.conv.input_quantizer"] in groups
    # A residual add's identity input shares the quantizer of the bottleneck's first conv; the branch has its own.
    bottleneck = model.model[2].m[0]
    assert bottleneck.add.a_quantizer is bottleneck.cv1.conv.input_quantizer
    assert bottleneck.add.b_quantizer is not bottleneck.add.a_quantizer
    assert not any(type(m).__name__ in ("QuantSiLU", "QuantConcat") for m in model.modules())


def test_keep_float_disables_the_layers_and_unties_their_inputs():
    model = quantize_model(build_model("yolov5n", 10), placement=1)
    shared = model.model[18].conv.input_quantizer  # P3's output: read by conv 18 and the first Detect conv
    assert model.model[24].m[0].input_quantizer is shared
    names = keep_float(model, ["model.1.conv", r"model\.24\.m\.[0-9]"])
    assert names == ["model.1.conv", "model.24.m.0", "model.24.m.1", "model.24.m.2"]
    for conv in (model.model[1].conv, *model.model[24].m):
        assert not conv.input_quantizer.enabled and not conv.weight_quantizer.enabled
    assert model.model[18].conv.input_quantizer is shared and shared.enabled  # still quantized for conv 18
    calibrate(model, [torch.rand(2, 3, 64, 64)], method="max")
    x = torch.rand(1, 3, 64, 64)
    head_in = {}
    model.model[24].m[0].register_forward_pre_hook(lambda m, inp: head_in.setdefault("x", inp[0]))
    model.eval()(x)
    assert not torch.equal(shared(head_in["x"]), head_in["x"])  # the Detect conv reads the unquantized tensor
    assert keep_float(model, ["model.99.conv"]) == []


def test_export_keeps_float_layers_weights_as_trained(tmp_path):
    """Only quantized weights are clamped to their calibrated range on export: a --float-layers conv whose weights
    grew past it while fine-tuning exports them as they are."""
    model = quantize_model(build_model("yolov5n", 10), placement=1)
    keep_float(model, ["model.1.conv"])
    calibrate(model, [torch.rand(2, 3, 64, 64)], method="max")
    with torch.no_grad():
        for conv in (model.model[0].conv, model.model[1].conv):
            conv.weight.mul_(1.5)  # past the amax calibrated for them
    path = tmp_path / "float_layer.onnx"
    export_qat_detector(model, path, imgsz=64)
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}

    def exported(conv):
        matches = [w for w in weights.values() if w.shape == tuple(conv.weight.shape)]
        assert matches, "no initializer of the conv's shape"
        return matches

    float_w = model.model[1].conv.weight.detach().numpy()
    assert any(np.array_equal(w, float_w) for w in exported(model.model[1].conv))
    amax = model.model[0].conv.weight_quantizer.amax.view(-1, 1, 1, 1)
    clamped = torch.maximum(torch.minimum(model.model[0].conv.weight, amax), -amax).detach().numpy()
    assert not np.array_equal(clamped, model.model[0].conv.weight.detach().numpy())
    assert any(np.array_equal(w, clamped) for w in exported(model.model[0].conv))


def test_placement_2_quantizes_every_layer():
    model = quantize_model(build_model("yolov5n", 10), placement=2)
    kinds = {type(m).__name__ for m in model.modules()}
    assert {"QuantSiLU", "QuantConcat", "QuantAdd", "QuantMaxPool2d", "QuantConv2d"} <= kinds
    assert not shared_names(model)
    n1 = len(activation_quantizers(quantize_model(build_model("yolov5n", 10), placement=1)))
    assert len(activation_quantizers(model)) > 2 * n1


@functools.lru_cache(maxsize=None)
def _calibrated_yolo(placement):
    torch.manual_seed(0)
    model = build_model("yolov5n", 10)
    model.train()(torch.rand(4, 3, 64, 64))  # BN statistics of real magnitude, so quantization noise is visible
    model.eval()
    qmodel = quantize_model(copy.deepcopy(model), placement)
    calibrate(qmodel, [torch.rand(2, 3, 64, 64) for _ in range(2)], method="max")
    return model, qmodel


def calibrated_yolo(placement):
    """(float model, calibrated quantized copy); built once per placement, handed out as copies to mutate."""
    return tuple(copy.deepcopy(m) for m in _calibrated_yolo(placement))


@pytest.mark.parametrize("placement", [1, 2])
def test_calibrated_model_is_close_to_float(placement):
    model, qmodel = calibrated_yolo(placement)
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        ref, out = model.raw_levels(x), qmodel.raw_levels(x)
        set_quantization(qmodel, False)
        off = qmodel.raw_levels(x)
    for r, o, f in zip(ref, out, off):
        rel = float((o - r).norm() / r.norm())
        assert 0 < rel < 0.1
        torch.testing.assert_close(f, r, rtol=1e-4, atol=1e-4)  # quantizers off: the folded float model


def qdq_export(tmp_path, placement):
    _, qmodel = calibrated_yolo(placement)
    path = tmp_path / f"qat{placement}.onnx"
    export_qat_detector(qmodel, path, imgsz=64)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    return qmodel, model.graph


def constant_values(graph):
    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return values


@pytest.mark.parametrize("placement", [1, 2])
def test_qdq_export(tmp_path, placement):
    qmodel, g = qdq_export(tmp_path, placement)
    values = constant_values(g)
    consumers = {}
    for n in g.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    quantize = [n for n in g.node if n.op_type == "QuantizeLinear"]
    assert quantize and len(quantize) == sum(n.op_type == "DequantizeLinear" for n in g.node)
    weights = {i.name: numpy_helper.to_array(i) for i in g.initializer if i.name.endswith(".weight")}
    n_weight = 0
    for q in quantize:
        assert [c.op_type for c in consumers[q.output[0]]] == ["DequantizeLinear"]
        dq = consumers[q.output[0]][0]
        scale, zero = values[q.input[1]], values[q.input[2]]
        assert np.all(scale > 0) and zero.dtype == np.int8 and not zero.any()
        np.testing.assert_array_equal(values[dq.input[1]], scale)
        axis = {a.name: a.i for a in q.attribute}.get("axis")
        if q.input[0] in weights:
            n_weight += 1
            w = weights[q.input[0]]
            assert axis == 0 and scale.shape == (w.shape[0],)
            assert np.all(np.abs(w).max(axis=tuple(range(1, w.ndim))) <= 127 * scale * (1 + 1e-6))
        else:
            assert scale.shape == ()
    assert n_weight == sum(1 for m in qmodel.modules() if hasattr(m, "weight_quantizer"))
    sigmoid_inputs = [n.input[0] for n in g.node if n.op_type == "Sigmoid"]
    produced_by_dq = {n.output[0] for n in g.node if n.op_type == "DequantizeLinear"}
    quantized_sigmoids = sum(s in produced_by_dq for s in sigmoid_inputs)
    assert (quantized_sigmoids > 0) == (placement == 2)


def test_asymmetric_activations_use_all_codes_and_export_uint8_zero_points(tmp_path):
    """make_asymmetric (qat.py --asymmetric-activations): uint8 over [observed min, amax], so a SiLU-like
    tensor (down to -0.28) gets a finer step than symmetric int8; the export's activation pairs have uint8 zero
    points, the weights' stay symmetric int8."""
    q = TensorQuantizer()
    q.start_calibration("max")
    x = torch.linspace(-0.28, 4.0, 1001)
    q(x)
    q.finish_calibration("max")
    symmetric_err = (q(x) - x).abs().max()
    q.make_asymmetric()
    assert float(q.amin) == pytest.approx(-0.28) and float(q.amax) == pytest.approx(4.0)
    y = q(x)
    step = (4.0 + 0.28) / 255
    assert (y - x).abs().max() <= step / 2 + 1e-6 < symmetric_err
    assert len(torch.unique(y)) > 200  # about 255 codes used, against about 136 symmetric
    with pytest.raises(RuntimeError):
        TensorQuantizer(axis=0, channels=2).make_asymmetric()
    # After mse calibration the high end is searched again for the finer uint8 grid: less squared error than keeping
    # the symmetric grid's amax.
    torch.manual_seed(0)
    x = torch.nn.functional.silu(torch.randn(200_000) * 2)
    errors = []
    for search in (False, True):
        q = TensorQuantizer()
        q.start_calibration("mse")
        q(x)
        q.finish_calibration("mse")
        if not search:
            q._histogram = None  # keep the symmetric amax as the high end
        q.make_asymmetric()
        errors.append(float(((q(x) - x) ** 2).mean()))
    assert errors[1] < errors[0]

    _, qmodel = calibrated_yolo(1)
    for a in activation_quantizers(qmodel):
        a.make_asymmetric()
    path = tmp_path / "asym.onnx"
    export_qat_detector(qmodel, path, imgsz=64)
    g = onnx.load(str(path)).graph
    values = constant_values(g)
    weights = {i.name for i in g.initializer if i.name.endswith(".weight")}
    zeros = {q.input[0] in weights: values[q.input[2]].dtype for q in g.node if q.op_type == "QuantizeLinear"}
    assert zeros == {True: np.int8, False: np.uint8}


def test_export_of_one_quantizer_kind(tmp_path):
    """set_quantization by kind (qat.py --export-only): only the weights' per-channel pairs, or only the activations'."""
    for kind, per_channel in (("weights", True), ("activations", False)):
        _, qmodel = calibrated_yolo(1)
        set_quantization(qmodel, False, "activations" if kind == "weights" else "weights")
        path = tmp_path / f"{kind}.onnx"
        export_qat_detector(qmodel, path, imgsz=64)
        quantize = [n for n in onnx.load(str(path)).graph.node if n.op_type == "QuantizeLinear"]
        assert quantize
        assert all(any(a.name == "axis" for a in q.attribute) == per_channel for q in quantize), kind
    with pytest.raises(ValueError):
        set_quantization(qmodel, False, "biases")
