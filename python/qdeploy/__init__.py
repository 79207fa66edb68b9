"""qdeploy from Python.

Two halves share this package:

- the PyTorch side (``qdeploy.models``, ``qdeploy.train``, ``qdeploy.qat``, ``qdeploy.export``, ...): model
  definitions, training, quantization-aware training and ONNX export; it needs torch, never the native module;
- the deployment side: the C++ library's API through the native module ``qdeploy._native`` (pybind11; built by
  CMake into ``BUILD/python/qdeploy/`` and installed beside these files), re-exported here with the keyword-argument
  helpers of ``qdeploy.deploy``: ``qdeploy.build``, ``qdeploy.load``, contexts, the detector, ``qdeploy.calibrate``,
  ``qdeploy.sensitivity``, scoring. docs/python.md is the guide.

Importing the package needs neither half's dependencies; a deployment name used without the native module raises
an ImportError that says how to build it.
"""

# A build tree's BUILD/python/qdeploy (the native module) joins this package when BUILD/python is on sys.path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

_DEPLOY_NAMES = (
    # qdeploy._native
    "BuildOptions", "Calibration", "CalibrationOptions", "DataType", "Detector", "DetectorOptions", "Device",
    "DeviceTensor", "Engine", "Error", "Event", "ExecutionContext", "ExternalSemaphore", "InvalidArgumentError",
    "Int8Mode", "IoFormat", "LayerInfo", "LayerSensitivity", "LayerTime", "Layout", "Letterboxed", "MemoryReport",
    "NotFoundError", "Precision", "SemaphoreType", "SensitivityOptions", "SensitivityReport", "Stream",
    "TensorInfo", "TopK", "UnsupportedError", "class_name", "coco_eval", "coco_eval_detections", "has_cuda",
    "is_plan", "load", "memory_view", "read_image", "top_k", "version",
    # qdeploy.deploy
    "DatasetCalibrator", "TopKTotals", "build", "calibrate", "evaluate_classifier", "evaluate_detector",
    "sensitivity",
)


def __getattr__(name):
    if name not in _DEPLOY_NAMES:
        raise AttributeError(f"module 'qdeploy' has no attribute '{name}'")
    try:
        from . import _native, deploy
    except ImportError as e:
        raise ImportError(
            f"qdeploy.{name} needs the native module qdeploy._native ({e}): build it with CMake (pybind11 found: "
            "apt-get install python3-pybind11 python3-dev) and put BUILD/python and python/ on PYTHONPATH, or "
            "`cmake --install BUILD` (docs/python.md)") from e
    value = getattr(deploy, name) if hasattr(deploy, name) else getattr(_native, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_DEPLOY_NAMES))
