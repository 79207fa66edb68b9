"""Train a YOLOv5 detector on COCO-format data (see qdeploy.data for the folder layout).

    python3 -m qdeploy.train --model yolov5n --data DIR --epochs 100 --batch 64 --imgsz 640 --out runs/n \\
        [--time-limit MINUTES] [--resume DIR] [--cache-images ram]

Recipe (ultralytics' hyp.scratch-low): SGD (nesterov, momentum 0.937, lr 0.01 -> 0.0001 cosine) or AdamW, warmup
over 3 epochs, nominal batch 64 through gradient accumulation, weight EMA, fp16 AMP on CUDA, gradient-norm clipping.
Writes OUT/last.pt and OUT/best.pt (lowest validation loss), each the EMA weights as a state dict with metadata.

A long run can be trained in slices (e.g. one per call of a machine that is lent for minutes at a time):
``--time-limit M`` stops, at an optimizer-step boundary inside an epoch if need be, when the next step plus saving
would not fit in M minutes from the start of the command (data caching included), and ``--resume DIR`` continues
exactly where a run in DIR stopped: model, EMA (and its update count), optimizer (momentum buffers), AMP grad scaler,
epoch and batch position, the learning-rate schedule (over the whole run's --epochs), best validation loss, RNG
states. The run's hyperparameters come from DIR; giving a different value for one of them is an error. The data must
be the same (checked by a digest of the image list and labels). Resume state, rewritten after every epoch and at a
stop, each file written atomically and all tagged with one token so that a mixed set is detected:

    model.pt      {"model": state dict}              fp32 training weights (BN statistics included)
    ema.pt        {"model": EMA state dict, "updates": n}
    optimizer.pt  {"optimizer": state dict, "scaler": GradScaler state dict}
    state.pt      counters, run arguments, data digests, timings, RNG states (written last: it commits the set)

For yolov5n each weight file is about 7.5 MB. ``--resume`` may name another folder than --out; then the files found
there (resume state, last.pt, best.pt, train.log) are first copied to --out. Every printed line is also appended to
OUT/train.log. ``--cache-images ram`` decodes all images once into shared memory (see qdeploy.data.ImageCache);
640x640 images take 1.2 MB each.
"""

import argparse
import math
import os
import random
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from .checkpoint import load_weights, save_checkpoint
from .data import cache_images, collate, detection_splits
from .loss import YoloLoss
from .models import build_model
from .optim import ModelEMA, apply_lr, autocast, default_device, grad_scaler, lr_factor, make_optimizer

NOMINAL_BATCH = 64
# Arguments that define a run: a resumed run takes them from its state, and a differing explicit value is an error.
RUN_KEYS = ("model", "nc", "epochs", "batch", "imgsz", "optimizer", "lr", "lrf", "schedule", "momentum",
            "weight_decay", "warmup_epochs", "mosaic", "close_mosaic", "seed")
RESUME_FILES = ("model.pt", "ema.pt", "optimizer.pt", "state.pt")  # state.pt last: replacing it commits the set
CARRIED_FILES = RESUME_FILES + ("last.pt", "best.pt", "train.log")
STOP_MARGIN_S = 10.0  # spare time at a stop: loader workers finishing their batch, process teardown

clock = time.monotonic  # tests replace it with a fake clock


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


class EpochSampler(Sampler):
    """Training order: a permutation drawn from (seed, dataset.epoch) alone, so that a resumed run sees the order the
    uninterrupted run would have; ``start`` skips that many samples of it (those already trained on)."""

    def __init__(self, dataset, seed=0):
        self.dataset, self.seed, self.start = dataset, seed, 0

    def order(self):
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + getattr(self.dataset, "epoch", 0) * 7_919 + 17)
        return torch.randperm(len(self.dataset), generator=gen)

    def __iter__(self):
        return iter(self.order()[self.start:].tolist())

    def __len__(self):
        return max(len(self.dataset) - self.start, 0)


def make_loaders(train_set, val_set, batch, workers, device, seed=0):
    # Workers are not persistent: each epoch's workers must see the dataset's current epoch and mosaic setting.
    kw = dict(collate_fn=collate, num_workers=workers, pin_memory=device.type == "cuda")
    train = DataLoader(train_set, batch_size=batch, sampler=EpochSampler(train_set, seed),
                       drop_last=len(train_set) >= batch, **kw)
    val = DataLoader(val_set, batch_size=batch, shuffle=False, **kw)
    return train, val


