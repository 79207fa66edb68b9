"""Fake quantization for QAT and Q/DQ export (a small, self-contained stand-in for pytorch-quantization)."""

from .calib import METHODS
from .calibrate import calibrate, set_quantization
from .export import export_qat_classifier, export_qat_detector
from .placement import activation_quantizers, keep_float, quantize_model
from .quantizer import TensorQuantizer

__all__ = [
    "METHODS", "TensorQuantizer", "activation_quantizers", "calibrate", "export_qat_classifier",
    "export_qat_detector", "keep_float", "quantize_model", "set_quantization",
]
