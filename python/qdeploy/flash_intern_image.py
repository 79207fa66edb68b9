"""FlashInternImage (OpenGVLab/DCNv4's classification model) on the pure-PyTorch DCNv4, and its ONNX export.

The architecture of ``classification/models/flash_intern_image.py`` (the T configuration of
``configs/flash_intern_image_t_1k_224.yaml``), for inference:

- stem: 3x3/2 conv to C/2, LayerNorm, GELU, 3x3/2 conv to C, LayerNorm (channels last; the LayerNorms over channels);
- four stages of tokens ``[N, H*W, C]``; a block is
  ``x = x + g1 * DCN(LN(x))`` then ``x = x + g2 * MLP(LN(x))`` (``g1, g2``: per-channel layer scale, or absent), where
  DCN is ``output_proj(DCNv4(value_proj(x), offset_mask(x)))`` (the Linear projections around the op, all reading one
  input) and MLP ``fc2(GELU(fc1(x)))`` with ratio 4; each stage ends with a LayerNorm, and the first three with a
  3x3/2 conv (no bias) to 2C and a LayerNorm (the downsampling);
- head: 1x1 conv (no bias) to 1.5x the last width, BatchNorm, GELU, global average pool, Linear to the classes.

``CONFIGS["t"]``: channels 64, depths 4/4/18/4, groups 4/8/16/32 (16 channels a group everywhere), offset scale 1,
no layer scale (the official T), 30.0M parameters. ``CONFIGS["mini"]``: the same structure at width 16 and depths
1/1/2/1, for tests. ``CONFIGS["fmnist"]``: width 32, three stages of depths 1/2/1 (groups 2/4/8), 0.43M parameters,
for Fashion-MNIST's 32x32 inputs (models/fii_fmnist.onnx; trained with ``qdeploy.train_cls --model fii``).

The export (``export_onnx``, and ``python3 -m qdeploy.flash_intern_image``) writes DCNv4 as one ``ai.qdeploy::DCNv4``
node (qdeploy.dcnv4). ``fused=True`` writes each block's ``value_proj`` and ``offset_mask`` as one MatMul with the
weights concatenated (value columns first) and two Slices of its last axis, the DCNv4 seed's fused-input form; qdeploy's
``fuse_parallel_linear`` pass makes the same graph from an unfused export.
"""

import argparse
import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from .dcnv4 import DOMAIN, VERSION, DCNv4Function, dcnv4

CONFIGS = {
    "t": dict(channels=64, depths=(4, 4, 18, 4), groups=(4, 8, 16, 32)),
    "mini": dict(channels=16, depths=(1, 1, 2, 1), groups=(1, 2, 4, 8)),
    # Fashion-MNIST at 32x32 (qdeploy.data.to_classifier_input): the stem leaves 8x8, so three stages (8x8, 4x4, 2x2);
    # a fourth would run DCNv4 on 1x1 maps, where its 3x3 sampling sees one pixel and the zero border.
    "fmnist": dict(channels=32, depths=(1, 2, 1), groups=(2, 4, 8)),
}
LN_EPS = 1e-6  # the official model's LayerNorm epsilon


class ChannelsLastNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor, returned channels last (NHWC) or first."""

    def __init__(self, channels, channels_last_out):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=LN_EPS)
        self.channels_last_out = channels_last_out

    def forward(self, x):
        x = self.norm(x.permute(0, 2, 3, 1))
        return x if self.channels_last_out else x.permute(0, 3, 1, 2)


class Stem(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels // 2, 3, 2, 1)
        self.norm1 = ChannelsLastNorm(channels // 2, channels_last_out=False)
        self.act = nn.GELU()
        self.conv2 = nn.Conv2d(channels // 2, channels, 3, 2, 1)
        self.norm2 = ChannelsLastNorm(channels, channels_last_out=True)

    def forward(self, x):  # NCHW image -> NHWC features
        return self.norm2(self.conv2(self.act(self.norm1(self.conv1(x)))))


class DCNv4Layer(nn.Module):
    """The official DCNv4 module (3x3, stride 1, pad 1, no depthwise conv before the offsets): ``value_proj`` and
    ``offset_mask`` Linear layers on the same tokens, the op, ``output_proj``. ``fused`` computes the two input
    projections as one product with concatenated weights and slices it (same numbers up to rounding)."""

    def __init__(self, channels, group, offset_scale=1.0, output_bias=False):
        super().__init__()
        if channels % group:
            raise ValueError(f"channels {channels} must be a multiple of group {group}")
        self.channels, self.group, self.group_channels = channels, group, channels // group
        self.offset_scale = offset_scale
        k = group * 9
        self.offset_mask = nn.Linear(channels, int(math.ceil(3 * k / 8) * 8))  # padded to a multiple of 8 as official
        self.value_proj = nn.Linear(channels, channels)
        self.output_proj = nn.Linear(channels, channels, bias=output_bias)
        self.fused = False

    def forward(self, x, hw):
        h, w = hw
        c = self.channels
        if self.fused:
            weight = torch.cat([self.value_proj.weight, self.offset_mask.weight], 0)
            bias = torch.cat([self.value_proj.bias, self.offset_mask.bias], 0)
            both = F.linear(x, weight, bias)
            value, offset_mask = both[..., :c], both[..., c:]
        else:
            value, offset_mask = self.value_proj(x), self.offset_mask(x)
        value = value.reshape(-1, h, w, c)
        offset_mask = offset_mask.reshape(-1, h, w, self.offset_mask.out_features)
        # The autograd Function only writes the ONNX node; dcnv4 itself is plain differentiable tensor ops (training).
        op = DCNv4Function.apply if torch.onnx.is_in_onnx_export() else dcnv4
        y = op(value, offset_mask, 3, 3, 1, 1, 1, 1, 1, 1, self.group, self.group_channels, float(self.offset_scale),
               256, 0)
        return self.output_proj(y.reshape(-1, h * w, c))


class Mlp(nn.Module):
    def __init__(self, channels, ratio=4.0, fc2_bias=False):
        super().__init__()
        hidden = int(channels * ratio)
        self.fc1 = nn.Linear(channels, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, channels, bias=fc2_bias)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm residual block: DCNv4 then MLP, each scaled per channel when ``layer_scale`` is given."""

    def __init__(self, channels, group, mlp_ratio, layer_scale, offset_scale, dcn_output_bias, mlp_fc2_bias):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels, eps=LN_EPS)
        self.dcn = DCNv4Layer(channels, group, offset_scale, dcn_output_bias)
        self.norm2 = nn.LayerNorm(channels, eps=LN_EPS)
        self.mlp = Mlp(channels, mlp_ratio, mlp_fc2_bias)
        self.layer_scale = layer_scale is not None
        if self.layer_scale:
            self.gamma1 = nn.Parameter(layer_scale * torch.ones(channels))
            self.gamma2 = nn.Parameter(layer_scale * torch.ones(channels))

    def forward(self, x, hw):
        if self.layer_scale:
            x = x + self.gamma1 * self.dcn(self.norm1(x), hw)
            return x + self.gamma2 * self.mlp(self.norm2(x))
        x = x + self.dcn(self.norm1(x), hw)
        return x + self.mlp(self.norm2(x))


