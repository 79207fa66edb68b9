"""ONNX export: names, shapes and validity of detector (full and head-only) and classifier graphs."""

import pytest
import torch

from qdeploy import export, onnx_export
from qdeploy.models import build_model

onnx = pytest.importorskip("onnx")


def dims(value_info):
    return [d.dim_value or d.dim_param for d in value_info.type.tensor_type.shape.dim]


def load_checked(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == onnx_export.OPSET
    return model


def test_detector_full_export_at_640(tmp_path):
    path = tmp_path / "yolov5n.onnx"
    export.main(["--model", "yolov5n", "--nc", "10", "--imgsz", "640", "--out", str(path)])
    g = load_checked(path).graph
    assert [(i.name, dims(i)) for i in g.input] == [("images", [1, 3, 640, 640])]
    assert [(o.name, dims(o)) for o in g.output] == [("output0", [1, 25200, 15])]
    assert not any(n.op_type == "BatchNormalization" for n in g.node)  # folded before export


def test_detector_head_only_dynamic(tmp_path):
    path = tmp_path / "heads.onnx"
    export.main(["--model", "yolov5n", "--nc", "10", "--imgsz", "320", "--head-only", "--dynamic", "--out", str(path)])
    g = load_checked(path).graph
    assert dims(g.input[0]) == ["batch", 3, 320, 320]
    assert [(o.name, dims(o)) for o in g.output] == [
        ("s8", ["batch", 45, 40, 40]), ("s16", ["batch", 45, 20, 20]), ("s32", ["batch", 45, 10, 10])]
    assert not any(n.op_type == "Sigmoid" and n.output[0] in {"s8", "s16", "s32"} for n in g.node)


def test_weights_round_trip(tmp_path):
    from qdeploy.checkpoint import load_weights, save_checkpoint

    torch.manual_seed(0)
    model = build_model("bn", 10)
    save_checkpoint(tmp_path / "w.pt", model, model_name="bn", epoch=1, top1=0.5)
    other = load_weights(build_model("bn", 10), tmp_path / "w.pt")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values()))
    with pytest.raises(ValueError, match="does not fit"):
        load_weights(build_model("gn", 10), tmp_path / "w.pt")


def test_weights_from_an_exported_onnx(tmp_path):
    """A shipped detector's ONNX gives its weights back: re-exported at another size with a dynamic batch, the
    conv weights are the same tensors and the model computes the same thing."""
    from qdeploy.checkpoint import load_weights, save_checkpoint
    from onnx import numpy_helper

    torch.manual_seed(3)
    trained = build_model("yolov5n", 10)
    for m in trained.modules():  # BatchNorm statistics as training leaves them (fresh ones fold to equal biases)
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.bias.data.uniform_(-0.2, 0.2)
    save_checkpoint(tmp_path / "w.pt", trained)
    first = tmp_path / "a.onnx"
    export.main(["--model", "yolov5n", "--nc", "10", "--weights", str(tmp_path / "w.pt"), "--imgsz", "320",
                 "--out", str(first)])
    again = tmp_path / "b.onnx"
    export.main(["--model", "yolov5n", "--nc", "10", "--weights", str(first), "--imgsz", "352", "--dynamic",
                 "--out", str(again)])
    a = {t.name: numpy_helper.to_array(t) for t in load_checked(first).graph.initializer}
    g = load_checked(again).graph
    b = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    convs = [k for k in a if k.endswith(".conv.weight") or k.endswith(".conv.bias")]
    assert len(convs) > 100 and all((a[k] == b[k]).all() for k in convs)
    assert dims(g.input[0]) == ["batch", 3, 352, 352]
    model = load_weights(build_model("yolov5n", 10), first).eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x)[0], trained.eval()(x)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="no initializer"):
        load_weights(build_model("bn", 10), first)


@pytest.mark.parametrize("name", ["bn", "gn"])
def test_classifier_export(tmp_path, name):
    path = tmp_path / f"{name}.onnx"
    export.main(["--model", name, "--dynamic", "--out", str(path)])
    g = load_checked(path).graph
    assert [(i.name, dims(i)) for i in g.input] == [("input", ["batch", 3, 32, 32])]
    assert [(o.name, dims(o)) for o in g.output] == [("output", ["batch", 10])]


def test_onnxruntime_matches_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    model = build_model("yolov5n", 10)
    model.train()(torch.rand(2, 3, 128, 128))  # non-trivial BN statistics
    path = tmp_path / "m.onnx"
    onnx_export.export_detector(model, path, imgsz=128)
    x = torch.rand(1, 3, 128, 128)
    with torch.no_grad():
        ref = model.eval()(x).numpy()
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x.numpy()})[0]
    assert out.shape == ref.shape
    assert abs(out - ref).max() < 1e-3 * max(1.0, abs(ref).max())
