"""The native module (qdeploy._native) through ``import qdeploy`` on the CPU: engines, contexts, plans, errors,
calibration on Python data, sensitivity, scoring, the detector, and the device-memory protocols as far as a machine
without a GPU can check them. Skips when the module was not built (no pybind11)."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

native = pytest.importorskip("qdeploy._native", reason="qdeploy._native not built (CMake found no pybind11)")
import qdeploy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL_BN = str(ROOT / "models" / "model_bn.onnx")
DETECTOR = str(ROOT / "models" / "yolov5n_fmnist_det.onnx")
FMNIST = Path("/usr/share/datasets/fashion-mnist")


def fmnist_test(n):
    """The first n test images as the classifier's input [n, 3, 32, 32] and their labels."""
    if not FMNIST.is_dir():
        pytest.skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
    with gzip.open(FMNIST / "t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 28, 28)
    with gzip.open(FMNIST / "t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(np.int64)
    x = np.pad(images.astype(np.float32) / 255, ((0, 0), (2, 2), (2, 2)))
    return np.ascontiguousarray(np.repeat(x[:, None], 3, axis=1)), labels


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """ModelBN with a dynamic batch (the shipped export has batch 1)."""
    import synth

    return synth.dynamic_batch_copy(MODEL_BN, tmp_path_factory.mktemp("bn") / "model_bn_dynamic.onnx")


@pytest.fixture(scope="module")
def fp32(model):
    return qdeploy.build(model, device="cpu", precision="fp32")


def test_engine_describes_its_bindings(fp32):
    assert [i.name for i in fp32.inputs] == ["input"]
    assert fp32.inputs[0].shape[1:] == [3, 32, 32]
    assert fp32.inputs[0].dtype == qdeploy.DataType.FLOAT32
    assert [o.name for o in fp32.outputs] == ["output"]
    assert fp32.device == qdeploy.Device.CPU
    assert "cpu" in fp32.describe()
    assert fp32.options().precision == qdeploy.Precision.FP32


def test_run_classifies_fashion_mnist(fp32):
    x, labels = fmnist_test(48)
    out = fp32.run({"input": x})
    assert list(out) == ["output"] and out["output"].shape == (48, 10)
    assert (out["output"].argmax(1) == labels).mean() >= 0.85  # the model's top-1 is 93.9% on the whole split
    k = qdeploy.top_k(out["output"], labels.tolist())
    assert k.count == 48 and k.correct1 == int((out["output"].argmax(1) == labels).sum())


def test_context_matches_engine_run_and_plan_round_trip(fp32, tmp_path):
    x, _ = fmnist_test(8)
    ref = fp32.run({"input": x})["output"]
    ctx = fp32.create_context()
    ctx.set_input_shapes({"input": list(x.shape)})
    assert ctx.outputs()[0].shape == [8, 10]
    ctx.upload({"input": x})
    ctx.enqueue()
    np.testing.assert_array_equal(ctx.download()["output"], ref)
    # New shapes set by run (another batch may sum in another order: equal within rounding).
    np.testing.assert_allclose(ctx.run({"input": x[:3]})["output"], ref[:3], rtol=1e-5, atol=1e-5)
    plan = str(tmp_path / "bn.plan")
    fp32.save(plan)
    assert qdeploy.is_plan(plan) and not qdeploy.is_plan(MODEL_BN)
    np.testing.assert_array_equal(qdeploy.load(plan).run({"input": x})["output"], ref)


def test_fixed_batch_models_say_so():
    shipped = qdeploy.build(MODEL_BN)
    assert shipped.inputs[0].shape == [1, 3, 32, 32]
    with pytest.raises(qdeploy.InvalidArgumentError, match="only dims shown as"):
        shipped.create_context().set_input_shapes({"input": [2, 3, 32, 32]})


def test_errors_raise_with_the_message(fp32, tmp_path):
    with pytest.raises(qdeploy.Error) as e:
        qdeploy.load(str(tmp_path / "missing.plan"))
    assert "missing.plan" in str(e.value)
    with pytest.raises(qdeploy.InvalidArgumentError, match="precision must be one of"):
        qdeploy.build(MODEL_BN, precision="int4")
    with pytest.raises(qdeploy.InvalidArgumentError, match="GPU plans only"):
        plan = str(tmp_path / "cpu.plan")
        fp32.save(plan)
        qdeploy.load(plan, device_index=0)
    with pytest.raises(qdeploy.Error, match="nosuch"):
        fp32.run({"nosuch": np.zeros((1, 3, 32, 32), np.float32)})
    with pytest.raises(FileNotFoundError, match="none.cache"):  # NotFoundError is a FileNotFoundError too
        qdeploy.build(MODEL_BN, precision="int8", calib_cache=str(tmp_path / "none.cache"))
    with pytest.raises(ValueError, match="logits must be"):  # and InvalidArgumentError a ValueError
        qdeploy.top_k(np.zeros((2, 3, 4), np.float32), [0, 1])
    with pytest.raises(qdeploy.InvalidArgumentError, match="no qdeploy tensor type"):
        fp32.run({"input": np.zeros((1, 3, 32, 32), np.complex64)})


def test_calibrate_from_python_data_and_build_int8(model, fp32, tmp_path):
    x, labels = fmnist_test(32)
    batches = [x[i:i + 8] for i in range(0, 32, 8)]
    cache = tmp_path / "bn.cache"
    cal = qdeploy.calibrate(model, batches, algo="minmax", cache=str(cache))
    text = cache.read_text()
    assert text.startswith("TRT-") and text == cal.to_string()
    assert "input" in cal.scales and all(s > 0 for s in cal.scales.values())
    # A generator (read once, kept for the second pass) and a dataset-backed calibrator give the same scales.
    again = qdeploy.calibrate(model, (b for b in batches), algo="minmax")
    assert again.scales == cal.scales
    dataset = [(x[i], int(labels[i])) for i in range(32)]
    calibrator = qdeploy.DatasetCalibrator(dataset, batch_size=8)
    assert len(calibrator) == 4 and calibrator[1].shape == (8, 3, 32, 32)
    assert qdeploy.calibrate(model, calibrator, algo="minmax").scales == cal.scales
    # auto with the last batch held out: five configurations checked on it, one kept.
    auto = qdeploy.calibrate(model, batches, algo="auto", held_out_batches=1)
    assert set(auto.auto_model_snr_db) == {"per-tensor", "minmax", "entropy", "percentile", "mse"}
    assert auto.auto_kept in auto.auto_model_snr_db
    assert not cal.auto_model_snr_db and cal.auto_kept == ""

    int8 = qdeploy.build(model, precision="int8", calibration_data=batches, calib_algo="mse")
    assert "int8" in int8.describe().lower()
    pred = int8.run({"input": x})["output"].argmax(1)
    ref = fp32.run({"input": x})["output"].argmax(1)
    assert (pred == ref).mean() >= 0.9
    totals = qdeploy.evaluate_classifier(int8, [(x[i:i + 16], labels[i:i + 16]) for i in range(0, 32, 16)])
    assert totals.count == 32 and totals.top1 >= 0.8


def test_calibration_source_errors_reach_python(model):
    class Boom(Exception):
        pass

    class Source:
        def __len__(self):
            return 2

        def __getitem__(self, k):
            raise Boom(f"batch {k} is broken")

    with pytest.raises(Boom, match="batch 0 is broken"):
        qdeploy.calibrate(model, Source())
    with pytest.raises(qdeploy.InvalidArgumentError, match="shape"):
        qdeploy.calibrate(model, [np.zeros((2, 3, 32, 32), np.float32), np.zeros((3, 3, 32, 32), np.float32)],
                          algo="minmax")


def test_sensitivity_ranks_every_layer(model, tmp_path):
    x, _ = fmnist_test(8)
    batches = [x[:4], x[4:]]
    cache = str(tmp_path / "bn.cache")
    qdeploy.calibrate(model, batches, algo="minmax", cache=cache)
    r = qdeploy.sensitivity(model, batches, calib_cache=cache)
    assert len(r.layers) == 5  # four convs and the linear layer
    assert sorted(r.ranking) == list(range(5))
    assert np.isfinite(r.all_int8_snr) and r.all_int8_snr > 10
    # Keeping a layer in float never lowers the SNR much below all-INT8's.
    assert all(layer.snr_float >= r.all_int8_snr - 1 for layer in r.layers)


def test_coco_eval_scores_perfect_detections(tmp_path):
    ann = {
        "images": [{"id": 1, "width": 100, "height": 100, "file_name": "a.jpg"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [10, 10, 40, 30], "area": 1200,
                         "iscrowd": 0}],
        "categories": [{"id": 3, "name": "x"}],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(ann))
    stats = qdeploy.coco_eval(str(path), np.array([[1, 3, 10, 10, 40, 30, 0.9]]))
    assert stats["AP"] == pytest.approx(1.0) and stats["AP50"] == pytest.approx(1.0)
    missed = qdeploy.coco_eval(str(path), np.array([[1, 3, 60, 60, 30, 30, 0.9]]))
    assert missed["AP"] == 0.0


def test_detector_letterbox_decode_and_detect():
    engine = qdeploy.build(DETECTOR, precision="fp32")
    det = qdeploy.Detector(engine)
    assert det.num_classes == 10 and det.input_width == det.input_height
    image = qdeploy.read_image(str(ROOT / "models" / "samples" / "000001.jpg"))
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    boxes = det.detect([image])[0]
    assert boxes.shape[1] == 6 and len(boxes) > 0
    assert (boxes[:, 4] >= 0.25).all() and (boxes[:, 5] < 10).all()
    assert (boxes[:, 0] >= -1).all() and (boxes[:, 2] <= image.shape[1] + 1).all()
    # The two host steps around a context of one's own give the same boxes.
    lb = det.letterbox([image])
    assert lb.tensor.shape == (1, 3, det.input_height, det.input_width) and len(lb.placements) == 1
    out = engine.create_context().run({engine.inputs[0].name: lb.tensor})
    np.testing.assert_allclose(det.decode(out, lb)[0], boxes, rtol=1e-5, atol=1e-3)
    with pytest.raises(qdeploy.InvalidArgumentError, match="uint8 array"):
        det.detect([np.zeros((4, 4), np.uint8)])


def test_evaluate_detector_maps_classes_to_categories(tmp_path):
    """Annotations made from the detector's own boxes score AP 1 once classes map to the right category ids."""
    det = qdeploy.Detector(qdeploy.build(DETECTOR, precision="fp32"))
    files = ["000001.jpg", "000002.jpg"]
    images = [qdeploy.read_image(str(ROOT / "models" / "samples" / f)) for f in files]
    boxes = [det.detect([im])[0] for im in images]  # the shipped export takes batch 1
    ann = {"images": [], "annotations": [], "categories": [{"id": 101 + k, "name": f"c{k}"} for k in range(10)]}
    for i, (f, im, b) in enumerate(zip(files, images, boxes)):
        ann["images"].append({"id": 7 + i, "file_name": f, "width": im.shape[1], "height": im.shape[0]})
        for x1, y1, x2, y2, _, c in b:
            ann["annotations"].append({"id": len(ann["annotations"]) + 1, "image_id": 7 + i,
                                       "category_id": 101 + int(c), "bbox": [float(x1), float(y1),
                                       float(x2 - x1), float(y2 - y1)], "area": float((x2 - x1) * (y2 - y1)),
                                       "iscrowd": 0})
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(ann))
    stats = qdeploy.evaluate_detector(det, str(ROOT / "models" / "samples"), str(path))  # sorted: class k -> 101 + k
    assert stats["AP50"] == pytest.approx(1.0) and stats["AP"] > 0.99
    # identity: classes 0..9 are no category of these annotations, so nothing matches
    assert qdeploy.coco_eval_detections(str(path), [7, 8], boxes, 10, "identity")["AP"] == 0
    with pytest.raises(qdeploy.InvalidArgumentError, match="one list per image"):
        qdeploy.coco_eval_detections(str(path), [7], boxes, 10)


def test_dlpack_views_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = qdeploy.memory_view(a.ctypes.data, [3, 4], np.float32, cuda=False, owner=a)
    assert view.__dlpack_device__() == (1, 0)
    assert not hasattr(view, "__cuda_array_interface__")  # host memory
    b = np.from_dlpack(view)
    a[0, 0] = 42
    assert b[0, 0] == 42 and b.shape == (3, 4)  # no copy
    del a, view
    assert b.sum() == 42 + sum(range(1, 12))  # the owner outlives its names while b holds the capsule's tensor


class FakeCudaArray:
    """Something with __cuda_array_interface__ (what torch.cuda and CuPy tensors expose)."""

    def __init__(self, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x1000, False),
                                         "strides": strides, "version": 3}