class Downsample(nn.Module):
    """3x3/2 conv (no bias) to twice the channels, then LayerNorm; tokens in, tokens out."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, 2 * channels, 3, 2, 1, bias=False)
        self.norm = nn.LayerNorm(2 * channels, eps=LN_EPS)

    def forward(self, x, hw):
        h, w = hw
        x = self.conv(x.reshape(-1, h, w, x.shape[-1]).permute(0, 3, 1, 2))
        ho, wo = (h + 1) // 2, (w + 1) // 2
        x = self.norm(x.permute(0, 2, 3, 1))
        return x.reshape(-1, ho * wo, x.shape[-1]), (ho, wo)


class Stage(nn.Module):
    def __init__(self, channels, depth, group, downsample, **block_args):
        super().__init__()
        self.blocks = nn.ModuleList([Block(channels, group, **block_args) for _ in range(depth)])
        self.norm = nn.LayerNorm(channels, eps=LN_EPS)
        self.downsample = Downsample(channels) if downsample else None

    def forward(self, x, hw):
        for blk in self.blocks:
            x = blk(x, hw)
        x = self.norm(x)
        if self.downsample is not None:
            x, hw = self.downsample(x, hw)
        return x, hw


class FlashInternImage(nn.Module):
    """FlashInternImage classifier: NCHW images ``[N, 3, H, W]`` (H, W multiples of 32) -> logits ``[N, classes]``."""

    def __init__(self, channels=64, depths=(4, 4, 18, 4), groups=(4, 8, 16, 32), num_classes=1000, mlp_ratio=4.0,
                 layer_scale=None, offset_scale=1.0, cls_scale=1.5, dcn_output_bias=False, mlp_fc2_bias=False):
        super().__init__()
        if len(depths) != len(groups):
            raise ValueError(f"depths {depths} and groups {groups} must have one entry per stage")
        self.patch_embed = Stem(channels)
        block_args = dict(mlp_ratio=mlp_ratio, layer_scale=layer_scale, offset_scale=offset_scale,
                          dcn_output_bias=dcn_output_bias, mlp_fc2_bias=mlp_fc2_bias)
        n = len(depths)
        self.levels = nn.ModuleList([Stage(channels * 2 ** i, depths[i], groups[i], i < n - 1, **block_args)
                                     for i in range(n)])
        features = channels * 2 ** (n - 1)
        head = int(features * cls_scale)
        self.conv_head = nn.Sequential(nn.Conv2d(features, head, 1, bias=False), nn.BatchNorm2d(head), nn.GELU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(head, num_classes)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        # The official initialization: truncated normal Linear weights, zero biases; DCNv4's offsets start at zero
        # (randomize_offsets gives an untrained model offsets that move the sampling points).
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, DCNv4Layer):
            nn.init.zeros_(m.offset_mask.weight)
            nn.init.zeros_(m.offset_mask.bias)
            nn.init.xavier_uniform_(m.value_proj.weight)
            nn.init.zeros_(m.value_proj.bias)
            nn.init.xavier_uniform_(m.output_proj.weight)
            if m.output_proj.bias is not None:
                nn.init.zeros_(m.output_proj.bias)

    def forward(self, x):
        h, w = int(x.shape[2]), int(x.shape[3])  # spatial sizes are fixed at export (Python ints in the trace)
        x = self.patch_embed(x)
        hw = ((h + 1) // 2 + 1) // 2, ((w + 1) // 2 + 1) // 2
        x = x.reshape(-1, hw[0] * hw[1], x.shape[-1])
        for level in self.levels:
            x, hw = level(x, hw)
        x = self.conv_head(x.reshape(-1, hw[0], hw[1], x.shape[-1]).permute(0, 3, 1, 2))
        return self.head(torch.flatten(self.avgpool(x), 1))


def flash_intern_image(config="t", num_classes=1000, **kwargs):
    """A FlashInternImage of CONFIGS[config] (``t`` or ``mini``); ``kwargs`` override the constructor's arguments
    (e.g. ``layer_scale=1.0``)."""
    if config not in CONFIGS:
        raise ValueError(f"unknown config {config!r}; expected one of {sorted(CONFIGS)}")
    return FlashInternImage(num_classes=num_classes, **{**CONFIGS[config], **kwargs})


# The official module names -> ours: the official model wraps its norms in nn.Sequential with permutes around them.
_OFFICIAL_NAMES = (
    (re.compile(r"^patch_embed\.norm([12])\.1\."), r"patch_embed.norm\1.norm."),
    (re.compile(r"^(levels\.\d+\.blocks\.\d+\.norm[12])\.0\."), r"\1."),
    (re.compile(r"^(levels\.\d+\.norm)\.0\."), r"\1."),
    (re.compile(r"^(levels\.\d+\.downsample\.norm)\.1\."), r"\1."),
    (re.compile(r"^conv_head\.1\.0\."), "conv_head.1."),
)


def official_state_dict(state):
    """An official FlashInternImage state dict (OpenGVLab/DCNv4's ``classification`` model, e.g. the ``model``
    entry of flash_intern_image_t_1k_224.pth) under this module's names."""
    out = {}
    for k, v in state.items():
        for pattern, repl in _OFFICIAL_NAMES:
            k = pattern.sub(repl, k)
        out[k] = v
    return out


