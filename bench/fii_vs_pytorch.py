"""FlashInternImage-T (seeded random weights) on one GPU in one run: PyTorch against qdeploy at 224x224, batch 1 and 64.

    PYTHONPATH=python python3 bench/fii_vs_pytorch.py --qdeploy build-gpu/qdeploy --out OUTDIR

PyTorch runs the model of python/qdeploy/flash_intern_image.py with its pure-PyTorch DCNv4 (the official op's CUDA
extension is measured on its own by bench/dcnv4_bench.py), eager in FP32 and FP16 and, unless --no-compile,
torch.compile FP16. qdeploy runs `qdeploy bench --cuda-graph` on the same weights exported to ONNX (dynamic batch,
DCNv4 as ai.qdeploy::DCNv4) at each --precision, with separate and with fused value/offset projections. Latency is GPU
time per forward from CUDA events (median); throughput is images/s over back-to-back forwards. Writes
OUTDIR/results.json and OUTDIR/results.md, and per-layer profiles of the qdeploy plans.
"""

import argparse
import json
import os
import subprocess
import sys

import torch
import torch_timing

from qdeploy.flash_intern_image import export_onnx, flash_intern_image, randomize_offsets


def time_torch(fn, x, warmup, iters):
    with torch.no_grad():
        return torch_timing.time_torch(fn, x, warmup, iters)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qdeploy", required=True, help="qdeploy binary")
    ap.add_argument("--out", required=True, help="results (JSON, markdown, per-layer profiles)")
    ap.add_argument("--work", default="/tmp/qdeploy-fii", help="scratch folder for the exported ONNX")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--precisions", default="fp32,fp16", help="qdeploy plans to build (comma separated)")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    results = []

    def add(name, batch, latency_ms, ips):
        row = {"name": name, "batch": batch, "latency_ms": round(latency_ms, 4), "images_per_s": round(ips, 1)}
        results.append(row)
        print(json.dumps(row), flush=True)

    torch.manual_seed(0)
    model = flash_intern_image("t").eval()
    randomize_offsets(model, seed=0)
    onnx = {}
    for fused in (False, True):
        path = os.path.join(args.work, f"fii_t{'_fused' if fused else ''}.onnx")
        export_onnx(model, path, imgsz=224, fused=fused, dynamic=True)
        onnx[fused] = path

    gpu = model.cuda()
    torch.backends.cudnn.benchmark = True
    for b in batches:
        x = torch.rand(b, 3, 224, 224, device="cuda")
        add("PyTorch eager FP32 (pure-PyTorch DCNv4)", b, *time_torch(gpu, x, args.warmup, args.iters))
    half = gpu.half()
    for b in batches:
        x = torch.rand(b, 3, 224, 224, device="cuda", dtype=torch.half)
        add("PyTorch eager FP16 (pure-PyTorch DCNv4)", b, *time_torch(half, x, args.warmup, args.iters))
    if not args.no_compile:
        compiled = torch.compile(half, mode="reduce-overhead")
        for b in batches:
            x = torch.rand(b, 3, 224, 224, device="cuda", dtype=torch.half)
            add("torch.compile FP16 (pure-PyTorch DCNv4)", b, *time_torch(compiled, x, args.warmup, args.iters))
    del gpu, half
    torch.cuda.empty_cache()

    for prec in args.precisions.split(","):
        for fused in (False, True):
            tag = f"{prec}{'_fused' if fused else ''}"
            js = os.path.join(args.out, f"qdeploy_{tag}.json")
            cmd = [args.qdeploy, "bench", onnx[fused], "--device", "cuda", "--precision", prec, "--batch",
                   args.batches, "--cuda-graph", "--warmup", str(args.warmup), "--iterations", str(args.iters),
                   "--json", js, "--export-profile", os.path.join(args.out, f"profile_{tag}.json"),
                   "--timing-cache", os.path.join(args.work, f"timing_{tag}.cache")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"qdeploy {tag} failed ({r.returncode}):\n{r.stderr[-3000:]}", file=sys.stderr, flush=True)
                continue
            with open(js) as f:
                for row in json.load(f)["results"]:
                    name = f"qdeploy {prec.upper()}" + (" (fused projections)" if fused else "")
                    add(name, row["batch"], row["gpu_compute_ms"]["median"], row["throughput_ips"])
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}\n\n")
        f.write("| run | batch | latency (ms, median) | images/s |\n|---|---|---|---|\n")
        for row in results:
            f.write(f"| {row['name']} | {row['batch']} | {row['latency_ms']:.3f} | {row['images_per_s']:.0f} |\n")


if __name__ == "__main__":
    main()
