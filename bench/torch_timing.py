"""GPU timing of a PyTorch callable, shared by the bench scripts: latency is GPU time per call from CUDA events
(median), throughput images/s over back-to-back calls."""

import statistics

import torch


def time_torch(fn, x, warmup, iters):
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    lat = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        lat.append(a.elapsed_time(b))
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn(x)
    b.record()
    b.synchronize()
    return statistics.median(lat), x.shape[0] * iters * 1000.0 / a.elapsed_time(b)