def test_bind_checks_device_tensors(fp32):
    ctx = fp32.create_context()
    ctx.set_input_shapes({"input": [2, 3, 32, 32]})
    with pytest.raises(qdeploy.InvalidArgumentError, match="CUDA device memory"):
        ctx.bind("input", np.zeros((2, 3, 32, 32), np.float32))  # numpy's __dlpack__ is host memory
    with pytest.raises(qdeploy.InvalidArgumentError, match="float32 in this engine"):
        ctx.bind("input", FakeCudaArray((2, 3, 32, 32), "<f2"))
    with pytest.raises(qdeploy.InvalidArgumentError, match="6144 elements"):
        ctx.bind("input", FakeCudaArray((1, 3, 32, 32), "<f4"))
    with pytest.raises(qdeploy.InvalidArgumentError, match="not contiguous"):
        ctx.bind("input", FakeCudaArray((2, 3, 32, 32), "<f4", strides=(4, 8192, 256, 8)))
    with pytest.raises(qdeploy.NotFoundError, match="nosuch"):
        ctx.bind("nosuch", FakeCudaArray((2, 3, 32, 32), "<f4"))
    with pytest.raises(qdeploy.UnsupportedError):  # a well-formed tensor reaches the CPU context, which has no GPU
        ctx.bind("input", FakeCudaArray((2, 3, 32, 32), "<f4"))
    with pytest.raises(qdeploy.InvalidArgumentError, match="device memory"):
        ctx.bind("input", "not a tensor")


