"""Calibrators: collect statistics of a tensor over calibration batches, then choose its clipping range ``amax``.

Symmetric int8 maps [-amax, amax] onto [-127, 127] (scale = amax / 127), so every method picks one positive number:
  - max:        the largest |x| seen (per channel along ``axis`` when given; what weights use);
  - percentile: the |x| below which ``percentile`` % of the values fall;
  - mse:        the amax minimizing the expected squared quantization error over the histogram;
  - entropy:    the amax minimizing KL(P || Q) between the clipped distribution P and its 128-level quantized version
                Q, TensorRT's entropy calibration (2048-bin histogram of |x|).
The histogram methods share one collector: at most 2048 bins over [0, max seen]; when a later batch has a larger max
the histogram grows by whole bins, merging pairs of bins (exactly) whenever it would exceed 2048.
"""

import math

import numpy as np
import torch

METHODS = ("max", "percentile", "mse", "entropy")
NUM_BINS = 2048
INT8_LEVELS = 128  # levels of |q| in [0, 127]: the quantized histogram has 128 bins, as in TensorRT


class MaxCalibrator:
    """Running max of |x|, per tensor or per channel along ``axis``."""

    def __init__(self, axis=None):
        self.axis = axis
        self.amax = None

    def collect(self, x):
        x = x.detach().abs().float()
        if self.axis is None:
            cur = x.max()
        else:
            cur = x.transpose(0, self.axis).reshape(x.shape[self.axis], -1).max(dim=1).values
        self.amax = cur if self.amax is None else torch.maximum(self.amax, cur)

    def compute_amax(self):
        if self.amax is None:
            raise RuntimeError("max calibrator saw no data")
        return self.amax.clone()


class HistogramCalibrator:
    """Histogram of |x| with fixed-width bins; amax by percentile, MSE or entropy."""

    def __init__(self, num_bins=NUM_BINS):
        self.num_bins = num_bins
        self.hist = None  # float64 numpy counts
        self.width = None

    def collect(self, x):
        x = x.detach().abs().float().flatten()
        x_max = float(x.max()) if x.numel() else 0.0
        if self.hist is None:
            if x_max == 0.0:
                return  # all zeros carry no range information; wait for a batch that does
            self.width = x_max / self.num_bins
            self.hist = np.zeros(self.num_bins)
        needed = math.ceil(x_max / self.width * (1 - 1e-7))  # tolerance: the first batch must fit its own bins
        while needed > self.num_bins:  # keep at most num_bins bins: merge pairs (exact) and double the width
            self.hist = np.append(self.hist, np.zeros(len(self.hist) % 2)).reshape(-1, 2).sum(1)
            self.width *= 2
            needed = math.ceil(x_max / self.width * (1 - 1e-7))
        n = max(len(self.hist), needed)
        if n > len(self.hist):
            self.hist = np.concatenate([self.hist, np.zeros(n - len(self.hist))])
        # Counting on the tensor's device keeps calibration on the GPU fast; only n counts come back.
        idx = (x / self.width).long().clamp_(max=n - 1)
        self.hist += torch.bincount(idx, minlength=n).cpu().double().numpy()

    def compute_amax(self, method, percentile=99.99):
        if self.hist is None:
            raise RuntimeError("histogram calibrator saw no non-zero data")
        if method == "percentile":
            return self._percentile(percentile)
        if method == "mse":
            return self._mse()
        if method == "entropy":
            return self._entropy()
        raise ValueError(f"unknown calibration method {method!r}; expected one of {METHODS}")

    def _edges(self):
        return np.arange(1, len(self.hist) + 1, dtype=np.float64) * self.width

    def _percentile(self, percentile):
        if not 0 < percentile <= 100:
            raise ValueError(f"percentile {percentile} must be in (0, 100]")
        cdf = np.cumsum(self.hist) / self.hist.sum()
        idx = min(int(np.searchsorted(cdf, percentile / 100)), len(cdf) - 1)
        return torch.tensor(float(self._edges()[idx]))

    def _least_error_edge(self, quantized):
        """The candidate range end at a bin edge (from 1/16 of the range up) whose grid gives the least
        histogram-weighted squared error: ``quantized(centers, edge)`` fake-quantizes the bins' centers."""
        centers = (np.arange(len(self.hist)) + 0.5) * self.width
        edges = self._edges()
        best, best_err = edges[-1], math.inf
        for edge in edges[max(len(edges) // 16, 1) - 1:]:
            err = float((self.hist * (centers - quantized(centers, edge)) ** 2).sum())
            if err < best_err:
                best, best_err = edge, err
        return float(best)

    def _mse(self):
        """amax by the squared error of the symmetric int8 grid (_least_error_edge)."""
        def quantized(centers, amax):
            scale = amax / 127
            return np.minimum(np.round(centers / scale), 127) * scale
        return torch.tensor(self._least_error_edge(quantized))

    def asymmetric_high(self, lo):
        """The high end of a uint8 grid over [lo, high] (lo <= 0, the tensor's least value) that the histogram's
        squared error likes best (_least_error_edge): values below lo never occur, so only the top clips. The |x|
        histogram folds the few negative values (SiLU's, down to -0.28) onto the positive side, which counts their
        rounding error as if they were positive."""
        def quantized(centers, high):
            scale = (high - lo) / 255
            zero = round(-lo / scale)
            return (np.minimum(np.round(centers / scale) + zero, 255) - zero) * scale
        return self._least_error_edge(quantized)

    def _entropy(self):
        """TensorRT's entropy calibration. For each candidate threshold of i bins (128 <= i <= all): P is the
        histogram cut at i bins with the tail added to its last bin; Q merges the first i bins into 128 equal
        groups (the last takes the remainder) and spreads each group's count evenly over the bins where P is
        non-zero. The threshold of least KL(P || Q) wins; amax is the upper edge of its last bin."""
        hist = self.hist
        n = len(hist)
        if n <= INT8_LEVELS:
            return torch.tensor(float(self._edges()[-1]))
        tail = np.cumsum(hist[::-1])[::-1]  # tail[i] = sum(hist[i:])
        best_i, best_kl = n, math.inf
        for i in range(INT8_LEVELS, n + 1):
            p = hist[:i].copy()
            if i < n:
                p[i - 1] += tail[i]
            nonzero = p > 0
            group = np.minimum(np.arange(i) // (i // INT8_LEVELS), INT8_LEVELS - 1)
            sums = np.bincount(group, weights=hist[:i], minlength=INT8_LEVELS)
            counts = np.bincount(group, weights=nonzero, minlength=INT8_LEVELS)
            q = np.where(nonzero, sums[group] / np.maximum(counts[group], 1), 0.0)
            kl = _kl_divergence(p, q)
            if kl < best_kl:
                best_i, best_kl = i, kl
        return torch.tensor(best_i * self.width)


def _kl_divergence(p, q, eps=1e-10):
    """KL(P || Q) of unnormalized histograms. Where P > 0 but Q = 0 (a group whose only mass is the folded tail),
    Q gets a tiny probability, as smoothing does in TensorRT/MXNet, so that the candidate is penalized, not lost."""
    p = p / p.sum()
    q = q / max(q.sum(), eps)
    mask = p > 0
    return float((p[mask] * np.log(p[mask] / np.maximum(q[mask], eps))).sum())
