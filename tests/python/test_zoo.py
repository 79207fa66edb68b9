"""The standard classifiers of python/qdeploy/models/zoo.py: torchvision's parameter counts at full size, the small
Fashion-MNIST variants' counts, and each model (10 classes, randomized BatchNorm statistics, norm affines, biases and
layer scales) exported at 64x64 with a dynamic batch and run by qdeploy's CPU reference at batch 2 against PyTorch
eager."""

import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from qdeploy.models import zoo

ROOT = Path(__file__).resolve().parents[2]
QDEPLOY = Path(os.environ.get("QDEPLOY_BIN", ROOT / "build" / "qdeploy"))
needs_cli = pytest.mark.skipif(not QDEPLOY.exists(), reason=f"{QDEPLOY} not built (scripts/build.sh)")
SIZE = 64  # every model's last stage is 2x2 here

# The ops each model's export must hold, so the comparison exercises them (the exporter folds each BatchNorm into its
# conv, torch writes GELU at opset 17 as Erf, Div, Add, Mul, and ShuffleNet's channel split as Split or, torch 1.13,
# as two Slices of shape arithmetic); a tuple is alternatives.
OPS = {
    "resnet50": {"Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Gemm"},
    "mobilenet_v2": {"Conv", "Clip", "Add", "GlobalAveragePool", "Gemm"},
    "mobilenet_v3_large": {"Conv", "HardSwish", "HardSigmoid", "Relu", "Mul", "GlobalAveragePool", "Gemm"},
    "efficientnet_b0": {"Conv", "Sigmoid", "Mul", "GlobalAveragePool", "Gemm"},
    "regnet_y_400mf": {"Conv", "Relu", "Sigmoid", "Mul", "Add", "GlobalAveragePool", "Gemm"},
    "convnext_tiny": {"Conv", "Transpose", "LayerNormalization", "MatMul", "Erf", "Mul", "Add", "GlobalAveragePool"},
    "shufflenet_v2_x1_0": {"Conv", ("Split", "Slice"), "Concat", "Reshape", "Transpose", "MaxPool", "ReduceMean",
                           "Gemm"},
}
OPS["convnext_fmnist"] = OPS["convnext_tiny"]
OPS["mobilenet_fmnist"] = OPS["mobilenet_v3_large"]
OPS["resnet_fmnist"] = OPS["resnet50"]
OPS["regnet_fmnist"] = OPS["regnet_y_400mf"]
OPS["shufflenet_fmnist"] = OPS["shufflenet_v2_x1_0"]
ALL_NAMES = zoo.MODEL_NAMES + list(zoo.FMNIST_MODELS)
# The shipped models/NAME_fmnist.onnx (10 classes): their cards' counts, under 0.6M.
FMNIST_PARAMETERS = {"convnext_fmnist": 366_890, "mobilenet_fmnist": 196_610, "resnet_fmnist": 599_530,
                     "regnet_fmnist": 341_094, "shufflenet_fmnist": 183_514}


@pytest.mark.parametrize("name", zoo.MODEL_NAMES)
def test_full_model_has_torchvisions_parameter_count(name):
    assert zoo.count_parameters(zoo.build(name)) == zoo.PARAMETERS[name]


@pytest.mark.parametrize("name", list(zoo.FMNIST_MODELS))
def test_fmnist_variant_parameter_count(name):
    assert zoo.count_parameters(zoo.build(name, 10)) == FMNIST_PARAMETERS[name]


def test_build_is_seeded_and_names_are_checked():
    a, b, c = (zoo.build("shufflenet_v2_x1_0", 10, seed=s) for s in (1, 1, 2))
    assert torch.equal(a.fc.weight, b.fc.weight) and not torch.equal(a.fc.weight, c.fc.weight)
    with pytest.raises(ValueError, match="resnet50"):
        zoo.build("resnet51")


def test_randomize_measures_batchnorm_statistics():
    model = zoo.randomize(zoo.build("mobilenet_v2", 10), seed=1, imgsz=32, batch=4)
    bn = model.features[0][1]
    assert not model.training and not bn.training
    assert bn.running_mean.abs().max() > 0.01 and (bn.running_var - 1).abs().max() > 0.01


@needs_cli
@pytest.mark.parametrize("name", ALL_NAMES)
def test_reference_matches_pytorch(tmp_path, name):
    import onnx

    model = zoo.randomize(zoo.build(name, num_classes=10), seed=1, imgsz=SIZE, batch=4)
    path = tmp_path / f"{name}.onnx"
    zoo.export_onnx(model, path, imgsz=SIZE, dynamic=True)
    ops = Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    missing = [op for op in OPS[name] if not set(op if isinstance(op, tuple) else (op,)) & set(ops)]
    assert not missing, missing
    assert "BatchNormalization" not in ops

    x = torch.randn(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(x).numpy()
    np.save(tmp_path / "x.npy", x.numpy())
    r = subprocess.run([str(QDEPLOY), "run", str(path), "--input", f"input={tmp_path / 'x.npy'}",
                        "--output-dir", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "output.npy")
    assert got.shape == want.shape == (2, 10)
    rng = float(want.max() - want.min())
    err = float(np.abs(got - want).max())
    print(f"{name}: max|qdeploy - pytorch| {err:.3g}, logits range {rng:.3g}")
    assert rng > 0.05 and err <= 1e-4 * rng, (err, rng)
