"""Standard ImageNet classifiers in plain PyTorch (no torchvision), for benchmarks and import tests.

Each model is torchvision's architecture, layer for layer, with torchvision's module names, so a torchvision state dict
loads into it (``load_state_dict``) and the parameter counts are torchvision's:

| name | parameters | blocks |
|---|---|---|
| resnet50 | 25,557,032 | bottlenecks (stride on the 3x3), ReLU |
| mobilenet_v2 | 3,504,872 | inverted residuals, depthwise 3x3, ReLU6 |
| mobilenet_v3_large | 5,483,032 | depthwise 3x3/5x5, ReLU/Hardswish, SE with Hardsigmoid |
| efficientnet_b0 | 5,288,548 | MBConv, depthwise 3x3/5x5, SiLU, SE with Sigmoid |
| regnet_y_400mf | 4,344,144 | grouped 3x3 (groups of 8 channels), SE, ReLU |
| convnext_tiny | 28,589,128 | depthwise 7x7, LayerNorm over channels (channels last), Linear, GELU, layer scale |
| shufflenet_v2_x1_0 | 2,278,604 | channel split (Split), depthwise 3x3, channel shuffle (Reshape/Transpose/Reshape) |

``build(name)`` gives a seeded random initialization (torchvision's init schemes); ``randomize`` then gives the
BatchNorm statistics, norm affines, biases and layer scales non-trivial values (BN statistics measured on random
normalized images, as a trained network's are measured on data), so that BN folding, biases and layer scales all
change the output, and activations stay in a trained network's range (what FP16 and INT8 checks need). Stochastic
depth and dropout are identities in eval mode and are left out (neither has parameters). ``export_onnx`` writes the
eval-mode model at opset 17: input ``input`` ``[N, 3, S, S]``, output ``output`` ``[N, classes]``.

``FMNIST_MODELS`` names small variants of ConvNeXt, MobileNetV3, ResNet, RegNetY and ShuffleNetV2 for Fashion-MNIST's
32x32 inputs, built by the same ``build``; the shipped models/NAME_fmnist.onnx are them, trained.
"""

import copy
import math
from collections import OrderedDict
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MODEL_NAMES", "PARAMETERS", "build", "randomize", "export_onnx", "count_parameters"]

# torchvision's counts (its weights' meta "num_params") at 1000 classes.
PARAMETERS = {
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
    "mobilenet_v3_large": 5_483_032,
    "efficientnet_b0": 5_288_548,
    "regnet_y_400mf": 4_344_144,
    "convnext_tiny": 28_589_128,
    "shufflenet_v2_x1_0": 2_278_604,
}
MODEL_NAMES = list(PARAMETERS)


def _make_divisible(v, divisor=8, min_value=None):
    """Round channels to a multiple of ``divisor``, never more than 10% down (torchvision's _make_divisible)."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _cna(cin, cout, k=3, stride=1, groups=1, norm=nn.BatchNorm2d, act=nn.ReLU, padding=None, bias=None):
    """torchvision's Conv2dNormActivation: conv (no bias when normed), norm, activation, as Sequential 0, 1, 2."""
    padding = (k - 1) // 2 if padding is None else padding
    layers = [nn.Conv2d(cin, cout, k, stride, padding, groups=groups, bias=norm is None if bias is None else bias)]
    if norm is not None:
        layers.append(norm(cout))
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: global pool, 1x1 conv, activation, 1x1 conv, scale activation, multiply."""

    def __init__(self, channels, squeeze, activation=nn.ReLU, scale_activation=nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x):
        s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return s * x


# ResNet-50 (torchvision's v1.5: the stride on the 3x3 conv).

class Bottleneck(nn.Module):
    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet-50; ``layers``, ``planes`` (each stage's bottleneck width, a quarter of its output) and
    ``stem`` (the first conv's kernel, stride and width) give the smaller variants."""

    def __init__(self, layers=(3, 4, 6, 3), num_classes=1000, planes=(64, 128, 256, 512), stem=(7, 2, 64)):
        super().__init__()
        k, s, width = stem
        self.conv1 = nn.Conv2d(3, width, k, s, k // 2, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = width
        for i, (n, planes) in enumerate(zip(layers, planes)):
            stride = 1 if i == 0 else 2
            down = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4))
            blocks = [Bottleneck(cin, planes, stride, down)]
            cin = planes * 4
            blocks += [Bottleneck(cin, planes) for _ in range(n - 1)]
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# MobileNetV2.

