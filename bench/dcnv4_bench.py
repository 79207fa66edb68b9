#!/usr/bin/env python3
"""DCNv4 kernel times, qdeploy's CUDA kernels side by side with the official op (OpenGVLab/DCNv4's extension, built
by bench/dcnv4_peer.sh) in one run on one GPU: the paper's shapes (64x56x56 with 4 groups of 32 channels, 128x56x56
with 4x16) and FlashInternImage-T's four stage shapes at 224x224 (56/28/14/7 with 4/8/16/32 groups of 16) at batch 1
and 64, fp16 and fp32; 3x3 kernels, stride 1, pad 1, offsets in [-2, 2].

  PYTHONPATH=$(bench/dcnv4_peer.sh bench/peers/DCNv4_op) python3 bench/dcnv4_bench.py \
      --plugin build-gpu/plugins/dcnv4/libqd_dcnv4.so [--json out/dcnv4_bench.json]

How each is timed:
- official: the DCNv4 kernel's own duration from torch.profiler (CUPTI), median over 50 calls; and, for reference,
  the whole op per call (its output's zero fill included) from a CUDA graph of 50 calls.
- qdeploy: bench/dcnv4_kernel_bench.cpp (built here with nvcc) loads the plugin library, times every tactic as a
  CUDA graph of 50 launches and reports the best tactic's per-launch median (the gaps between kernels included, so
  an upper bound of the kernel time).
The speed-up column is official kernel / qdeploy.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [("paper", 64, 56, 56, 4, 32), ("paper", 128, 56, 56, 4, 16)]
for b in (1, 64):
    for i, (hw, g) in enumerate(((56, 4), (28, 8), (14, 16), (7, 32))):
        SHAPES.append((f"FlashInternImage-T stage {i + 1}", b, hw, hw, g, 16))


def official_spec(n, ho, wo, g, d):
    """A launch configuration of the official forward (DCNv4's dcnv4_forward): d_stride channels per thread, and a
    block of m output pixels of one image. Its kernel takes a block's image index from the first pixel, so m must
    divide ho*wo (a block that spans two images reads the wrong image's value and offsets); n does not matter."""
    del n
    d_stride = 8 if d % 8 == 0 else (4 if d % 4 == 0 else 1)
    m = max(x for x in range(1, 65) if (ho * wo) % x == 0 and x * g * d // d_stride <= 512)
    return d_stride, m * g * d // d_stride


def time_official(n, h, w, g, d, dtype):
    from DCNv4 import ext
    p = (27 * g + 7) // 8 * 8
    value = torch.rand(n, h, w, g * d, device="cuda", dtype=dtype) * 2 - 1
    om = (torch.rand(n, h, w, p, device="cuda", dtype=dtype) * 4 - 2)
    ds, bt = official_spec(n, h, w, g, d)
    args = (value, om, 3, 3, 1, 1, 1, 1, 1, 1, g, d, 1.0, 256, 0, ds, bt, False)
    for _ in range(5):
        ext.dcnv4_forward(*args)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50):
            ext.dcnv4_forward(*args)
        torch.cuda.synchronize()
    # The kernel launches themselves (device-side events): their durations.
    kernel = [e.time_range.elapsed_us() / 1000 for e in prof.events()
              if "forward_kernel_dcn" in e.name and str(e.device_type).endswith("CUDA")]
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph):
            for _ in range(50):
                ext.dcnv4_forward(*args)
    times = []
    for _ in range(21):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 50)
    return statistics.median(kernel) if kernel else float("nan"), statistics.median(times[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", default=str(ROOT / "build-gpu" / "plugins" / "dcnv4" / "libqd_dcnv4.so"))
    ap.add_argument("--bench-binary", default=str(ROOT / "build-gpu" / "dcnv4_kernel_bench"))
    ap.add_argument("--json")
    args = ap.parse_args()
    binary = Path(args.bench_binary)
    if not binary.exists():
        subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'include'}", str(ROOT / "bench/dcnv4_kernel_bench.cpp"),
                        "-o", str(binary), "-ldl"], check=True)
    rows = []
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}, torch {torch.__version__}\n")
    print("| shape (N x H x W, G x D) | dtype | official kernel ms | official op ms (graph) | qdeploy ms | tactic | "
          "speed-up |\n|---|---|---|---|---|---|---|")
    for dtype_name, dtype in (("fp16", torch.float16), ("fp32", torch.float32)):
        flat = []
        for _, n, h, w, g, d in SHAPES:
            flat += [str(n), str(h), str(w), str(g), str(d)]
        out = subprocess.run([str(binary), args.plugin, dtype_name, *flat], check=True, capture_output=True,
                             text=True).stdout
        ours = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        for (label, n, h, w, g, d), q in zip(SHAPES, ours):
            k_ms, op_ms = time_official(n, h, w, g, d, dtype)
            row = dict(label=label, n=n, h=h, w=w, g=g, d=d, dtype=dtype_name, official_kernel_ms=k_ms,
                       official_op_ms=op_ms, qdeploy_ms=q["ms"], tactic=q["tactic"], speedup=k_ms / q["ms"])
            rows.append(row)
            print(f"| {label}: {n}x{h}x{w}, {g}x{d} | {dtype_name} | {k_ms:.4f} | {op_ms:.4f} | {q['ms']:.4f} | "
                  f"{q['tactic']} | {row['speedup']:.2f}x |", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
