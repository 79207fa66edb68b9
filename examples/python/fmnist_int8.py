#!/usr/bin/env python3
"""The DLA tutorial's Python flow with qdeploy: build ModelBN or ModelGN (seed 004's classifiers, trained on
Fashion-MNIST) in FP32 and in INT8 calibrated on the training images through a dataset-backed calibrator, then
evaluate both on the test split.

    PYTHONPATH=build/python:python /usr/bin/python3 examples/python/fmnist_int8.py --model models/model_bn.onnx
    ... --model models/model_gn.onnx --device cuda --plan model_gn_int8.plan

The shipped exports take batch 1 (a model exported with a dynamic batch, `python3 -m qdeploy.export ... --dynamic`
as the tutorial's export.py does, takes --batch 32).

The tutorial's TensorRT pieces and what stands for them here: ``trt.Builder`` + ``OnnxParser`` + ``BuilderConfig``
-> ``qdeploy.build(model, device, precision, ...)``; ``IInt8EntropyCalibrator2`` over a dataset ->
``qdeploy.DatasetCalibrator(dataset, batch_size, num_batches)`` (any sequence of batches works); the engine's
execution context with device buffers -> ``engine.create_context()`` and ``ctx.run({...})`` on numpy arrays.
"""

import argparse
import gzip
import time
from pathlib import Path

import numpy as np

import qdeploy


class FashionMNIST:
    """Fashion-MNIST as the classifiers take it: (float32 [3, 32, 32] in [0, 1], label); the 28x28 image zero-padded
    by two pixels and repeated over three channels (models/model_bn.md)."""

    def __init__(self, root, split):
        prefix = "train" if split == "train" else "t10k"
        with gzip.open(Path(root) / f"{prefix}-images-idx3-ubyte.gz") as f:
            self.images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(Path(root) / f"{prefix}-labels-idx1-ubyte.gz") as f:
            self.labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        x = np.pad(self.images[i].astype(np.float32) / 255, 2)
        return np.repeat(x[None], 3, axis=0), int(self.labels[i])


def batches(dataset, batch, limit):
    """(inputs, labels) batches over the first `limit` samples (all when 0)."""
    n = len(dataset) if limit <= 0 else min(limit, len(dataset))
    for start in range(0, n - n % batch, batch):
        items = [dataset[i] for i in range(start, start + batch)]
        yield np.stack([x for x, _ in items]), np.array([y for _, y in items])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="models/model_bn.onnx", help="ModelBN or ModelGN exported to ONNX")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="the Fashion-MNIST IDX files")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--batch", type=int, default=1, help="batch size for calibration and evaluation")
    p.add_argument("--calib-images", type=int, default=512, help="calibration images from the train split")
    p.add_argument("--algo", default="mse",
                   help="mse (qdeploy's default), entropy (the tutorial's), minmax, percentile or auto")
    p.add_argument("--limit", type=int, default=2000, help="test images to evaluate (0: all 10,000)")
    p.add_argument("--cache", default="", help="write the calibration cache here (TensorRT's format)")
    p.add_argument("--plan", default="", help="save the INT8 engine as a plan here")
    a = p.parse_args()

    train, test = FashionMNIST(a.data, "train"), FashionMNIST(a.data, "test")
    shapes = {"input": [a.batch, 3, 32, 32]}
    t0 = time.time()
    fp32 = qdeploy.build(a.model, device=a.device, precision="fp32", shapes=shapes)
    calibrator = qdeploy.DatasetCalibrator(train, batch_size=a.batch, num_batches=max(1, a.calib_images // a.batch))
    int8 = qdeploy.build(a.model, device=a.device, precision="int8", shapes=shapes, calibration_data=calibrator,
                         calib_algo=a.algo, calib_cache=a.cache)
    print(f"built in {time.time() - t0:.1f} s: {int8.describe()}")
    if a.plan:
        int8.save(a.plan)
        print(f"wrote {a.plan}")
    for name, engine in (("fp32", fp32), ("int8", int8)):
        t0 = time.time()
        r = qdeploy.evaluate_classifier(engine, batches(test, a.batch, a.limit))
        print(f"{name}: top-1 {100 * r.top1:.2f}%  top-5 {100 * r.top5:.2f}%  on {r.count} test images "
              f"({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