def set_fused(model, fused):
    """Each DCNv4 layer computes value and offsets as one product (True) or two (False)."""
    for m in model.modules():
        if isinstance(m, DCNv4Layer):
            m.fused = bool(fused)
    return model


@torch.no_grad()
def randomize_offsets(model, seed=0, offset_std=0.5, mask_mean=None):
    """Random weights for the parts the official initialization leaves constant, so that an untrained model
    exercises them: DCNv4's offsets (a fraction of a pixel to a few pixels, points cross pixels and the border),
    its masks (around 1/K, K = 9 points, as trained models' are), layer scales and BatchNorm statistics."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g)

    for m in model.modules():
        if isinstance(m, DCNv4Layer):
            lin, c, k = m.offset_mask, m.channels, 9
            lin.weight.copy_(rand(*lin.weight.shape) * offset_std / math.sqrt(c))
            lin.bias.copy_(rand(*lin.bias.shape) * offset_std)
            for gi in range(m.group):  # mask columns of group gi: [gi*3K + 2K, gi*3K + 3K)
                lo = gi * 3 * k + 2 * k
                lin.weight[lo:lo + k] *= 0.2
                lin.bias[lo:lo + k] = (1.0 / k if mask_mean is None else mask_mean) + 0.05 * rand(k)
        elif isinstance(m, Block) and m.layer_scale:
            m.gamma1.copy_(0.5 + rand(*m.gamma1.shape).abs())
            m.gamma2.copy_(0.5 + rand(*m.gamma2.shape).abs())
        elif isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(0.1 * rand(*m.running_mean.shape))
            m.running_var.copy_(0.5 + rand(*m.running_var.shape).abs())
            m.weight.copy_(1 + 0.1 * rand(*m.weight.shape))
            m.bias.copy_(0.1 * rand(*m.bias.shape))
    return model


def export_onnx(model, path, imgsz=224, batch=1, fused=False, dynamic=False, opset=17):
    """Export to ONNX with DCNv4 as ``ai.qdeploy::DCNv4`` nodes: input ``input`` ``[N, 3, imgsz, imgsz]``, output
    ``output`` ``[N, classes]`` (``dynamic``: N free). ``fused``: value/offset projections as one MatMul (see the
    module's docstring). The TorchScript exporter (``dynamo=False`` where dynamo is the default); the model is
    copied, never changed."""
    import copy

    from .onnx_export import onnx_export

    if imgsz % 32:
        raise ValueError(f"imgsz {imgsz} must be a multiple of 32 (the network's stride)")
    m = set_fused(copy.deepcopy(model).cpu().float().eval(), fused)
    dummy = torch.zeros(batch, 3, imgsz, imgsz)
    onnx_export(m, dummy, path, ["input"], ["output"], dynamic=dynamic, opset=opset,
                custom_opsets={DOMAIN: VERSION})


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.flash_intern_image",
                                 description="Export FlashInternImage to ONNX with DCNv4 as ai.qdeploy::DCNv4 nodes.")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="t", help="t: FlashInternImage-T; mini: a test-size "
                    "model of the same structure; fmnist: three stages for 32x32 Fashion-MNIST inputs")
    ap.add_argument("--weights", help="state dict of this module's or the official model's names (an official "
                    "checkpoint's {'model': ...} too); random initialization when omitted")
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--layer-scale", type=float, default=None, help="per-channel layer scale of every block, "
                    "initial value (the official T has none)")
    ap.add_argument("--imgsz", type=int, default=224)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch axis")
    ap.add_argument("--fused", action="store_true", help="value/offset projections as one MatMul and two Slices")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random initialization")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    model = flash_intern_image(args.config, args.num_classes, layer_scale=args.layer_scale)
    if args.weights:
        state = torch.load(args.weights, map_location="cpu")
        state = state.get("model", state) if isinstance(state, dict) else state
        model.load_state_dict(official_state_dict(state))
    else:
        randomize_offsets(model, args.seed)
    export_onnx(model, args.out, args.imgsz, args.batch, args.fused, args.dynamic)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out} (FlashInternImage-{args.config.upper()}, {params / 1e6:.1f}M parameters, "
          f"{'fused' if args.fused else 'separate'} value/offset projections)")


if __name__ == "__main__":
    main()
