"""Q/DQ placement: which modules get quantizers, and which quantizers must share one scale.

Placement 1 (TensorRT style, the GPU's fusion rules): quantizers on the inputs and weights of convs and linears, on
max-pool inputs and on both inputs of residual adds. Quantizers that see the same tensor, or tensors that a Concat or
MaxPool ties together (its inputs and its output), are replaced by one shared quantizer. One scale across a Concat
or MaxPool lets those run on int8 without requantizing; it is the rule cuDLA-samples apply through the exported graph.
Here the ties are found by running the model once and following tensor identities through Concat and MaxPool.

Placement 2 (every layer): placement 1's quantizers without ties, plus SiLU (its input and the Sigmoid output) and
Concat inputs, so that every tensor an int8-only accelerator sees has a scale of its own from training.
"""

import re

import torch
from torch import nn

from ..models.blocks import Add, Concat
from ..models.fuse import fuse_conv_bn
from .modules import QuantAdd, QuantConcat, QuantConv2d, QuantLinear, QuantMaxPool2d, QuantSiLU
from .quantizer import TensorQuantizer, activation_quantizer

PLACEMENT_1 = {nn.Conv2d: QuantConv2d, nn.Linear: QuantLinear, nn.MaxPool2d: QuantMaxPool2d, Add: QuantAdd}
PLACEMENT_2 = {**PLACEMENT_1, nn.SiLU: QuantSiLU, Concat: QuantConcat}


def quantize_model(model, placement=1, example_input=None):
    """Fold BatchNorm, then replace modules in place with quantized ones; returns ``model``.

    ``example_input`` (placement 1 only) drives the forward pass that finds the ties; by default a 1x3x64x64 zero
    image, which suits the YOLO models (multiples of 32) and the 32x32 classifiers alike.
    """
    if placement not in (1, 2):
        raise ValueError(f"placement must be 1 (TensorRT style) or 2 (every layer), not {placement!r}")
    fuse_conv_bn(model)  # weights must be quantized as deployed: after BN folding
    device = next(model.parameters()).device
    _replace(model, PLACEMENT_1 if placement == 1 else PLACEMENT_2)
    model.to(device)
    if placement == 1:
        if example_input is None:
            example_input = torch.zeros(1, 3, 64, 64, device=device)
        tie_quantizers(model, example_input)
    return model


def _replace(module, table):
    for name, child in module.named_children():
        quant_cls = table.get(type(child))
        if quant_cls is not None:
            setattr(module, name, quant_cls.from_float(child))
        else:
            _replace(child, table)


def activation_quantizers(model):
    """Unique per-tensor quantizers (shared ones once)."""
    return [m for m in model.modules() if isinstance(m, TensorQuantizer) and m.axis is None]


def tie_quantizers(model, example_input):
    """Make quantizers whose inputs fall in one scale group the same module; returns the number of groups tied."""
    groups = _scale_groups(model, example_input)
    holders = {}  # quantizer -> [(parent module, attribute name)]
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, TensorQuantizer):
                holders.setdefault(child, []).append((parent, name))
    tied = 0
    for members in groups:
        leader, *rest = members
        for q in rest:
            for parent, name in holders.get(q, []):
                setattr(parent, name, leader)
        tied += bool(rest)
    return tied


def _scale_groups(model, example_input):
    """Run the model once with quantizers off; union tensors through Concat and MaxPool; group activation
    quantizers by the union of the tensor each one reads. Groups are returned in first-use order."""
    parent = {}

    def find(t):
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    def union(a, b):
        parent[find(a)] = find(b)

    keep_alive, reads = [], []  # tensor ids are only unique while the tensors live

    def on_quantizer(q, inputs):
        keep_alive.append(inputs[0])
        reads.append((q, id(inputs[0])))

    def on_scale_preserving(module, inputs, output):
        tensors = list(inputs[0]) if isinstance(inputs[0], (list, tuple)) else [inputs[0]]
        keep_alive.extend(tensors + [output])
        for t in tensors:
            union(id(t), id(output))

    quantizers = activation_quantizers(model)
    hooks = [q.register_forward_pre_hook(on_quantizer) for q in quantizers]
    hooks += [m.register_forward_hook(on_scale_preserving) for m in model.modules()
              if isinstance(m, (Concat, nn.MaxPool2d))]
    saved = [(q, q.enabled) for q in quantizers]
    was_training = model.training
    try:
        for q in quantizers:
            q.enabled = False
        model.eval()
        with torch.no_grad():
            model(example_input)
    finally:
        for h in hooks:
            h.remove()
        for q, enabled in saved:
            q.enabled = enabled
        model.train(was_training)

    groups = {}
    for q, tensor_id in reads:
        members = groups.setdefault(find(tensor_id), [])
        if q not in members:
            members.append(q)
    return list(groups.values())


def keep_float(model, patterns):
    """Leave the quantized convs and linears whose module names (e.g. ``model.24.m.0``) fully match one of the regexes
    ``patterns`` in float, as a deployment with those layers in fp16 runs them: weight quantizer off, and the input
    quantizer replaced by a disabled one of their own, so that a quantizer tied with other readers of the same
    tensor stays on for those. Returns the names."""
    compiled = [re.compile(p) for p in patterns]
    names = []
    for name, module in model.named_modules():
        if isinstance(module, (QuantConv2d, QuantLinear)) and any(r.fullmatch(name) for r in compiled):
            module.weight_quantizer.enabled = False
            module.input_quantizer = activation_quantizer()
            module.input_quantizer.enabled = False
            names.append(name)
    return names
