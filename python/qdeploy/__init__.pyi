# The names `import qdeploy` resolves lazily (python/qdeploy/__init__.py), for editors and type checkers.
from ._native import (BuildOptions, Calibration, CalibrationOptions, DataType, Detector, DetectorOptions, Device,
                      DeviceTensor, Engine, Error, Event, ExecutionContext, ExternalSemaphore, InvalidArgumentError,
                      Int8Mode, IoFormat, LayerInfo, LayerSensitivity, LayerTime, Layout, Letterboxed, MemoryReport,
                      NotFoundError, Precision, SemaphoreType, SensitivityOptions, SensitivityReport, Stream,
                      TensorInfo, TopK, UnsupportedError, class_name, coco_eval, coco_eval_detections, has_cuda,
                      is_plan, load, memory_view, read_image, top_k, version)
from .deploy import (DatasetCalibrator, TopKTotals, build, calibrate, evaluate_classifier, evaluate_detector,
                     sensitivity)
