"""TensorQuantizer: symmetric int8 fake quantization of one tensor, with calibration and ONNX Q/DQ export
(and asymmetric uint8 for activations, outside the symmetric INT8 contract: make_asymmetric).

A quantizer holds ``amax`` (a buffer: a scalar for activations, one value per output channel for weights along
axis 0) and simulates int8 as ``clamp(round_half_even(x / s), qmin, 127) * s`` with ``s = amax / 127`` and zero point
0, the contract of docs' INT8 semantics. Weights use the narrow range [-127, 127]; activations [-128, 127].

The rounding runs through torch's fake_quantize ops, which give the straight-through gradient (identity inside the
clipping range, zero outside) and which torch's ONNX exporter writes as QuantizeLinear + DequantizeLinear.
``learn_range()`` makes the scale a parameter trained with the rest (LSQ: Esser et al., "Learned Step Size
Quantization", 2020, through torch's learnable fake-quantize ops, gradient scaled by 1 / sqrt(numel * 127));
``freeze_range()`` writes the learned scale back into ``amax`` for export. ONNX int8
allows only [-128, 127], so during export weights use that range too; ``quant.export`` clamps the weights to
[-amax, amax] first, which makes the two ranges give identical results.
"""

import math
import warnings

import torch
from torch import nn

from .calib import HistogramCalibrator, MaxCalibrator

MIN_AMAX = 1e-6  # keeps scales positive for all-zero channels


