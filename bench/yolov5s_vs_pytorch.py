"""qdeploy against PyTorch on one GPU in one run: YOLOv5s at 640 (seeded random weights, BN folded as ultralytics
does for inference), batch 1, 8 and 32.

    PYTHONPATH=python python3 bench/yolov5s_vs_pytorch.py --qdeploy /tmp/qdeploy --out OUTDIR

PyTorch runs eager FP16 (channels_last, cudnn.benchmark) and torch.compile(mode="reduce-overhead") FP16; qdeploy runs
`qdeploy bench` on the same weights exported to ONNX (dynamic batch) at each --precision given. Latency is GPU time
per forward from CUDA events (median); throughput is images/s over back-to-back forwards. Writes OUTDIR/results.json
and OUTDIR/results.md.

PyTorch's FP16 model takes an fp16 channels_last (NHWC) batch and returns fp16 detections; with `--io fp16` (the
default) qdeploy's plans get the same bindings (`--input-format fp16:nhwc --output-format fp16`), with `--io fp32` the
ONNX form (fp32 NCHW in, fp32 out: twice the bytes at both ends), named "[fp32 I/O]" in the results, and with
`--io int8` INT8 plans take an int8 NHWC input (`--input-format int8:nhwc --output-format fp16`: the image quantized
by the caller's preprocessing kernel, as the seeds' trtexec runs give INT8 engines `--inputIOFormats=int8:...`), named
"[int8 in]".
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
from torch_timing import time_torch

from qdeploy.models import build_model
from qdeploy.models.fuse import fuse_conv_bn
from qdeploy.onnx_export import export_detector


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qdeploy", required=True, help="qdeploy binary")
    ap.add_argument("--out", required=True, help="results (JSON, markdown, per-layer profiles)")
    ap.add_argument("--work", default="/tmp/qdeploy-bench", help="scratch folder for the exported ONNX")
    ap.add_argument("--model", default="yolov5s")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--precisions", default="fp16",
                    help="qdeploy builds, comma-separated: PRECISION[:SOURCES], e.g. fp16,fp16:qdeploy,int8 (SOURCES: "
                    "--tactic-sources for the fp16 convs, '+'-separated; default qdeploy's and cuDNN's kernels)")
    ap.add_argument("--calib-images", help="int8: images for a minmax calibration of the random-weight model "
                    "(the scales only have to be plausible for a speed measurement)")
    ap.add_argument("--io", default="fp16", help="qdeploy bindings, comma-separated: fp16 (fp16 NHWC input and fp16 "
                    "output, as PyTorch's FP16 model), fp32 (the ONNX form), int8 (INT8 plans: int8 NHWC input, fp16 "
                    "output)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes minutes)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]

    torch.manual_seed(0)
    model = fuse_conv_bn(build_model(args.model, 80).eval())
    onnx_path = os.path.join(args.work, f"{args.model}.onnx")
    export_detector(model, onnx_path, 640, dynamic=True, prepared=True)

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    net = model.to(dev).half().to(memory_format=torch.channels_last)
    results = {"gpu": gpu, "model": args.model, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
               "rows": []}

    def add(name, batch, latency_ms, ips):
        row = {"runner": name, "batch": batch, "latency_ms": latency_ms, "throughput_ips": ips}
        results["rows"].append(row)
        print(json.dumps(row), flush=True)

    with torch.inference_mode():
        eager = lambda x: net(x)  # noqa: E731
        for b in batches:
            x = torch.rand(b, 3, 640, 640, device=dev).half().to(memory_format=torch.channels_last)
            add("pytorch eager fp16", b, *time_torch(eager, x, args.warmup, args.iters))
    if not args.no_compile:
        compiled = torch.compile(net, mode="reduce-overhead")
        with torch.inference_mode():
            for b in batches:
                x = torch.rand(b, 3, 640, 640, device=dev).half().to(memory_format=torch.channels_last)
                t0 = time.time()
                compiled(x)
                compiled(x)
                print(f"torch.compile batch {b}: compiled in {time.time() - t0:.0f} s", flush=True)
                add("pytorch compile fp16", b, *time_torch(compiled, x, args.warmup, args.iters))
    del net
    torch.cuda.empty_cache()

    runs = [(entry, io) for io in args.io.split(",") for entry in args.precisions.split(",")]
    for entry, io in runs:
        if io not in ("fp16", "fp32", "int8"):
            sys.exit(f"--io {io}: expected fp16, fp32 or int8")
        prec, _, sources = entry.partition(":")
        if io == "int8" and prec != "int8":
            continue  # an int8 input binding is for INT8 plans
        tag = entry.replace(":", "_").replace("+", "_") + {"fp16": "", "fp32": "_io32", "int8": "_io8"}[io]
        name = (f"qdeploy {prec}" + (f" [{sources}]" if sources else "") +
                {"fp16": "", "fp32": " [fp32 I/O]", "int8": " [int8 in]"}[io])
        js = os.path.join(args.out, f"qdeploy_{tag}.json")
        cmd = [args.qdeploy, "bench", onnx_path, "--device", "cuda", "--precision", prec, "--batch", args.batches,
               "--cuda-graph", "--warmup", str(args.warmup), "--iterations", str(args.iters), "--json", js,
               "--export-profile", os.path.join(args.out, f"profile_{tag}.json")]
        if io != "fp32":
            cmd += ["--input-format", f"{io}:nhwc", "--output-format", "fp16"]
        if sources:
            cmd += ["--tactic-sources", sources.replace("+", ",")]
        if prec == "int8":
            if not args.calib_images:
                results.setdefault("errors", []).append("qdeploy int8: needs --calib-images")
                continue
            cache = os.path.join(args.work, f"{args.model}.cache")
            subprocess.run([args.qdeploy, "calibrate", onnx_path, "--data", args.calib_images, "--algo", "minmax",
                            "--batches", "2", "--batch-size", "4", "--cache", cache], check=True)
            cmd += ["--calib-cache", cache]
        print(" ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(r.stdout[-4000:])
        if r.returncode != 0:
            sys.stdout.write(r.stderr[-4000:])
            results.setdefault("errors", []).append(f"{name}: exit {r.returncode}")
            continue
        with open(js) as f:
            for row in json.load(f)["results"]:
                add(name, row["batch"], row["gpu_compute_ms"]["median"], row["throughput_ips"])

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"{args.model} 640, {gpu}, torch {torch.__version__}, {results['date']}", "",
             "| runner | batch | GPU latency median (ms) | throughput (img/s) |", "|---|---|---|---|"]
    for r in results["rows"]:
        lines.append(f"| {r['runner']} | {r['batch']} | {r['latency_ms']:.3f} | {r['throughput_ips']:.0f} |")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
