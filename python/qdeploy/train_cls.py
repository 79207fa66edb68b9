"""Train the seed-004 classifiers (ModelBN / ModelGN), a small FlashInternImage, or the zoo's small ConvNeXt,
MobileNetV3, ResNet, RegNetY or ShuffleNetV2 on Fashion-MNIST and report top-1 on the test split.

    python3 -m qdeploy.train_cls --model bn --epochs 10 --out runs/bn
    python3 -m qdeploy.train_cls --model fii --optimizer adamw --lr 2e-3 --weight-decay 0.05 --out runs/fii

``fii`` is flash_intern_image's ``fmnist`` configuration (export it with ``python3 -m qdeploy.flash_intern_image
--config fmnist --num-classes 10 --imgsz 32 --weights OUT/best.pt``); ``convnext``, ``mobilenet``, ``resnet``,
``regnet`` and ``shufflenet`` are qdeploy.models.zoo's ``NAME_fmnist`` (export with ``python3 -m qdeploy.models.zoo
--model convnext_fmnist --num-classes 10 --imgsz 32 --dynamic --weights OUT/best.pt``).

Inputs follow qdeploy.data.to_classifier_input (28x28 zero-padded to 32x32, three equal channels, pixel / 255).
SGD with nesterov momentum, one warmup epoch then cosine decay, fp16 AMP on CUDA. The whole split lives in memory
as uint8 and batches are built and augmented on the training device, so no loader workers are needed.
Writes OUT/last.pt and OUT/best.pt (highest test top-1) as state dicts with metadata.
"""

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .checkpoint import save_checkpoint
from .data import FASHION_MNIST_DIR, augment_classifier_batch, load_fashion_mnist, to_classifier_input
from .flash_intern_image import flash_intern_image
from .models import CLASSIFIERS, build_model, zoo

# Trainable here but not by qdeploy.export / qat: FlashInternImage exports through flash_intern_image (the DCNv4 node),
# the zoo's small variants through qdeploy.models.zoo.
EXTRA_MODELS = {"fii": lambda nc: flash_intern_image("fmnist", nc),
                "convnext": lambda nc: zoo.build("convnext_fmnist", nc),
                "mobilenet": lambda nc: zoo.build("mobilenet_fmnist", nc),
                "resnet": lambda nc: zoo.build("resnet_fmnist", nc),
                "regnet": lambda nc: zoo.build("regnet_fmnist", nc),
                "shufflenet": lambda nc: zoo.build("shufflenet_fmnist", nc)}
from .optim import apply_lr, autocast, default_device, grad_scaler, lr_factor, make_optimizer


@torch.no_grad()
def top1(model, images, labels, device, batch=1000):
    """Top-1 accuracy (fraction) of ``model`` on uint8 [N, 28, 28] images."""
    was_training = model.training
    model.eval()
    correct = 0
    for i in range(0, len(labels), batch):
        x = to_classifier_input(images[i:i + batch].to(device))
        with autocast(device):
            correct += int((model(x).argmax(1).cpu() == labels[i:i + batch]).sum())
    model.train(was_training)
    return correct / len(labels)


def train(args):
    device = torch.device(args.device) if args.device else default_device()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_x, train_y = load_fashion_mnist("train", args.data)
    test_x, test_y = load_fashion_mnist("test", args.data)
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    model = (EXTRA_MODELS[args.model](10) if args.model in EXTRA_MODELS else build_model(args.model, 10))
    model = model.to(device).train()
    optimizer = make_optimizer(model, args.optimizer, args.lr, 0.9, args.weight_decay)
    scaler = grad_scaler(device)
    train_x, train_y = train_x.to(device), train_y.to(device)
    nb = math.ceil(len(train_y) / args.batch)
    total, warmup = args.epochs * nb, min(nb, args.epochs * nb // 3)
    print(f"model {args.model}: {len(train_y)} train / {len(test_y)} test images, {nb} batches/epoch, device {device}",
          flush=True)
    best, it = -1.0, 0
    for epoch in range(args.epochs):
        perm = torch.randperm(len(train_y), device=device)
        t0, loss_sum = time.time(), 0.0
        for k in range(nb):
            idx = perm[k * args.batch:(k + 1) * args.batch]
            x = augment_classifier_batch(to_classifier_input(train_x[idx]))
            apply_lr(optimizer, args.lr * lr_factor(it / max(total - 1, 1), 0.01), it, warmup, momentum=0.9)
            with autocast(device):
                loss = F.cross_entropy(model(x).float(), train_y[idx])
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            loss_sum += loss.item()
            it += 1
        acc = top1(model, test_x, test_y, device)
        meta = dict(model_name=args.model, nc=10, epoch=epoch + 1, top1=acc)
        save_checkpoint(out / "last.pt", model, **meta)
        if acc > best:
            best = acc
            save_checkpoint(out / "best.pt", model, **meta)
        print(f"epoch {epoch + 1}/{args.epochs} loss {loss_sum / nb:.4f} test top-1 {acc * 100:.2f}% "
              f"(best {best * 100:.2f}%) {len(train_y) / (time.time() - t0):.0f} img/s", flush=True)
    return best


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.train_cls", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(CLASSIFIERS) + sorted(EXTRA_MODELS), default="bn")
    ap.add_argument("--data", default=FASHION_MNIST_DIR, help="folder with the Fashion-MNIST IDX .gz files")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd", help="sgd: nesterov, momentum 0.9; "
                    "adamw: betas (0.9, 0.999)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def main(argv=None):
    best = train(parse_args(argv))
    print(f"best test top-1: {best * 100:.2f}%")


if __name__ == "__main__":
    main()
