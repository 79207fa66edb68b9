"""YOLOv5 detection models in the ultralytics v6/v7 form (6x6 stem, C3, SPPF) and the v5.0 form (Focus, SPP, C3).

The layer tables below are ultralytics' yolov5*.yaml files written as Python data, and ``parse_layers`` applies the
depth/width multiples the same way ultralytics' parse_model does, so the parameter counts agree exactly with theirs
(yolov5s v6.0 at nc=80: 7,235,389). ``Detect`` returns, depending on how it is asked:
  - training mode: per-level raw predictions shaped [N, na, H, W, 5+nc] (what the loss wants);
  - eval mode: decoded boxes [N, sum(na*H*W), 5+nc] in input pixels (ultralytics v6 decode, what ONNX export ships);
  - ``head_only``: the three raw 1x1-conv outputs [N, na*(5+nc), H, W], before sigmoid (cuDLA-style export where
    decoding runs outside the network).
"""

import math

import torch
from torch import nn

from .blocks import C3, SPP, SPPF, Concat, Conv, Focus

ANCHORS = (
    (10, 13, 16, 30, 33, 23),  # P3/8
    (30, 61, 62, 45, 59, 119),  # P4/16
    (116, 90, 156, 198, 373, 326),  # P5/32
)
STRIDES = (8, 16, 32)

# (from, repeats, module, args) exactly as in ultralytics' yaml files; widths are for multiple 1.0.
BACKBONE_V6 = (
    (-1, 1, Conv, (64, 6, 2, 2)),  # 0 P1/2
    (-1, 1, Conv, (128, 3, 2)),  # 1 P2/4
    (-1, 3, C3, (128,)),
    (-1, 1, Conv, (256, 3, 2)),  # 3 P3/8
    (-1, 6, C3, (256,)),
    (-1, 1, Conv, (512, 3, 2)),  # 5 P4/16
    (-1, 9, C3, (512,)),
    (-1, 1, Conv, (1024, 3, 2)),  # 7 P5/32
    (-1, 3, C3, (1024,)),
    (-1, 1, SPPF, (1024, 5)),  # 9
)
BACKBONE_V5 = (
    (-1, 1, Focus, (64, 3)),  # 0 P1/2
    (-1, 1, Conv, (128, 3, 2)),  # 1 P2/4
    (-1, 3, C3, (128,)),
    (-1, 1, Conv, (256, 3, 2)),  # 3 P3/8
    (-1, 9, C3, (256,)),
    (-1, 1, Conv, (512, 3, 2)),  # 5 P4/16
    (-1, 9, C3, (512,)),
    (-1, 1, Conv, (1024, 3, 2)),  # 7 P5/32
    (-1, 1, SPP, (1024, (5, 9, 13))),
    (-1, 3, C3, (1024, False)),  # 9
)
HEAD = (
    (-1, 1, Conv, (512, 1, 1)),  # 10
    (-1, 1, nn.Upsample, (None, 2, "nearest")),
    ((-1, 6), 1, Concat, (1,)),  # cat backbone P4
    (-1, 3, C3, (512, False)),  # 13
    (-1, 1, Conv, (256, 1, 1)),  # 14
    (-1, 1, nn.Upsample, (None, 2, "nearest")),
    ((-1, 4), 1, Concat, (1,)),  # cat backbone P3
    (-1, 3, C3, (256, False)),  # 17 (P3/8)
    (-1, 1, Conv, (256, 3, 2)),
    ((-1, 14), 1, Concat, (1,)),  # cat head P4
    (-1, 3, C3, (512, False)),  # 20 (P4/16)
    (-1, 1, Conv, (512, 3, 2)),
    ((-1, 10), 1, Concat, (1,)),  # cat head P5
    (-1, 3, C3, (1024, False)),  # 23 (P5/32)
)
DETECT_FROM = (17, 20, 23)

# name -> (depth multiple, width multiple)
SCALES = {"n": (0.33, 0.25), "s": (0.33, 0.50), "m": (0.67, 0.75), "l": (1.0, 1.0), "x": (1.33, 1.25)}


def make_divisible(x, divisor=8):
    return int(math.ceil(x / divisor) * divisor)


