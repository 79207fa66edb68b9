"""The calibration pass: feed N batches through the model with every activation quantizer collecting statistics
(and passing values through unchanged, so statistics are those of the float model), then set each amax."""

import torch

from .calib import METHODS
from .placement import activation_quantizers


@torch.no_grad()
def calibrate(model, batches, method="mse", percentile=99.99, num_batches=None):
    """``batches`` yields image tensors already on the model's device and scaled to [0, 1]; returns batches used."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; expected one of {METHODS}")
    for module in model.modules():
        if hasattr(module, "calibrate_weight"):
            module.calibrate_weight()
    quantizers = activation_quantizers(model)
    was_training = model.training
    model.eval()
    used = 0
    try:
        for q in quantizers:
            q.start_calibration(method)
        for images in batches:
            if num_batches is not None and used >= num_batches:
                break
            model(images)
            used += 1
        if used == 0:
            raise ValueError("calibration got no batches: check the data path")
        for q in quantizers:
            q.finish_calibration(method, percentile)
    finally:
        for q in quantizers:
            q._calibrator = None
        model.train(was_training)
    return used


def set_quantization(model, enabled, kind="all"):
    """Turn quantizers on or off: all of them (off gives the float model back, e.g. for a side-by-side evaluation),
    or one kind, "weights" (the convs' and linears' weight quantizers) or "activations" (the others)."""
    if kind not in ("all", "weights", "activations"):
        raise ValueError(f"unknown quantizer kind {kind!r}")
    weights = {id(m.weight_quantizer) for m in model.modules() if hasattr(m, "weight_quantizer")}
    for q in model.modules():
        if hasattr(q, "export_mode") and (kind == "all" or (id(q) in weights) == (kind == "weights")):
            q.enabled = enabled
