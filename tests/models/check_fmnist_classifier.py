#!/usr/bin/env python3
"""A shipped Fashion-MNIST classifier (models/NAME.onnx: fii_fmnist and the zoo's NAME_fmnist variants) on the CPU
reference: `qdeploy eval --fmnist` on the first N test images must give the top-1 that models/NAME.md states for them.

    check_fmnist_classifier.py QDEPLOY NAME [--data DIR] [--count N] [--expect K] [EVAL ARGS...]

Writes the subset as plain IDX files in a temporary folder (eval reads a whole split). Exit 77 (skipped) when the
data set is not installed (Debian's dataset-fashion-mnist).
"""

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"
# Correct top-1 predictions of models/NAME.onnx on the first 200 test images (models/NAME.md): FP32, and INT8 with the
# shipped calibration cache models/NAME.cache (exact integer arithmetic).
EXPECTED_FIRST_200 = {
    "fii_fmnist": {"fp32": 184, "int8": 185},
    "convnext_fmnist": {"fp32": 178, "int8": 177},
    "mobilenet_fmnist": {"fp32": 183, "int8": 180},
    "resnet_fmnist": {"fp32": 184, "int8": 184},
    "regnet_fmnist": {"fp32": 183, "int8": 184},
    "shufflenet_fmnist": {"fp32": 184, "int8": 184},
}


def read_idx(path):
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def write_subset(data, out, count):
    """DIR/t10k-{images-idx3,labels-idx1}-ubyte holding the first ``count`` test images and labels."""
    for kind, item in (("images-idx3", 28 * 28), ("labels-idx1", 1)):
        name = f"t10k-{kind}-ubyte"
        src = data / f"{name}.gz" if (data / f"{name}.gz").exists() else data / name
        raw = read_idx(src)
        rank = raw[3]
        header = bytearray(raw[:4 + 4 * rank])
        header[4:8] = count.to_bytes(4, "big")
        (out / name).write_bytes(bytes(header) + raw[4 + 4 * rank:4 + 4 * rank + count * item])


def evaluate(qdeploy, model, subset, extra):
    """`qdeploy eval MODEL --fmnist SUBSET --json` -> (top-1 fraction, images), or an error message."""
    cmd = [qdeploy, "eval", str(model), "--fmnist", str(subset), "--json", "-q", *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, f"{' '.join(cmd)} exited {run.returncode}\n{run.stdout}{run.stderr}"
    result = json.loads(run.stdout)
    return result, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("qdeploy")
    ap.add_argument("name", choices=sorted(EXPECTED_FIRST_200), help="the shipped model models/NAME.onnx")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default=None, help="another ONNX file to evaluate (default: models/NAME.onnx)")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--expect", type=int, default=None, help="correct predictions expected with the given eval "
                    "arguments; without it (and with --count 200 and no eval arguments), the card's FP32 and INT8 "
                    "counts")
    args, extra = ap.parse_known_args()  # the rest: more `qdeploy eval` arguments
    model = args.model or str(MODELS / f"{args.name}.onnx")
    expected = EXPECTED_FIRST_200[args.name]
    data = Path(args.data)
    if not any((data / f"t10k-images-idx3-ubyte{ext}").exists() for ext in ("", ".gz")):
        print(f"skipped: no Fashion-MNIST test split in {data} (apt install dataset-fashion-mnist)")
        return 77
    if args.expect is not None or extra or args.count != 200:
        runs = [(extra, args.expect)]
    else:
        runs = [([], expected["fp32"]),
                (["--precision", "int8", "--calib-cache", str(MODELS / f"{args.name}.cache")], expected["int8"])]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        write_subset(data, Path(tmp), args.count)
        for eval_args, expect in runs:
            result, what = evaluate(args.qdeploy, model, tmp, eval_args)
            if result is None:
                print(f"FAIL: {what}")
                failed = True
                continue
            correct = round(result["top1"] * result["images"])
            ok = result["images"] == args.count and (expect is None or correct == expect)
            failed |= not ok
            print(f"{'ok' if ok else 'FAIL'}: {what}: top-1 {correct}/{result['images']} "
                  f"({100 * result['top1']:.2f}%), top-5 {100 * result['top5']:.2f}%"
                  + ("" if expect is None else f"; expected {expect}/{args.count}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
