"""Fold BatchNorm into the preceding convolution, as deployment does before export.

Folding first matters for quantization too: per-channel weight scales must be those of the folded weights, because
the folded weights are what the int8 kernels multiply.
"""

import torch
from torch import nn

from .blocks import Conv


@torch.no_grad()
def fold_bn(conv, bn):
    """Return a new Conv2d with bias computing bn(conv(x)) in eval mode."""
    fused = nn.Conv2d(
        conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
        conv.dilation, conv.groups, bias=True,
    ).to(conv.weight.device)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    fused.bias.copy_((bias - bn.running_mean) * scale + bn.bias)
    return fused


def fuse_conv_bn(model):
    """Fold every Conv2d+BatchNorm2d pair in place: YOLO ``Conv`` blocks and adjacent pairs inside nn.Sequential."""
    for module in model.modules():
        if isinstance(module, Conv) and isinstance(module.bn, nn.BatchNorm2d):
            module.conv = fold_bn(module.conv, module.bn)
            module.bn = nn.Identity()
        elif isinstance(module, nn.Sequential):
            for i in range(len(module) - 1):
                if isinstance(module[i], nn.Conv2d) and isinstance(module[i + 1], nn.BatchNorm2d):
                    module[i] = fold_bn(module[i], module[i + 1])
                    module[i + 1] = nn.Identity()
    return model
