"""Train a YOLOv5 detector on COCO-format data (see qdeploy.data for the folder layout).

    python3 -m qdeploy.train --model yolov5n --data DIR --epochs 100 --batch 64 --imgsz 640 --out runs/n

Recipe (ultralytics' hyp.scratch-low): SGD (nesterov, momentum 0.937, lr 0.01 -> 0.0001 cosine) or AdamW, warmup
over 3 epochs, nominal batch 64 through gradient accumulation, weight EMA, fp16 AMP on CUDA, gradient-norm clipping.
Writes OUT/last.pt and OUT/best.pt (lowest validation loss), each the EMA weights as a state dict with metadata.
"""

import argparse
import math
import os
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from .checkpoint import load_weights, save_checkpoint
from .data import collate, detection_splits
from .loss import YoloLoss
from .models import build_model
from .optim import ModelEMA, apply_lr, autocast, default_device, grad_scaler, lr_factor, make_optimizer

NOMINAL_BATCH = 64


def images_to_float(imgs, device):
    """uint8 [N,3,H,W] -> float in [0, 1] on ``device`` (the network's input contract)."""
    return imgs.to(device, non_blocking=True).float() / 255


@torch.no_grad()
def validation_loss(model, loader, loss_fn, device, max_batches=None):
    """Mean loss parts (box, obj, cls) over the loader, per image, with the model in eval mode."""
    was_training = model.training
    model.eval()
    total, n = torch.zeros(3, device=device), 0
    for k, (imgs, targets, _) in enumerate(loader):
        if max_batches is not None and k >= max_batches:
            break
        with autocast(device):
            levels = model.raw_levels(images_to_float(imgs, device))
        total += loss_fn([lv.float() for lv in levels], targets)[1]
        n += 1
    model.train(was_training)
    return (total / max(n, 1)).cpu()


def make_loaders(train_set, val_set, batch, workers, device):
    # Workers are not persistent: each epoch's workers must see the dataset's current epoch and mosaic setting.
    kw = dict(collate_fn=collate, num_workers=workers, pin_memory=device.type == "cuda")
    train = DataLoader(train_set, batch_size=batch, shuffle=True, drop_last=len(train_set) >= batch, **kw)
    val = DataLoader(val_set, batch_size=batch, shuffle=False, **kw)
    return train, val


def train(args):
    device = torch.device(args.device) if args.device else default_device()
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_set, val_set = detection_splits(args.data, args.imgsz, mosaic=args.mosaic, seed=args.seed)
    nc = args.nc or train_set.num_classes
    if train_set.num_classes > nc:
        raise ValueError(f"--nc {nc} but the data has {train_set.num_classes} categories")
    model = build_model(args.model, nc)
    if args.weights:
        load_weights(model, args.weights)
    model.to(device).train()
    loss_fn = YoloLoss(model.detect, args.imgsz)
    train_loader, val_loader = make_loaders(train_set, val_set, args.batch, args.workers, device)

    accumulate = max(round(NOMINAL_BATCH / args.batch), 1)
    weight_decay = args.weight_decay * args.batch * accumulate / NOMINAL_BATCH
    optimizer = make_optimizer(model, args.optimizer, args.lr, args.momentum, weight_decay)
    scaler = grad_scaler(device)
    ema = ModelEMA(model)
    nb = len(train_loader)
    total_iters = args.epochs * nb
    warmup = min(max(round(args.warmup_epochs * nb), 100), total_iters // 3)
    print(f"{args.model}: nc={nc}, {len(train_set)} train / {len(val_set)} val images, {nb} batches/epoch of "
          f"{args.batch}, accumulate {accumulate}, device {device}", flush=True)

    best, it = math.inf, 0
    for epoch in range(args.epochs):
        train_set.epoch = epoch
        if epoch == args.epochs - args.close_mosaic:
            train_set.mosaic = 0.0  # finish on whole images, as they will be seen at inference
        running, t0, seen = torch.zeros(3), time.time(), 0
        for k, (imgs, targets, _) in enumerate(train_loader):
            apply_lr(optimizer, args.lr * lr_factor(it / max(total_iters - 1, 1), args.lrf, args.schedule), it,
                     warmup, momentum=args.momentum)
            with autocast(device):
                levels = model(images_to_float(imgs, device))
            loss, parts = loss_fn([lv.float() for lv in levels], targets)
            scaler.scale(loss).backward()
            if (it + 1) % accumulate == 0 or k == nb - 1:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                ema.update(model)
            running += parts.cpu()
            seen += imgs.shape[0]
            it += 1
            if (k + 1) % args.log_interval == 0 or k == nb - 1:
                box, obj, cls = (running / (k + 1)).tolist()
                print(f"epoch {epoch + 1}/{args.epochs} batch {k + 1}/{nb} loss {box + obj + cls:.4f} "
                      f"(box {box:.4f} obj {obj:.4f} cls {cls:.4f}) lr {optimizer.param_groups[0]['lr']:.5f} "
                      f"{seen / (time.time() - t0):.0f} img/s", flush=True)
        val = validation_loss(ema.ema, val_loader, loss_fn, device, args.val_batches)
        meta = dict(model_name=args.model, nc=nc, imgsz=args.imgsz, epoch=epoch + 1, val_loss=float(val.sum()))
        save_checkpoint(out / "last.pt", ema.ema, **meta)
        if float(val.sum()) < best:
            best = float(val.sum())
            save_checkpoint(out / "best.pt", ema.ema, **meta)
        print(f"epoch {epoch + 1}: val loss {float(val.sum()):.4f} (box {val[0]:.4f} obj {val[1]:.4f} "
              f"cls {val[2]:.4f}), best {best:.4f}", flush=True)
    return out / "best.pt"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="yolov5n")
    ap.add_argument("--data", required=True, help="folder with images/ + instances JSON, or train/ and val/")
    ap.add_argument("--nc", type=int, default=None, help="number of classes (default: from the data)")
    ap.add_argument("--weights", help="initial state dict (e.g. to continue training)")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    ap.add_argument("--lr", type=float, default=None, help="initial lr (default 0.01 sgd, 0.001 adamw)")
    ap.add_argument("--lrf", type=float, default=0.01, help="final lr as a fraction of the initial one")
    ap.add_argument("--schedule", choices=("cosine", "linear"), default="cosine")
    ap.add_argument("--momentum", type=float, default=0.937)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--warmup-epochs", type=float, default=3.0)
    ap.add_argument("--mosaic", type=float, default=1.0, help="probability of a mosaic sample")
    ap.add_argument("--close-mosaic", type=int, default=10, help="last epochs trained without mosaic")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--val-batches", type=int, default=None, help="limit validation batches per epoch")
    ap.add_argument("--log-interval", type=int, default=50)
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda if available)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.lr is None:
        args.lr = 0.01 if args.optimizer == "sgd" else 0.001
    return args


def main(argv=None):
    best = train(parse_args(argv))
    print(f"best checkpoint: {best}")


if __name__ == "__main__":
    main()