class Detect(nn.Module):
    """Three 1x1 convs (one per level) predicting na*(5+nc) channels, plus the v6 box decode."""

    def __init__(self, nc, ch, anchors=ANCHORS, strides=STRIDES):
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.head_only = False
        # Anchors in input pixels, [nl, na, 2]; buffers so they travel with the device and the checkpoint.
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(self.nl, self.na, 2))
        self.register_buffer("stride", torch.tensor(strides, dtype=torch.float32))
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)
        self._grids = {}
        self._init_biases()

    def _init_biases(self):
        """ultralytics' prior: ~8 objects per 640 image, and class probability ~0.6/nc, so early losses are sane."""
        with torch.no_grad():
            for conv, s in zip(self.m, self.stride.tolist()):
                b = conv.bias.view(self.na, -1)
                b[:, 4] += math.log(8 / (640 / s) ** 2)
                b[:, 5:] += math.log(0.6 / (self.nc - 0.99))

    def forward(self, xs):
        feats = [conv(x) for conv, x in zip(self.m, xs)]
        if self.head_only:
            return feats
        levels = self.levels(feats)
        return levels if self.training else self.decode(levels)

    def levels(self, feats):
        """[N, na*no, H, W] -> [N, na, H, W, no] for each level."""
        out = []
        for f in feats:
            _, _, ny, nx = f.shape
            out.append(f.view(-1, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        return out

    def decode(self, levels):
        """ultralytics v6: xy = (2*sig - 0.5 + grid) * stride, wh = (2*sig)^2 * anchor; output [N, boxes, no]."""
        out = []
        for i, p in enumerate(levels):
            _, _, ny, nx, _ = p.shape
            y = p.sigmoid()
            anchor = self.anchors[i].to(p.dtype).view(1, self.na, 1, 1, 2)
            xy = (y[..., 0:2] * 2 + self._grid(ny, nx, p.dtype, p.device)) * self.stride[i].to(p.dtype)
            wh = (y[..., 2:4] * 2) ** 2 * anchor
            out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(-1, self.na * ny * nx, self.no))
        return torch.cat(out, 1)

    def _grid(self, ny, nx, dtype, device):
        """Cell offsets minus 0.5, [1, 1, ny, nx, 2] as (x, y). Cached outside autograd so that an ONNX trace taken
        after one warm-up forward records a single constant instead of the ops that built it."""
        key = (int(ny), int(nx), dtype, device)  # sizes are traced tensors during ONNX export
        if key not in self._grids:
            with torch.no_grad():
                yv, xv = torch.meshgrid(
                    torch.arange(ny, device=device, dtype=dtype), torch.arange(nx, device=device, dtype=dtype),
                    indexing="ij",
                )
                self._grids[key] = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2) - 0.5
        return self._grids[key]


def parse_layers(table, depth, width, nc, ch_in=3):
    """Instantiate a layer table the way ultralytics' parse_model does; returns the layers and the indices to keep."""
    layers, channels, save = [], [], set()
    for i, (f, n, module, args) in enumerate(table):
        n = max(round(n * depth), 1) if n > 1 else n
        if module in (Conv, C3, SPP, SPPF, Focus):
            c1, c2 = channels[f] if channels else ch_in, make_divisible(args[0] * width, 8)
            args = [c1, c2, *args[1:]]
            if module is C3:
                args.insert(2, n)
                n = 1
        elif module is Concat:
            c2 = sum(channels[x] for x in f)
        elif module is Detect:
            c2 = None
            args = [nc, [channels[x] for x in f]]
        else:
            c2 = channels[f]
        layer = nn.Sequential(*(module(*args) for _ in range(n))) if n > 1 else module(*args)
        layer.f, layer.i = f, i
        save.update(x for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(layer)
        channels.append(c2)
    return layers, save


class YOLOv5(nn.Module):
    """A YOLOv5 detector; ``model.model`` holds the numbered layers (ultralytics' indices, 24 is Detect)."""

    def __init__(self, scale="s", nc=80, version="v6"):
        super().__init__()
        if scale not in SCALES:
            raise ValueError(f"unknown YOLOv5 scale {scale!r}; expected one of {sorted(SCALES)}")
        if version not in ("v6", "v5"):
            raise ValueError(f"unknown YOLOv5 version {version!r}; expected 'v6' (SPPF) or 'v5' (Focus+SPP)")
        depth, width = SCALES[scale]
        backbone = BACKBONE_V6 if version == "v6" else BACKBONE_V5
        table = backbone + HEAD + ((DETECT_FROM, 1, Detect, ()),)
        layers, save = parse_layers(table, depth, width, nc)
        self.model = nn.Sequential(*layers)
        self.save = sorted(save)
        self.nc = nc
        self.scale, self.version = scale, version

    @property
    def detect(self):
        return self.model[-1]

    def raw_levels(self, x):
        """Per-level raw predictions [N, na, H, W, 5+nc] in any mode (eval keeps BN statistics frozen), for
        validation losses and for distillation targets."""
        self.detect.head_only = True
        try:
            return self.detect.levels(self(x))
        finally:
            self.detect.head_only = False

    def forward(self, x):
        outputs = []
        for layer in self.model:
            if layer.f != -1:
                x = outputs[layer.f] if isinstance(layer.f, int) else [x if j == -1 else outputs[j] for j in layer.f]
            x = layer(x)
            outputs.append(x if layer.i in self.save else None)
        return x
