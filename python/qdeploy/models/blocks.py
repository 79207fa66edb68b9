"""Building blocks of YOLOv5, laid out as ultralytics lays them out.

Module and attribute names (conv/bn/act, cv1/cv2/cv3, m) follow ultralytics so that state-dict keys, layer names in
exported ONNX graphs and parameter counts line up with what users of YOLOv5 know. Concatenation and the residual add
are modules (``Concat``, ``Add``) rather than inline operators so that quantization can find and wrap them.
"""

import torch
from torch import nn

# ultralytics' BatchNorm settings (set in its initialize_weights); they change training dynamics, not parameter counts.
BN_EPS = 1e-3
BN_MOMENTUM = 0.03


def autopad(k, p=None):
    """'Same' padding for odd kernels; explicit padding wins (the 6x6 stem uses p=2)."""
    return k // 2 if p is None else p


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU. After ``fuse_conv_bn`` the BN is an Identity and the conv has a bias."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Add(nn.Module):
    """Elementwise sum of two tensors; a module so that Q/DQ placement can quantize both inputs."""

    def forward(self, a, b):
        return a + b


class Concat(nn.Module):
    """Concatenation along ``dim``; a module so that Q/DQ placement can see its inputs and output."""

    def __init__(self, dim=1):
        super().__init__()
        self.d = dim

    def forward(self, xs):
        return torch.cat(list(xs), self.d)


class Bottleneck(nn.Module):
    """1x1 then 3x3 conv, with a residual add when ``shortcut`` and the widths match."""

    def __init__(self, c1, c2, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = Add() if shortcut and c1 == c2 else None

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return self.add(x, y) if self.add is not None else y


class C3(nn.Module):
    """CSP bottleneck with three convs: two parallel 1x1 branches, bottlenecks on one, concat, 1x1 fuse."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))
        self.cat = Concat(1)

    def forward(self, x):
        return self.cv3(self.cat([self.m(self.cv1(x)), self.cv2(x)]))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast form (v6+): three chained 5x5 max pools, equivalent to SPP(5, 9, 13)."""

    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)
        self.cat = Concat(1)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(self.cat([x, y1, y2, self.m(y2)]))


class SPP(nn.Module):
    """Spatial pyramid pooling of YOLOv5 v5.0: parallel 5/9/13 max pools."""

    def __init__(self, c1, c2, k=(5, 9, 13)):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * (len(k) + 1), c2, 1, 1)
        self.m = nn.ModuleList(nn.MaxPool2d(kernel_size=x, stride=1, padding=x // 2) for x in k)
        self.cat = Concat(1)

    def forward(self, x):
        x = self.cv1(x)
        return self.cv2(self.cat([x] + [m(x) for m in self.m]))


class Focus(nn.Module):
    """Space-to-depth stem of v5.0: four pixel-phase slices stacked on channels, then a conv."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s, p, g, act)
        self.cat = Concat(1)

    def forward(self, x):
        return self.conv(self.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]]))
