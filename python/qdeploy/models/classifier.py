"""The two small CIFAR-style classifiers of the Jetson DLA tutorial (seed 004): ModelBN and ModelGN.

Four 3x3 stride-2 convs (64, 128, 256, 512 channels) each followed by a norm and ReLU, then global average pooling
and a Linear layer; input 3x32x32. They differ only in the norm: BatchNorm folds into the conv at deployment, while
GroupNorm(8 groups) stays a separate op, which is the point of the pair (GN forces a fallback on DLA; BN does not).
The convs keep their bias as in the tutorial, so parameter counts match it.
"""

from torch import nn

WIDTHS = (64, 128, 256, 512)
GN_GROUPS = 8


def _features(norm):
    layers, c_in = [], 3
    for c in WIDTHS:
        layers += [nn.Conv2d(c_in, c, kernel_size=3, stride=2, padding=1), norm(c), nn.ReLU()]
        c_in = c
    return nn.Sequential(*layers)


class _Classifier(nn.Module):
    def __init__(self, norm, num_classes):
        super().__init__()
        self.cnn = _features(norm)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.linear = nn.Linear(WIDTHS[-1], num_classes)

    def forward(self, x):
        return self.linear(self.pool(self.cnn(x)).flatten(1))


class ModelBN(_Classifier):
    def __init__(self, num_classes=10):
        super().__init__(nn.BatchNorm2d, num_classes)


class ModelGN(_Classifier):
    def __init__(self, num_classes=10):
        super().__init__(lambda c: nn.GroupNorm(GN_GROUPS, c), num_classes)
