"""Quantized stand-ins for the modules that carry Q/DQ pairs; each is built from the float module it replaces
(``from_float``) and shares its parameters.

  QuantConv2d / QuantLinear: input (per tensor) and weight (per output channel, axis 0) quantizers.
  QuantMaxPool2d: input quantizer, so pooling can run on int8.
  QuantAdd: one quantizer per input of the residual add (TensorRT fuses the add into the conv when both are int8).
  QuantConcat: one quantizer shared by all inputs, since an int8 concat needs one scale.
  QuantSiLU: SiLU as x * sigmoid(x) with both Mul inputs quantized and the Sigmoid fed the quantized x, so every
             tensor of the activation has an int8 scale (what a fully int8 accelerator such as DLA needs).
"""

import torch
from torch import nn

from ..models.blocks import Add, Concat
from .quantizer import activation_quantizer, weight_quantizer


def _adopt(new, old):
    """Give ``new`` the plain attributes of ``old`` that it lacks (e.g. the YOLO layer routing fields f and i)."""
    for key, value in vars(old).items():
        if not key.startswith("_") and key not in vars(new):
            setattr(new, key, value)
    return new.train(old.training)


class _WeightCalibration:
    def calibrate_weight(self):
        """Weights are known: their amax is the per-output-channel max |w|, no data needed."""
        with torch.no_grad():
            self.weight_quantizer.set_amax(self.weight.detach().abs().flatten(1).max(dim=1).values)


class QuantConv2d(_WeightCalibration, nn.Conv2d):
    @classmethod
    def from_float(cls, conv):
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                conv.groups, conv.bias is not None, conv.padding_mode)
        q.weight, q.bias = conv.weight, conv.bias
        q.input_quantizer = activation_quantizer()
        q.weight_quantizer = weight_quantizer(conv.out_channels)
        q.calibrate_weight()
        return _adopt(q.to(conv.weight.device), conv)

    def forward(self, x):
        return self._conv_forward(self.input_quantizer(x), self.weight_quantizer(self.weight), self.bias)


class QuantLinear(_WeightCalibration, nn.Linear):
    @classmethod
    def from_float(cls, linear):
        q = cls(linear.in_features, linear.out_features, linear.bias is not None)
        q.weight, q.bias = linear.weight, linear.bias
        q.input_quantizer = activation_quantizer()
        q.weight_quantizer = weight_quantizer(linear.out_features)
        q.calibrate_weight()
        return _adopt(q.to(linear.weight.device), linear)

    def forward(self, x):
        return nn.functional.linear(self.input_quantizer(x), self.weight_quantizer(self.weight), self.bias)


class QuantMaxPool2d(nn.MaxPool2d):
    @classmethod
    def from_float(cls, pool):
        q = cls(pool.kernel_size, pool.stride, pool.padding, pool.dilation, pool.return_indices, pool.ceil_mode)
        q.input_quantizer = activation_quantizer()
        return _adopt(q, pool)

    def forward(self, x):
        return super().forward(self.input_quantizer(x))


class QuantAdd(Add):
    @classmethod
    def from_float(cls, add):
        q = cls()
        q.a_quantizer = activation_quantizer()
        q.b_quantizer = activation_quantizer()
        return _adopt(q, add)

    def forward(self, a, b):
        return self.a_quantizer(a) + self.b_quantizer(b)


class QuantConcat(Concat):
    @classmethod
    def from_float(cls, cat):
        q = cls(cat.d)
        q.input_quantizer = activation_quantizer()
        return _adopt(q, cat)

    def forward(self, xs):
        return torch.cat([self.input_quantizer(x) for x in xs], self.d)


class QuantSiLU(nn.Module):
    @classmethod
    def from_float(cls, act):
        q = cls()
        q.input_quantizer = activation_quantizer()
        q.sigmoid_quantizer = activation_quantizer()
        return _adopt(q, act)

    def forward(self, x):
        x = self.input_quantizer(x)
        return x * self.sigmoid_quantizer(torch.sigmoid(x))