class TensorQuantizer(nn.Module):
    """Fake-quantizes its input once calibrated; while calibrating it only records statistics.

    ``axis`` None: per-tensor (activations). ``axis`` 0 with ``channels``: per channel (weights).
    """

    def __init__(self, axis=None, channels=None, narrow=False):
        super().__init__()
        if (axis is None) != (channels is None):
            raise ValueError("per-channel quantization needs both axis and channels")
        self.axis = axis
        self.narrow = narrow
        self.enabled = True
        self.export_mode = False
        self._calibrator = None
        self._histogram = None
        self.register_buffer("amax", torch.full((channels,) if channels else (), float("nan")))
        self.learned_scale = None  # nn.Parameter while learn_range() is on
        self.learned_low = None  # asymmetric quantizers learn their low end too (LSQ+'s offset)
        # make_asymmetric(): uint8 with a zero point over [amin, amax] (outside the symmetric INT8 contract).
        # amin is the least value calibration saw (per-tensor quantizers only), not saved in checkpoints.
        self.asymmetric = False
        self.register_buffer("amin", torch.tensor(float("nan")), persistent=False)

    @property
    def calibrated(self):
        return not bool(torch.isnan(self.amax).any())

    @property
    def scale(self):
        return self.amax.float().clamp(min=MIN_AMAX) / 127

    def extra_repr(self):
        kind = "per-tensor" if self.axis is None else f"per-channel axis={self.axis}"
        amax = f"amax={float(self.amax):.4g}" if self.axis is None else f"amax[{self.amax.numel()}]"
        return f"{kind}, {amax}, enabled={self.enabled}"

    def start_calibration(self, method):
        """Begin collecting statistics; ``method`` 'max' keeps a running max, the others a histogram."""
        self._calibrator = MaxCalibrator(self.axis) if method == "max" else HistogramCalibrator()
        self.amin.fill_(float("nan"))

    def finish_calibration(self, method, percentile=99.99):
        """Set amax from the collected statistics. A tensor that was all zeros gets amax 1 (any scale is exact)."""
        cal, self._calibrator = self._calibrator, None
        if cal is None:
            raise RuntimeError("finish_calibration without start_calibration")
        self._histogram = cal if method == "mse" and self.axis is None else None  # for make_asymmetric
        try:
            amax = cal.compute_amax() if method == "max" else cal.compute_amax(method, percentile)
        except RuntimeError:
            warnings.warn("a quantizer saw only zeros during calibration; using amax = 1")
            amax = torch.ones_like(self.amax)
        self.set_amax(amax)

    def set_amax(self, amax):
        with torch.no_grad():
            self.amax.copy_(torch.as_tensor(amax, dtype=self.amax.dtype).clamp(min=MIN_AMAX).reshape(self.amax.shape))

    def learn_range(self):
        """From now on the scale is a trainable parameter (initialised from the calibrated amax); an asymmetric
        quantizer learns its low end too (LSQ+'s offset, Bhalgat et al., 2020; in the tensor's units, so that Adam's
        step of about lr is as small against it as against the scale), the zero point -low / scale rounded in the
        forward pass."""
        if not self.calibrated:
            raise RuntimeError("learn_range needs a calibrated quantizer")
        if self.asymmetric:
            scale, zero_point = self._asymmetric_qparams(self.amax.device)
            self.learned_scale = nn.Parameter(scale.detach().reshape(1))
            self.learned_low = nn.Parameter((-zero_point * scale).detach().reshape(1))
        else:
            self.learned_scale = nn.Parameter(self.scale.detach().clone().reshape(-1))

    def freeze_range(self):
        """Back to a fixed range: amax = the learned scale x 127, or for an asymmetric quantizer [lo, amax] =
        [-z s, (255 - z) s] with the learned scale s and zero point z = round(-low / s)."""
        if self.learned_scale is None:
            return
        s = self.learned_scale.detach().abs()
        if self.asymmetric:
            s = s.clamp(min=MIN_AMAX / 255)
            z = (-self.learned_low.detach() / s).round().clamp(0, 255)
            with torch.no_grad():
                self.amin.copy_((-z * s).reshape(()))
            self.set_amax((255 - z) * s)
            self.learned_low = None
        else:
            self.set_amax(s * 127)
        self.learned_scale = None

    def make_asymmetric(self):
        """From now on uint8 with a zero point over [lo, amax], lo the least value calibration saw (at least -amax,
        0 for a tensor never negative): SiLU outputs (down to -0.28) then use all 256 codes instead of about half.
        After mse calibration amax becomes the high end the squared error likes best on that grid (a finer step
        than the symmetric grid's, so usually a higher one).
        Outside the symmetric INT8 contract and TensorRT's INT8: the Q/DQ export has uint8 zero points, which the
        CPU reference's INT8 modes run (`qdeploy eval --device cpu --precision int8`); the GPU's INT8 build and
        qdeploy qat2ptq refuse them."""
        if self.axis is not None or not self.calibrated or torch.isnan(self.amin):
            raise RuntimeError("make_asymmetric needs a calibrated per-tensor quantizer")
        if self.learned_scale is not None:
            raise RuntimeError("make_asymmetric before learn_range: the learned range is then asymmetric too")
        with torch.no_grad():
            self.amin.copy_(torch.clamp(self.amin, min=-float(self.amax), max=0.0))
            if self._histogram is not None and self._histogram.hist is not None:
                self.set_amax(self._histogram.asymmetric_high(float(self.amin)))
        self._histogram = None
        self.asymmetric = True

    def forward(self, x):
        if self._calibrator is not None:
            self._calibrator.collect(x)
            if self.axis is None:  # fmin: the NaN that start_calibration left gives way to the first minimum
                self.amin.copy_(torch.fmin(self.amin.to(x.device), x.detach().min().float()))
            return x
        if not self.enabled:
            return x
        if not self.calibrated:
            raise RuntimeError("quantizer used before calibration: run qdeploy.quant.calibrate first")
        return self._fake_quant(x)

    def _asymmetric_qparams(self, device):
        """The uint8 grid over [amin, amax]: scale and integer zero point."""
        lo, hi = self.amin.float().to(device), self.amax.float().to(device)
        scale = (hi - lo).clamp(min=MIN_AMAX) / 255
        return scale, torch.round(-lo / scale).clamp(0, 255).to(torch.int32)

    def _fake_quant(self, x):
        y = self._fake_quant_fp32(x if x.dtype == torch.float32 else x.float())  # fake_quantize wants fp32 (AMP: fp16)
        return y if y.dtype == x.dtype else y.to(x.dtype)

    def _fake_quant_fp32(self, y):
        learned = self.learned_scale is not None and not self.export_mode
        if self.asymmetric:
            if learned:
                scale = self.learned_scale.abs().clamp(min=MIN_AMAX / 255)
                return torch._fake_quantize_learnable_per_tensor_affine(y, scale, -self.learned_low / scale, 0, 255,
                                                                        1.0 / math.sqrt(y[0].numel() * 255))
            scale, zero_point = self._asymmetric_qparams(y.device)
            if self.export_mode:
                scale, zero_point = torch.tensor(scale.item()), torch.tensor(int(zero_point.item()), dtype=torch.int32)
            return torch.fake_quantize_per_tensor_affine(y, scale, zero_point, 0, 255)
        qmin = -128 if self.export_mode or not self.narrow else -127
        if learned:
            scale = self.learned_scale.abs().clamp(min=MIN_AMAX / 127)
            zero = torch.zeros_like(scale)
            # LSQ's gradient scale 1 / sqrt(N * Qp), N the elements one scale covers per sample (activations) or per
            # output channel (weights along axis 0): y[0] either way.
            grad_factor = 1.0 / math.sqrt(y[0].numel() * 127)
            if self.axis is None:
                return torch._fake_quantize_learnable_per_tensor_affine(y, scale, zero, qmin, 127, grad_factor)
            return torch._fake_quantize_learnable_per_channel_affine(y, scale, zero, self.axis, qmin, 127, grad_factor)
        scale = self.scale.to(y.device)
        if self.export_mode:  # fresh tensors are constants to the tracer: the graph gets plain scale initializers
            scale = torch.tensor(scale.tolist(), dtype=torch.float32)
        zero_point = torch.zeros(scale.shape, dtype=torch.int32, device=y.device)
        if self.axis is None:
            return torch.fake_quantize_per_tensor_affine(y, scale, zero_point, qmin, 127)
        return torch.fake_quantize_per_channel_affine(y, scale, zero_point, self.axis, qmin, 127)


def activation_quantizer():
    return TensorQuantizer()


def weight_quantizer(out_channels):
    return TensorQuantizer(axis=0, channels=out_channels, narrow=True)
