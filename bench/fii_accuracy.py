"""FlashInternImage-T (seeded random weights) accuracy of qdeploy's GPU plans against PyTorch FP32 on random images.

    PYTHONPATH=python python3 bench/fii_accuracy.py --qdeploy build-gpu/qdeploy --out OUTDIR [--images 1000]

PyTorch FP32 (TF32 off) on the GPU gives the reference logits of --images random 224x224 images (uniform [0, 1],
normalized with ImageNet's mean and std). qdeploy builds an FP32 and an FP16 plan of the same weights (ONNX export
with fused value/offset projections) and runs every batch with `qdeploy run`. Reported per plan: max |diff| over the
logits' range, SNR in dB, and top-1 agreement with PyTorch. Writes OUTDIR/accuracy.json. Exit 1 when FP32 misses
1e-4 of the range or FP16 40 dB SNR (the FlashInternImage issue's limits).
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

from qdeploy.flash_intern_image import export_onnx, flash_intern_image, randomize_offsets

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def compare(ref, got):
    diff = got - ref
    rng = float(np.abs(ref).max())
    snr = 10 * math.log10(float((ref.astype(np.float64) ** 2).sum()) / max(float((diff.astype(np.float64) ** 2).sum()),
                                                                          1e-30))
    return {"max_abs_diff": float(np.abs(diff).max()), "range": rng, "ratio": float(np.abs(diff).max()) / rng,
            "snr_db": round(snr, 2), "top1_agree": float((ref.argmax(1) == got.argmax(1)).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qdeploy", required=True, help="qdeploy binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/qdeploy-fii-acc", help="scratch folder (ONNX, plans, batches)")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    torch.manual_seed(0)
    model = flash_intern_image("t").eval()
    randomize_offsets(model, seed=0)
    onnx = os.path.join(args.work, "fii_t_fused.onnx")
    export_onnx(model, onnx, imgsz=224, batch=args.batch, fused=True)
    gpu = model.cuda()
    rng = np.random.default_rng(1)
    batches, ref = [], []
    for k in range(0, args.images, args.batch):
        x = ((rng.random((min(args.batch, args.images - k), 3, 224, 224), dtype=np.float32) - MEAN) / STD)
        path = os.path.join(args.work, f"batch{k // args.batch}.npy")
        np.save(path, x.astype(np.float32))
        batches.append(path)
        with torch.no_grad():
            ref.append(gpu(torch.from_numpy(x).cuda()).float().cpu().numpy())
    ref = np.concatenate(ref)

    report = {"gpu": torch.cuda.get_device_name(), "images": args.images, "plans": {}}
    ok = True
    for prec in ("fp32", "fp16"):
        plan = os.path.join(args.work, f"fii_t_{prec}.plan")
        subprocess.run([args.qdeploy, "build", onnx, "-o", plan, "--device", "cuda", "--precision", prec], check=True,
                       stdout=subprocess.DEVNULL)
        got = []
        for path in batches:
            od = path[:-4] + f"_{prec}"
            subprocess.run([args.qdeploy, "run", plan, "--input", f"input={path}", "--output-dir", od], check=True,
                           stdout=subprocess.DEVNULL)
            got.append(np.load(os.path.join(od, "output.npy")).astype(np.float32))
        r = compare(ref, np.concatenate(got))
        report["plans"][prec] = r
        print(prec, json.dumps(r), flush=True)
        ok = ok and (r["ratio"] <= 1e-4 if prec == "fp32" else r["snr_db"] >= 40)
    with open(os.path.join(args.out, "accuracy.json"), "w") as f:
        json.dump(report, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
