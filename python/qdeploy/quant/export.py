"""Export a fake-quantized model to ONNX with QuantizeLinear/DequantizeLinear pairs (opset 13, zero point 0, int8).

Activation pairs carry a scalar scale; weight pairs a per-output-channel scale with axis=0, so an importer reads
``scale = amax / 127`` straight from the graph, which is how qdeploy's qat2ptq and TensorRT consume QAT models.
"""

import copy

import torch

from ..onnx_export import export_classifier, export_detector
from .quantizer import TensorQuantizer


def prepare_qat_for_export(model):
    """A CPU, eval-mode copy in export mode, with quantized weights clamped to [-amax, amax] per channel so that
    ONNX's [-128, 127] range and training's narrow [-127, 127] range quantize them identically. Layers whose weight
    quantizer is off (``--float-layers``) keep the weights they trained to."""
    model = copy.deepcopy(model).cpu().float().eval()
    for q in model.modules():
        if isinstance(q, TensorQuantizer):
            if not q.calibrated:
                raise RuntimeError("cannot export an uncalibrated quantizer: calibrate the model first")
            q.export_mode = True
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "weight_quantizer") and module.weight_quantizer.enabled:
                amax = module.weight_quantizer.amax.view(-1, *([1] * (module.weight.dim() - 1)))
                module.weight.copy_(torch.maximum(torch.minimum(module.weight, amax), -amax))
    return model


def export_qat_detector(model, path, imgsz=640, head_only=False, dynamic=False, batch=1, **export_args):
    export_detector(prepare_qat_for_export(model), path, imgsz, head_only, dynamic, batch, prepared=True, **export_args)


def export_qat_classifier(model, path, dynamic=False, batch=1, **export_args):
    export_classifier(prepare_qat_for_export(model), path, dynamic, batch, prepared=True, **export_args)