class InvertedResidualV2(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.use_res_connect = stride == 1 and cin == cout
        layers = [] if expand == 1 else [_cna(cin, hidden, 1, act=nn.ReLU6)]
        layers += [_cna(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1))  # expansion, channels, blocks, first stride

    def __init__(self, num_classes=1000):
        super().__init__()
        cin = 32
        features = [_cna(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTING:
            for i in range(n):
                features.append(InvertedResidualV2(cin, c, s if i == 0 else 1, t))
                cin = c
        features.append(_cna(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# MobileNetV3-Large.

class InvertedResidualV3(nn.Module):
    def __init__(self, cin, k, expanded, cout, use_se, use_hs, stride, norm):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act = nn.Hardswish if use_hs else nn.ReLU
        layers = [] if expanded == cin else [_cna(cin, expanded, 1, norm=norm, act=act)]
        layers.append(_cna(expanded, expanded, k, stride, groups=expanded, norm=norm, act=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4, 8),
                                            scale_activation=nn.Hardsigmoid))
        layers.append(_cna(expanded, cout, 1, norm=norm, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res_connect else self.block(x)


class MobileNetV3Large(nn.Module):
    """torchvision's MobileNetV3-Large; ``setting``, ``stem_stride`` and ``last_channel`` (the classifier's hidden
    width) give smaller variants of the same structure (the last conv widens the last block's output 6x, as in both
    torchvision models)."""

    SETTING = (  # input, kernel, expanded, output, SE, Hardswish, stride
        (16, 3, 16, 16, False, False, 1), (16, 3, 64, 24, False, False, 2), (24, 3, 72, 24, False, False, 1),
        (24, 5, 72, 40, True, False, 2), (40, 5, 120, 40, True, False, 1), (40, 5, 120, 40, True, False, 1),
        (40, 3, 240, 80, False, True, 2), (80, 3, 200, 80, False, True, 1), (80, 3, 184, 80, False, True, 1),
        (80, 3, 184, 80, False, True, 1), (80, 3, 480, 112, True, True, 1), (112, 3, 672, 112, True, True, 1),
        (112, 5, 672, 160, True, True, 2), (160, 5, 960, 160, True, True, 1), (160, 5, 960, 160, True, True, 1),
    )

    def __init__(self, num_classes=1000, setting=None, stem_stride=2, last_channel=1280):
        super().__init__()
        setting = self.SETTING if setting is None else setting
        norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        features = [_cna(3, setting[0][0], 3, stem_stride, norm=norm, act=nn.Hardswish)]
        features += [InvertedResidualV3(*s, norm=norm) for s in setting]
        last_conv = 6 * setting[-1][3]
        features.append(_cna(setting[-1][3], last_conv, 1, norm=norm, act=nn.Hardswish))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last_conv, last_channel), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(last_channel, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# EfficientNet-B0.

class MBConv(nn.Module):
    def __init__(self, expand, k, stride, cin, cout):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        expanded = _make_divisible(cin * expand, 8)
        layers = [] if expanded == cin else [_cna(cin, expanded, 1, act=nn.SiLU)]
        layers += [_cna(expanded, expanded, k, stride, groups=expanded, act=nn.SiLU),
                   SqueezeExcitation(expanded, max(1, cin // 4), activation=nn.SiLU),
                   _cna(expanded, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res_connect else self.block(x)


class EfficientNetB0(nn.Module):
    SETTING = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
               (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))  # expand, k, stride, in, out, n

    def __init__(self, num_classes=1000):
        super().__init__()
        features = [_cna(3, 32, 3, 2, act=nn.SiLU)]
        for e, k, s, cin, cout, n in self.SETTING:
            features.append(nn.Sequential(*[MBConv(e, k, s if i == 0 else 1, cin if i == 0 else cout, cout)
                                            for i in range(n)]))
        features.append(_cna(320, 1280, 1, act=nn.SiLU))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# RegNetY-400MF.

def regnet_stages(depth, w_0, w_a, w_m, group_width):
    """Stage widths and depths from RegNet's quantized-linear parameters (torchvision's BlockParams.from_init_params,
    bottleneck multiplier 1)."""
    ws = [int(round(w_0 * w_m ** round(math.log((i * w_a + w_0) / w_0) / math.log(w_m)) / 8) * 8)
          for i in range(depth)]
    widths, depths = [], []
    for w in ws:
        if widths and widths[-1] == w:
            depths[-1] += 1
        else:
            widths.append(w)
            depths.append(1)
    groups = [min(group_width, w) for w in widths]
    return [_make_divisible(w, g) for w, g in zip(widths, groups)], depths, groups


class ResBottleneckBlock(nn.Module):
    def __init__(self, cin, cout, stride, group_width, se_ratio):
        super().__init__()
        self.proj = _cna(cin, cout, 1, stride, act=None) if cin != cout or stride != 1 else None
        f = OrderedDict(a=_cna(cin, cout, 1), b=_cna(cout, cout, 3, stride, groups=cout // group_width))
        f["se"] = SqueezeExcitation(cout, int(round(se_ratio * cin)))
        f["c"] = _cna(cout, cout, 1, act=None)
        self.f = nn.Sequential(f)
        self.activation = nn.ReLU()

    def forward(self, x):
        return self.activation((x if self.proj is None else self.proj(x)) + self.f(x))


class RegNetY400MF(nn.Module):
    """torchvision's RegNetY-400MF; ``stages`` ((width, depth, group width) per stage, each starting at stride 2),
    ``stem_stride`` and ``stem_width`` give the smaller variants."""

    def __init__(self, num_classes=1000, stages=None, stem_stride=2, stem_width=32):
        super().__init__()
        self.stem = _cna(3, stem_width, 3, stem_stride)
        if stages is None:
            widths, depths, groups = regnet_stages(16, 48, 27.89, 2.09, 8)  # torchvision's regnet_y_400mf
        else:
            widths, depths, group_widths = zip(*stages)
            groups = [min(g, w) for w, g in zip(widths, group_widths)]
        stages, cin = [], stem_width
        for i, (w, d, g) in enumerate(zip(widths, depths, groups)):
            stage = nn.Sequential(OrderedDict(
                (f"block{i + 1}-{j}", ResBottleneckBlock(cin if j == 0 else w, w, 2 if j == 0 else 1, g, 0.25))
                for j in range(d)))
            stages.append((f"block{i + 1}", stage))
            cin = w
        self.trunk_output = nn.Sequential(OrderedDict(stages))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.avgpool(self.trunk_output(self.stem(x))).flatten(1))


# ConvNeXt-T.

class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor, computed channels last (torchvision's LayerNorm2d)."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Permute(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


class CNBlock(nn.Module):
    """Depthwise 7x7, then channels last: LayerNorm, Linear 4x, GELU, Linear, back to NCHW; layer scale; residual."""

    def __init__(self, dim, layer_scale=1e-6):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, 7, padding=3, groups=dim), Permute([0, 2, 3, 1]), nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)

    def forward(self, x):
        return self.layer_scale * self.block(x) + x


class ConvNeXtTiny(nn.Module):
    """torchvision's ConvNeXt-T; ``dims``, ``depths`` and ``stem`` (the patchify conv's kernel and stride) give
    smaller variants of the same structure."""

    def __init__(self, num_classes=1000, dims=(96, 192, 384, 768), depths=(3, 3, 9, 3), stem=4):
        super().__init__()
        norm = partial(LayerNorm2d, eps=1e-6)
        features = [_cna(3, dims[0], stem, stem, padding=0, norm=norm, act=None, bias=True)]
        for i, (d, n) in enumerate(zip(dims, depths)):
            features.append(nn.Sequential(*[CNBlock(d) for _ in range(n)]))
            if i + 1 < len(dims):
                features.append(nn.Sequential(norm(d), nn.Conv2d(d, dims[i + 1], 2, 2)))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(norm(dims[-1]), nn.Flatten(1), nn.Linear(dims[-1], num_classes))

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


# ShuffleNetV2 x1.0.

def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    return torch.transpose(x, 1, 2).contiguous().view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        bf = cout // 2

        def dw(c):
            return nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False)

        if stride > 1:
            self.branch1 = nn.Sequential(dw(cin), nn.BatchNorm2d(cin), nn.Conv2d(cin, bf, 1, bias=False),
                                         nn.BatchNorm2d(bf), nn.ReLU())
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin if stride > 1 else bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(),
            dw(bf), nn.BatchNorm2d(bf), nn.Conv2d(bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU())

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, num_classes=1000, repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024), stem_stride=2):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels[0], 3, stem_stride, 1, bias=False),
                                   nn.BatchNorm2d(channels[0]), nn.ReLU())
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = channels[0]
        for i, (n, c) in enumerate(zip(repeats, channels[1:])):
            setattr(self, f"stage{i + 2}", nn.Sequential(*[ShuffleUnit(cin if j == 0 else c, c, 2 if j == 0 else 1)
                                                           for j in range(n)]))
            cin = c
        self.conv5 = nn.Sequential(nn.Conv2d(cin, channels[-1], 1, bias=False), nn.BatchNorm2d(channels[-1]),
                                   nn.ReLU())
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        x = self.stage4(self.stage3(self.stage2(self.maxpool(self.conv1(x)))))
        return self.fc(self.conv5(x).mean([2, 3]))


_CONSTRUCTORS = {
    "resnet50": ResNet,
    "mobilenet_v2": MobileNetV2,
    "mobilenet_v3_large": MobileNetV3Large,
    "efficientnet_b0": EfficientNetB0,
    "regnet_y_400mf": RegNetY400MF,
    "convnext_tiny": ConvNeXtTiny,
    "shufflenet_v2_x1_0": ShuffleNetV2,
}


# Small variants for Fashion-MNIST's 32x32 inputs (models/NAME_fmnist.onnx, trained by qdeploy.train_cls --model
# convnext|mobilenet|resnet|regnet|shufflenet): the full models' blocks, module names and initialization at a
# fraction of the width and depth. ConvNeXt: a 2x2 patchify stem, so the stages run on 16x16, 8x8 and 4x4.
# MobileNetV3: stem stride 2, then blocks at 16x16, 8x8 and 4x4 with depthwise 3x3 and 5x5, SE (Hardsigmoid gate) and
# ReLU early, Hardswish late, as MobileNetV3-Large mixes them. ResNet: a 3x3 stride-1 stem and the max pool, then
# bottleneck stages on 16x16, 8x8, 4x4 and 2x2. RegNetY: the stride-2 stem, then stages of grouped 3x3 bottlenecks
# with SE (Sigmoid gate) on 8x8, 4x4, 2x2 and 1x1. ShuffleNetV2: a stride-1 stem and the max pool, then stages on 8x8,
# 4x4 and 2x2.
MOBILENET_FMNIST_SETTING = (  # input, kernel, expanded, output, SE, Hardswish, stride
    (16, 3, 16, 16, True, False, 1), (16, 3, 64, 24, False, False, 2), (24, 5, 72, 24, True, False, 1),
    (24, 5, 96, 40, True, True, 2), (40, 3, 120, 40, True, True, 1), (40, 3, 160, 48, True, True, 1),
    (48, 5, 144, 48, True, True, 1),
)
FMNIST_MODELS = {
    "convnext_fmnist": ("convnext_tiny", dict(dims=(32, 64, 128), depths=(1, 1, 2), stem=2)),
    "mobilenet_fmnist": ("mobilenet_v3_large", dict(setting=MOBILENET_FMNIST_SETTING, last_channel=256)),
    "resnet_fmnist": ("resnet50", dict(layers=(1, 2, 2, 1), planes=(16, 32, 64, 128), stem=(3, 1, 32))),
    "regnet_fmnist": ("regnet_y_400mf", dict(stages=((32, 1, 8), (64, 2, 8), (128, 2, 16), (256, 1, 16)),
                                             stem_width=16)),
    "shufflenet_fmnist": ("shufflenet_v2_x1_0", dict(repeats=(2, 4, 2), channels=(24, 48, 96, 192, 512),
                                                     stem_stride=1)),
}


@torch.no_grad()
def _init(model, convnext):
    """torchvision's schemes: ConvNeXt normal (std 0.02) for convs and Linears (torchvision truncates at +-2, 100
    standard deviations: the same distribution, and trunc_normal_ takes seconds on 28M weights); the others Kaiming
    normal (fan out) for convs and normal (std 0.01) for Linears; zero biases, unit norm weights."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            if convnext:
                nn.init.normal_(m.weight, 0, 0.02)
            elif isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            else:
                nn.init.normal_(m.weight, 0, 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def build(name, num_classes=1000, seed=0):
    """The model ``name`` (one of MODEL_NAMES or FMNIST_MODELS) with a random initialization from ``seed`` (the global
    RNG untouched), in eval mode."""
    base, kwargs = FMNIST_MODELS.get(name, (name, {}))
    if base not in _CONSTRUCTORS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODEL_NAMES + list(FMNIST_MODELS))}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _CONSTRUCTORS[base](num_classes=num_classes, **kwargs)
        _init(model, base == "convnext_tiny")
    return model.eval()


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def randomize(model, seed=0, imgsz=224, batch=8):
    """Non-trivial values for what an initialization leaves trivial: norm weights in [0.5, 1.5] and biases N(0, 0.1),
    conv and Linear biases N(0, 0.02), ConvNeXt layer scales in [0.1, 0.5]; then every BatchNorm's running mean and
    variance measured on ``batch`` random normalized images (N(0, 1)) of ``imgsz`` pixels, in one train-mode forward
    with a cumulative average (on the model's device). Returns the model in eval mode."""
    g = torch.Generator().manual_seed(seed)

    def uniform(t, lo, hi):
        t.copy_(lo + (hi - lo) * torch.rand(t.shape, generator=g))

    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            uniform(m.weight, 0.5, 1.5)
            m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
        elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            m.bias.copy_(0.02 * torch.randn(m.bias.shape, generator=g))
        elif isinstance(m, CNBlock):
            uniform(m.layer_scale, 0.1, 0.5)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if bns:
        momenta = [m.momentum for m in bns]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average: after one batch, that batch's statistics
            m.train()
        model(torch.randn(batch, 3, imgsz, imgsz, generator=g).to(bns[0].weight.device))
        for m, momentum in zip(bns, momenta):
            m.momentum = momentum
    return model.eval()


def export_onnx(model, path, imgsz=224, batch=1, dynamic=False, opset=17):
    """Export the eval-mode model (a copy, on the CPU in FP32) with input ``input`` ``[N, 3, imgsz, imgsz]`` and output
    ``output`` ``[N, classes]``; ``dynamic``: N free. The TorchScript exporter (``dynamo=False`` where dynamo is the
    default), which folds each BatchNorm into its conv."""
    from ..onnx_export import onnx_export

    m = copy.deepcopy(model).cpu().float().eval()
    onnx_export(m, torch.zeros(batch, 3, imgsz, imgsz), path, ["input"], ["output"], dynamic=dynamic, opset=opset)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.models.zoo",
                                 description="Export a standard classifier (seeded random weights, or trained ones "
                                 "with --weights) to ONNX.")
    ap.add_argument("--model", choices=MODEL_NAMES + list(FMNIST_MODELS), required=True)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--imgsz", type=int, default=224)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch axis")
    ap.add_argument("--no-randomize", action="store_true", help="keep the initialization's trivial BatchNorm "
                    "statistics, norm affines, biases and layer scales")
    ap.add_argument("--weights", default=None, help="a checkpoint (qdeploy.train_cls's best.pt, or a state dict) to "
                    "load instead of random weights (implies --no-randomize)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    model = build(args.model, args.num_classes, args.seed)
    if args.weights:
        from ..checkpoint import read_state_dict

        model.load_state_dict(read_state_dict(args.weights))
    elif not args.no_randomize:
        randomize(model, seed=args.seed, imgsz=args.imgsz)
    export_onnx(model, args.out, imgsz=args.imgsz, batch=args.batch, dynamic=args.dynamic)
    print(f"{args.model}: {count_parameters(model):,} parameters -> {args.out}")


if __name__ == "__main__":
    main()