class Log:
    """print(..., flush=True), and the same line appended to a file (the log survives in the output folder)."""

    def __init__(self, path):
        self.path = path

    def __call__(self, msg):
        print(msg, flush=True)
        with open(self.path, "a") as f:
            f.write(msg + "\n")


def fmt_time(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def load_trusted(path):
    """Resume files hold RNG states and optimizer settings (numpy arrays, floats), which torch's weights-only loader
    refuses; they are this trainer's own files, so they are read with the full unpickler."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch < 1.13
        return torch.load(path, map_location="cpu")


def read_resume_state(folder):
    """The four resume files of ``folder`` as dicts, after checking that they come from one save."""
    folder = Path(folder)
    missing = [n for n in RESUME_FILES if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"--resume {folder}: missing {', '.join(missing)} (a run writes them after its "
                                "first epoch, or when it stops at its time limit)")
    parts = {n: load_trusted(folder / n) for n in RESUME_FILES}
    tags = {n: p.get("tag") for n, p in parts.items()}
    if len(set(tags.values())) != 1:
        raise RuntimeError(f"--resume {folder}: the files come from different saves ({tags}); the run was probably "
                           "killed while saving. Use a complete set.")
    return parts


def save_resume_state(out, model, ema, optimizer, scaler, state):
    """Write the four resume files atomically, all with one fresh tag, state.pt last."""
    tag = uuid.uuid4().hex
    cpu = lambda sd: {k: v.detach().cpu() for k, v in sd.items()}  # noqa: E731
    parts = {
        "model.pt": {"tag": tag, "model": cpu(model.state_dict())},
        "ema.pt": {"tag": tag, "model": cpu(ema.ema.state_dict()), "updates": ema.updates},
        "optimizer.pt": {"tag": tag, "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()},
        "state.pt": {"tag": tag, **state},
    }
    tmps = []
    for name, obj in parts.items():
        tmp = out / (name + ".tmp")
        torch.save(obj, tmp)
        tmps.append((tmp, out / name))
    for tmp, dst in tmps:  # renames only: a kill now leaves at worst a mixed set, which read_resume_state rejects
        os.replace(tmp, dst)


def rng_state():
    """All global RNG states, in plain types and tensors (no numpy objects: state.pt reads with any numpy)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": [t.cpu() for t in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
            "numpy": (name, keys.tolist(), int(pos), int(has_gauss), float(gauss)), "python": random.getstate()}


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    if s["cuda"] and torch.cuda.is_available() and len(s["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(s["cuda"])
    name, keys, pos, has_gauss, gauss = s["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(s["python"])


def apply_run_config(args, saved):
    """Take the run-defining arguments from a resumed run's state; explicit different values are an error."""
    explicit = getattr(args, "explicit", set())
    if "weights" in explicit and args.weights:
        raise ValueError("--weights and --resume exclude each other (the resume state has the weights)")
    clash = {k: (getattr(args, k), saved[k]) for k in RUN_KEYS if k in explicit and getattr(args, k) != saved[k]}
    rescheduled = None
    if getattr(args, "reschedule", False) and "epochs" in clash:
        rescheduled = clash.pop("epochs")
    if clash:
        raise ValueError("--resume: these arguments differ from the run being resumed (given, run's): "
                         + ", ".join(f"--{k.replace('_', '-')} {a} vs {b}" for k, (a, b) in clash.items())
                         + "; leave them out or give the run's values")
    for k in RUN_KEYS:
        setattr(args, k, saved[k])
    if rescheduled is not None:
        args.epochs = rescheduled[0]
    return rescheduled


def copy_carried_files(src, dst):
    if src.resolve() == dst.resolve():
        return
    for name in CARRIED_FILES:
        if (src / name).is_file():
            tmp = dst / (name + ".tmp")
            shutil.copyfile(src / name, tmp)
            os.replace(tmp, dst / name)


def train(args, t_start=None):
    """Train; returns {"best": path of best.pt, "finished": whether all --epochs are done, "epoch", "batch"}."""
    t_start = clock() if t_start is None else t_start
    deadline = t_start + 60 * args.time_limit if args.time_limit else None
    device = torch.device(args.device) if args.device else default_device()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    resume, rescheduled = None, None
    if args.resume:
        resume = read_resume_state(args.resume)
        rescheduled = apply_run_config(args, resume["state.pt"]["run"])
        copy_carried_files(Path(args.resume), out)
    log = Log(out / "train.log")
    if rescheduled is not None:
        log(f"--reschedule: the run now has {rescheduled[0]} epochs instead of {rescheduled[1]}; the LR schedule is "
            "recomputed over the new total, so the LR jumps once")
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed input size: let cuDNN pick the fastest convolutions
    train_set, val_set = detection_splits(args.data, args.imgsz, mosaic=args.mosaic, seed=args.seed)
    nc = args.nc or train_set.num_classes
    if train_set.num_classes > nc:
        raise ValueError(f"--nc {nc} but the data has {train_set.num_classes} categories")
    args.nc = nc
    digests = {"train": train_set.fingerprint(), "val": val_set.fingerprint()}
    if resume is not None and resume["state.pt"]["data"] != digests:
        raise ValueError(f"--resume: the data in {args.data} differ from the data the run was trained on (image list "
                         "or labels); regenerate the same data set")

    caches = []
    try:
        if args.cache_images == "ram":
            t0 = clock()
            for tag, ds in (("train", train_set), ("val", val_set)):
                caches.append(cache_images(ds, args.cache_dir, args.workers, tag))
            log(f"cached {len(train_set)} train + {len(val_set)} val images "
                f"({sum(c.nbytes for c in caches) / 2**30:.2f} GiB) in {caches[0].where} "
                f"in {clock() - t0:.1f} s")
        return _train_loop(args, device, out, log, train_set, val_set, resume, digests, t_start, deadline)
    finally:
        for c in caches:
            c.close()


def _train_loop(args, device, out, log, train_set, val_set, resume, digests, t_start, deadline):
    nc = args.nc
    model = build_model(args.model, nc)
    if resume is not None:
        model.load_state_dict(resume["model.pt"]["model"])
    elif args.weights:
        load_weights(model, args.weights)
    model.to(device).train()
    loss_fn = YoloLoss(model.detect, args.imgsz)
    train_loader, val_loader = make_loaders(train_set, val_set, args.batch, args.workers, device, args.seed)
    sampler = train_loader.sampler

    accumulate = max(round(NOMINAL_BATCH / args.batch), 1)
    weight_decay = args.weight_decay * args.batch * accumulate / NOMINAL_BATCH
    optimizer = make_optimizer(model, args.optimizer, args.lr, args.momentum, weight_decay)
    scaler = grad_scaler(device)
    ema = ModelEMA(model)
    nb = len(train_loader)
    total_iters = args.epochs * nb
    warmup = min(max(round(args.warmup_epochs * nb), 100), total_iters // 3)

    start_epoch, start_batch, it, best = 0, 0, 0, math.inf
    timing = {}  # seconds: "first" (an epoch's first step, worker start included), "step", "val", "save"
    if resume is not None:
        st = resume["state.pt"]
        if st["nb"] != nb:
            raise ValueError(f"--resume: {nb} batches per epoch here, {st['nb']} in the run")
        ema.ema.load_state_dict(resume["ema.pt"]["model"])
        ema.updates = resume["ema.pt"]["updates"]
        optimizer.load_state_dict(resume["optimizer.pt"]["optimizer"])
        if resume["optimizer.pt"]["scaler"] and scaler.is_enabled():
            scaler.load_state_dict(resume["optimizer.pt"]["scaler"])
        start_epoch, start_batch, it, best = st["epoch"], st["batch"], st["it"], st["best"]
        timing = dict(st["timing"])
        set_rng_state(st["rng"])
        log(f"resumed from {args.resume}: epoch {start_epoch + 1}/{args.epochs} at batch {start_batch}/{nb}, "
            f"iteration {it}, EMA updates {ema.updates}, best val loss {best:.4f}")
    log(f"{args.model}: nc={nc}, {len(train_set)} train / {len(val_set)} val images, {nb} batches/epoch of "
        f"{args.batch}, accumulate {accumulate}, {args.epochs} epochs, device {device}"
        + (f", time limit {args.time_limit:g} min" if deadline else ""))

    def state(epoch, batch):
        return dict(version=1, epoch=epoch, batch=batch, it=it, best=best, nb=nb, data=digests, timing=dict(timing),
                    run={k: getattr(args, k) for k in RUN_KEYS}, rng=rng_state())

    def save_state(epoch, batch):
        t0 = clock()
        save_resume_state(out, model, ema, optimizer, scaler, state(epoch, batch))
        timing["save"] = clock() - t0

    def out_of_time(need):
        return deadline is not None and clock() + need + STOP_MARGIN_S > deadline

    def batches_to_step(k):
        """Batches from batch ``k`` of the epoch (iteration ``it``) up to and including the next optimizer step:
        a stop can only come after a step, or accumulated gradients would be lost."""
        n = 1
        while (it + n) % accumulate and k + n < nb:
            n += 1
        return n

    def stop(epoch, batch, saved, why="time limit"):
        if not saved:
            save_state(epoch, batch)
        log(f"{why}: stopped at epoch {epoch + 1}/{args.epochs}, batch {batch}/{nb} (iteration {it}) after "
            f"{fmt_time(clock() - t_start)}; resume state in {out}: continue with --resume {out}")
        return {"best": out / "best.pt", "finished": False, "epoch": epoch, "batch": batch}

    saved = True  # whether the state on disk is the current one (true at a start or resume)
    for epoch in range(start_epoch, args.epochs):
        train_set.epoch = epoch
        closing = 0 <= args.epochs - args.close_mosaic <= epoch
        train_set.mosaic = 0.0 if closing else args.mosaic  # finish on whole images, as seen at inference
        first = start_batch if epoch == start_epoch else 0
        if args.stop_at_epoch is not None and epoch >= args.stop_at_epoch:
            return stop(epoch, first, saved, f"--stop-at-epoch {args.stop_at_epoch}")
        if first < nb and "first" in timing and out_of_time(
                timing["first"] + batches_to_step(first) * timing.get("step", timing["first"]) + timing.get("save", 0)):
            return stop(epoch, first, saved)
        sampler.start = first * args.batch
        running, seen, wait, k = torch.zeros(3), 0, 0.0, first
        t_epoch = t_fetch = clock()
        lr = optimizer.param_groups[0]["lr"]
        for imgs, targets, _ in (train_loader if first < nb else ()):
            t_got = clock()
            wait += t_got - t_fetch
            apply_lr(optimizer, args.lr * lr_factor(it / max(total_iters - 1, 1), args.lrf, args.schedule), it,
                     warmup, momentum=args.momentum)
            lr = optimizer.param_groups[0]["lr"]
            with autocast(device):
                levels = model(images_to_float(imgs, device))
            loss, parts = loss_fn([lv.float() for lv in levels], targets)
            scaler.scale(loss).backward()
            stepped = (it + 1) % accumulate == 0 or k == nb - 1
            if stepped:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                ema.update(model)
            running += parts.detach().cpu()  # also a sync point: the step times below are real
            seen += imgs.shape[0]
            it += 1
            k += 1
            saved = False
            now = clock()
            if k == first + 1:
                timing["first"] = now - t_epoch
            else:
                timing["step"] = now - t_fetch if "step" not in timing else 0.9 * timing["step"] + 0.1 * (now - t_fetch)
            if k % args.log_interval == 0 or k == nb:
                box, obj, cls = (running / (k - first)).tolist()
                log(f"epoch {epoch + 1}/{args.epochs} batch {k}/{nb} loss {box + obj + cls:.4f} (box {box:.4f} "
                    f"obj {obj:.4f} cls {cls:.4f}) lr {lr:.5f} {seen / max(now - t_epoch, 1e-9):.0f} img/s, "
                    f"data wait {100 * wait / max(now - t_epoch, 1e-9):.0f}%, elapsed {fmt_time(now - t_start)}")
            t_fetch = clock()
            if stepped and k < nb and out_of_time(
                    (batches_to_step(k) + 1) * timing.get("step", timing["first"]) + timing.get("save", 0)):
                return stop(epoch, k, saved)
        t_train = clock() - t_epoch
        n_run = k - first
        # Before the first validation, assume it costs what training does per image (it costs less).
        val_need = timing.get("val", len(val_set) * timing.get("step", timing.get("first", 0.0)) / args.batch)
        if out_of_time(val_need + 2 * timing.get("save", 0)):
            return stop(epoch, nb, saved)

        t0 = clock()
        val = validation_loss(ema.ema, val_loader, loss_fn, device, args.val_batches)
        timing["val"] = clock() - t0
        vloss = float(val.sum())
        meta = dict(model_name=args.model, nc=nc, imgsz=args.imgsz, epoch=epoch + 1, val_loss=vloss)
        save_checkpoint(out / "last.pt", ema.ema, **meta)
        if vloss < best:
            best = vloss
            save_checkpoint(out / "best.pt", ema.ema, **meta)
        save_state(epoch + 1, 0)
        saved = True
        box, obj, cls = (running / max(n_run, 1)).tolist()
        log(f"epoch {epoch + 1}/{args.epochs} done: lr {lr:.5f} train loss {box + obj + cls:.4f} (box {box:.4f} "
            f"obj {obj:.4f} cls {cls:.4f}) val loss {vloss:.4f} (box {val[0]:.4f} obj {val[1]:.4f} cls {val[2]:.4f}) "
            f"best {best:.4f} | {seen / max(t_train, 1e-9):.0f} img/s, data wait {100 * wait / max(t_train, 1e-9):.0f}%"
            f" | train {t_train:.1f} s, val {timing['val']:.1f} s | elapsed {fmt_time(clock() - t_start)}")
    return {"best": out / "best.pt", "finished": True, "epoch": args.epochs, "batch": 0}


def make_parser(suppress_defaults=False):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.train", description=__doc__.split("\n\n")[0],
                                 argument_default=argparse.SUPPRESS if suppress_defaults else None)
    d = (lambda v: argparse.SUPPRESS) if suppress_defaults else (lambda v: v)  # noqa: E731
    ap.add_argument("--model", default=d("yolov5n"))
    ap.add_argument("--data", required=not suppress_defaults,
                    help="folder with images/ + instances JSON, or train/ and val/")
    ap.add_argument("--nc", type=int, default=d(None), help="number of classes (default: from the data)")
    ap.add_argument("--weights", default=d(None), help="initial state dict (e.g. to fine-tune)")
    ap.add_argument("--epochs", type=int, default=d(100), help="epochs of the whole run (the LR schedule's length)")
    ap.add_argument("--batch", type=int, default=d(16))
    ap.add_argument("--imgsz", type=int, default=d(640))
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default=d("sgd"))
    ap.add_argument("--lr", type=float, default=d(None), help="initial lr (default 0.01 sgd, 0.001 adamw)")
    ap.add_argument("--lrf", type=float, default=d(0.01), help="final lr as a fraction of the initial one")
    ap.add_argument("--schedule", choices=("cosine", "linear"), default=d("cosine"))
    ap.add_argument("--momentum", type=float, default=d(0.937))
    ap.add_argument("--weight-decay", type=float, default=d(5e-4))
    ap.add_argument("--warmup-epochs", type=float, default=d(3.0))
    ap.add_argument("--mosaic", type=float, default=d(1.0), help="probability of a mosaic sample")
    ap.add_argument("--close-mosaic", type=int, default=d(10), help="last epochs trained without mosaic")
    ap.add_argument("--workers", type=int, default=d(min(8, os.cpu_count() or 1)))
    ap.add_argument("--cache-images", choices=("none", "ram"), default=d("none"),
                    help="ram: decode all images once into shared memory; loader workers then only augment")
    ap.add_argument("--cache-dir", default=d(None), help="folder for the image cache file (default: an anonymous "
                                                         "memory file, which vanishes with the process)")
    ap.add_argument("--val-batches", type=int, default=d(None), help="limit validation batches per epoch")
    ap.add_argument("--log-interval", type=int, default=d(50), help="a progress line every this many batches")
    ap.add_argument("--time-limit", type=float, default=d(None),
                    help="minutes from the start: stop, with resume state saved, when the next step would not fit")
    ap.add_argument("--stop-at-epoch", type=int, default=d(None),
                    help="stop, with resume state saved, once this many epochs of the run are done")
    ap.add_argument("--resume", default=d(None), help="continue the run whose resume state is in this folder")
    ap.add_argument("--reschedule", action="store_true", default=d(False),
                    help="with --resume: accept a different --epochs (the LR schedule is recomputed over the new "
                         "total, so the LR jumps once); without it a different value is an error")
    ap.add_argument("--device", default=d(None), help="cuda, cuda:1, cpu (default: cuda if available)")
    ap.add_argument("--seed", type=int, default=d(0))
    ap.add_argument("--out", required=not suppress_defaults)
    return ap


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = make_parser().parse_args(argv)
    args.explicit = set(vars(make_parser(suppress_defaults=True).parse_args(argv)))
    if args.lr is None:
        args.lr = 0.01 if args.optimizer == "sgd" else 0.001
        args.explicit.discard("lr")
    return args


def main(argv=None):
    t_start = clock()
    args = parse_args(argv)
    # A SIGTERM (e.g. from `timeout`) unwinds like an exception, so the image cache files are removed.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)) if argv is None else None
    try:
        result = train(args, t_start)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if result["finished"]:
        print(f"best checkpoint: {result['best']}", flush=True)
    else:
        print(f"not finished (epoch {result['epoch'] + 1}, batch {result['batch']}); best checkpoint so far: "
              f"{result['best']}", flush=True)
    return result


if __name__ == "__main__":
    main()
