"""Multiply-accumulate counting for Conv2d and Linear layers (what dominates a CNN), via forward hooks.

GFLOPs are reported as 2 * MACs, the convention of ultralytics' model summaries (yolov5s at 640: ~16.5).
"""

import torch
from torch import nn


def count_macs(model, input_shape):
    """MACs of one forward pass on a zero tensor of ``input_shape`` (bias adds not counted)."""
    total = [0]

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
        else:
            k = module.in_features
        total[0] += output.numel() * k

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(input_shape, device=next(model.parameters()).device))
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return total[0]


def gflops(model, imgsz=640, channels=3):
    """2 * MACs / 1e9 for one image of imgsz x imgsz."""
    return 2 * count_macs(model, (1, channels, imgsz, imgsz)) / 1e9