def test_external_sync_needs_a_cuda_engine(fp32):
    ctx = fp32.create_context()
    x, _ = fmnist_test(1)
    ctx.set_input_shapes({"input": [1, 3, 32, 32]})
    ctx.upload({"input": x})
    with pytest.raises(qdeploy.UnsupportedError, match="CUDA engine"):
        ctx.enqueue(None, wait_events=[0x1234])
    ctx.enqueue(None, wait_events=[], signal_semaphores=[])  # nothing to wait for: a plain enqueue
    assert ctx.download()["output"].shape == (1, 10)
    if not qdeploy.has_cuda():
        with pytest.raises(qdeploy.UnsupportedError, match="without the CUDA backend"):
            qdeploy.ExternalSemaphore.import_fd(0, qdeploy.SemaphoreType.TIMELINE_FD)
        with pytest.raises(qdeploy.UnsupportedError):
            qdeploy.Stream.create()


def test_stubs_and_package_list_every_native_name():
    stub = (ROOT / "python" / "qdeploy" / "_native.pyi").read_text()
    names = [k for k in dir(native) if not k.startswith("_")]
    assert [k for k in names if f" {k}" not in stub and f"{k}(" not in stub] == []
    internal = {"build_engine", "calibrate_batches", "sensitivity_batches"}  # wrapped by qdeploy.deploy
    assert [k for k in names if k not in qdeploy._DEPLOY_NAMES and k not in internal] == []
    assert all(hasattr(qdeploy, k) for k in qdeploy._DEPLOY_NAMES)
