"""The deployment side of ``import qdeploy``: keyword-argument wrappers over the C++ API (``qdeploy._native``).

Calibration data is any of: a sequence of batches (``len`` and indexing: read lazily, batch by batch, once per
calibration pass), any other iterable of batches (read once and kept in memory), or a :class:`DatasetCalibrator`
over a dataset of samples. A batch is a numpy array (or a torch tensor) for a one-input model, a dict of them by
input name, or a tuple whose first item is the input (a dataset's ``(image, label)``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence

import numpy as np

from . import _native

_DEVICES = {"cpu": _native.Device.CPU, "cuda": _native.Device.CUDA}
_PRECISIONS = {"fp32": _native.Precision.FP32, "fp16": _native.Precision.FP16, "int8": _native.Precision.INT8}
_INT8_MODES = {"exact": _native.Int8Mode.EXACT, "fake": _native.Int8Mode.FAKE, "bit_exact": _native.Int8Mode.BIT_EXACT}


def _enum(table: Mapping[str, Any], value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return table[value.lower()]
    except KeyError:
        raise _native.InvalidArgumentError(
            f"{what} must be one of {', '.join(table)}, got '{value}'") from None


def _array(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor (on any device)
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x)
    return a.astype(np.float32) if a.dtype == np.float64 else a


def _feeds(batch: Any, input_name: Optional[str]) -> Dict[str, np.ndarray]:
    if isinstance(batch, Mapping):
        return {str(k): _array(v) for k, v in batch.items()}
    if isinstance(batch, tuple):
        batch = batch[0]
    if input_name is None:
        raise _native.InvalidArgumentError(
            "a batch given as one array needs the model's input name (input_name=...), or give a dict")
    return {input_name: _array(batch)}


class DatasetCalibrator(Sequence):
    """Batches of ``batch_size`` samples from an indexable dataset of ``(input, label)`` pairs or inputs, as the
    seed tutorial's TensorRT ``DatasetCalibrator`` feeds ``get_batch``: sample ``k * batch_size + i`` (wrapping
    around the dataset), for ``num_batches`` batches (default: as many as the dataset fills)."""

    def __init__(self, dataset: Any, batch_size: int = 8, num_batches: Optional[int] = None,
                 transform: Optional[Callable[[Any], Any]] = None):
        if batch_size < 1:
            raise _native.InvalidArgumentError("batch_size must be at least 1")
        self.dataset, self.batch_size, self.transform = dataset, batch_size, transform
        full = len(dataset) // batch_size
        self.num_batches = full if num_batches is None else num_batches
        if self.num_batches < 1:
            raise _native.InvalidArgumentError(
                f"the dataset's {len(dataset)} samples fill no batch of {batch_size}")

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, k: int) -> np.ndarray:
        if not 0 <= k < self.num_batches:
            raise IndexError(k)
        items = []
        for i in range(self.batch_size):
            sample = self.dataset[(k * self.batch_size + i) % len(self.dataset)]
            x = sample[0] if isinstance(sample, tuple) else sample
            if self.transform is not None:
                x = self.transform(x)
            items.append(_array(x))
        return np.stack(items)


def _source(data: Any, input_name: Optional[str]):
    """(num_batches, batch(k)) over calibration data (see the module's doc)."""
    if isinstance(data, (np.ndarray, Mapping)) or hasattr(data, "detach"):
        data = [data]  # one batch
    if not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
        data = list(data)  # an iterator or generator: read once, kept for the second pass
    n = len(data)
    return n, (lambda k: _feeds(data[k], input_name))


def _input_name(model: str, input_name: Optional[str]) -> Optional[str]:
    if input_name is not None:
        return input_name
    try:
        import onnx  # the model's first graph input, without building anything
        m = onnx.load(model, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits]
        return names[0] if len(names) == 1 else None
    except Exception:  # no onnx package, or a file onnx cannot read: the C++ importer reports it
        return None


def calibrate(model: str, data: Iterable[Any], algo: str = "mse", cache: Optional[str] = None,
              input_name: Optional[str] = None, percentile: float = 99.99, bins: int = 2048,
              float_head: bool = True, held_out_batches: int = 0) -> _native.Calibration:
    """Calibrates ``model`` (ONNX) on ``data`` with the reference backend; writes ``cache`` (TensorRT's text
    format) when given. ``algo``: minmax, entropy, percentile, mse or auto. The last ``held_out_batches`` batches
    do not calibrate; with auto they check the whole model (``auto_model_snr_db``, ``auto_kept``)."""
    opt = _native.CalibrationOptions()
    opt.algo, opt.percentile, opt.bins, opt.float_head = algo, percentile, bins, float_head
    opt.held_out_batches = held_out_batches
    n, get = _source(data, _input_name(model, input_name))
    cal = _native.calibrate_batches(model, n, get, opt)
    if cache:
        cal.save(cache)
    return cal


def sensitivity(model: str, data: Iterable[Any], calib_cache: str = "", input_name: Optional[str] = None,
                exact: bool = True, sweep_float: bool = True, sweep_int8: bool = False,
                only_layers: Sequence[str] = ()) -> _native.SensitivityReport:
    """Per-layer INT8 sensitivity (SNR of the outputs against FP32, in dB) on ``data``."""
    opt = _native.SensitivityOptions()
    opt.calib_cache, opt.exact, opt.sweep_float, opt.sweep_int8 = calib_cache, exact, sweep_float, sweep_int8
    opt.only_layers = list(only_layers)
    n, get = _source(data, _input_name(model, input_name))
    return _native.sensitivity_batches(model, n, get, opt)


def _formats(formats: Any) -> list:
    out = []
    for f in formats or []:
        if isinstance(f, str):  # "fp16", "int8:nhwc"
            dtype, _, layout = f.partition(":")
            f = _native.IoFormat(
                {"fp32": _native.DataType.FLOAT32, "fp16": _native.DataType.FLOAT16,
                 "int8": _native.DataType.INT8}[dtype],
                _native.Layout.NHWC if layout.lower() == "nhwc" else _native.Layout.NCHW)
        out.append(f)
    return out


def build(model: str, device: Any = "cpu", precision: Any = "fp32", *, calibration_data: Any = None,
          calib_cache: str = "", calib_algo: str = "mse", input_name: Optional[str] = None,
          shapes: Optional[Mapping[str, Sequence[int]]] = None,
          min_shapes: Optional[Mapping[str, Sequence[int]]] = None,
          opt_shapes: Optional[Mapping[str, Sequence[int]]] = None,
          max_shapes: Optional[Mapping[str, Sequence[int]]] = None,
          int8_mode: Any = "exact", fp16_layers: Sequence[str] = (), fp32_layers: Sequence[str] = (),
          precision_config: str = "", timing_cache: str = "", device_index: int = 0,
          input_formats: Sequence[Any] = (), output_formats: Sequence[Any] = (),
          kernel_policy: str = "") -> _native.Engine:
    """Imports ``model`` (ONNX) and compiles it. INT8 needs scales: ``calib_cache`` (a file), or
    ``calibration_data`` (calibrated first with ``calib_algo``; the cache is written to ``calib_cache`` when that is
    given, else to a temporary file), or a QAT model's own Q/DQ scales."""
    opt = _native.BuildOptions()
    opt.device = _enum(_DEVICES, device, "device")
    opt.precision = _enum(_PRECISIONS, precision, "precision")
    opt.int8_mode = _enum(_INT8_MODES, int8_mode, "int8_mode")
    for field, value in (("shapes", shapes), ("min_shapes", min_shapes), ("opt_shapes", opt_shapes),
                         ("max_shapes", max_shapes)):
        if value:
            setattr(opt, field, {k: [int(d) for d in v] for k, v in value.items()})
    opt.fp16_layers, opt.fp32_layers = list(fp16_layers), list(fp32_layers)
    opt.precision_config, opt.timing_cache, opt.device_index = precision_config, timing_cache, device_index
    opt.input_formats, opt.output_formats = _formats(input_formats), _formats(output_formats)
    opt.kernel_policy = kernel_policy
    if calibration_data is None:
        opt.calib_cache = calib_cache
        return _native.build_engine(model, opt)
    with tempfile.TemporaryDirectory(prefix="qdeploy-calib-") as tmp:
        opt.calib_cache = calib_cache or os.path.join(tmp, "calib.cache")
        calibrate(model, calibration_data, algo=calib_algo, cache=opt.calib_cache, input_name=input_name)
        return _native.build_engine(model, opt)


def evaluate_classifier(engine: _native.Engine, data: Iterable[Any],
                        input_name: Optional[str] = None) -> _native.TopK:
    """Top-1/top-5 of a classifier engine over ``(inputs, labels)`` batches; returns the totals."""
    name = input_name or engine.inputs[0].name
    ctx = engine.create_context()
    count = c1 = c5 = 0
    for x, labels in data:
        out = ctx.run({name: _array(x)})
        logits = next(iter(out.values()))
        k = _native.top_k(logits.reshape(len(logits), -1), [int(v) for v in np.asarray(labels).reshape(-1)])
        count, c1, c5 = count + k.count, c1 + k.correct1, c5 + k.correct5
    return TopKTotals(count, c1, c5)


def evaluate_detector(detector: _native.Detector, images: str, annotations: str, class_map: str = "sorted",
                      limit: int = 0, batch: int = 1) -> Dict[str, float]:
    """COCO box AP/AR of ``detector`` on the images an instances JSON lists (``images``: their folder), as
    ``qdeploy eval --images --annotations`` computes them; ``limit`` images at most (0: all)."""
    import json

    with open(annotations) as f:
        listed = json.load(f).get("images", [])
    if limit > 0:
        listed = listed[:limit]
    ids, dets = [], []
    for start in range(0, len(listed), batch):
        group = listed[start:start + batch]
        dets += detector.detect([_native.read_image(os.path.join(images, im["file_name"])) for im in group])
        ids += [int(im["id"]) for im in group]
    return _native.coco_eval_detections(annotations, ids, dets, detector.num_classes, class_map)


class TopKTotals:
    """Top-k counts over a whole evaluation."""

    def __init__(self, count: int, correct1: int, correct5: int):
        self.count, self.correct1, self.correct5 = count, correct1, correct5

    @property
    def top1(self) -> float:
        return self.correct1 / self.count if self.count else 0.0

    @property
    def top5(self) -> float:
        return self.correct5 / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return f"TopKTotals(count={self.count}, top1={self.top1:.4f}, top5={self.top5:.4f})"
