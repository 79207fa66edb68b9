"""Quantization-aware training: insert fake quantizers, calibrate, fine-tune against the FP32 model, export Q/DQ ONNX.

    python3 -m qdeploy.qat --model yolov5n --nc 10 --weights fp32.pt --data DIR --calib-batches 16 --epochs 2 \
        --placement 1 --out runs/qat
    python3 -m qdeploy.qat --model bn --weights bn.pt --calib-batches 16 --epochs 1 --out runs/qat_bn

Steps: load the FP32 weights and fold BatchNorm; keep that model as the teacher; quantize a copy with the chosen Q/DQ
placement (1: TensorRT style, 2: every layer); calibrate activation ranges on training images without augmentation;
fine-tune with ``task_weight * task + distill * distillation`` towards the teacher; export OUT/qat.onnx and save
OUT/qat.pt. Validation losses of FP32, PTQ (calibrated, before fine-tuning) and QAT are printed so the cost of
quantization is visible.

Distillation: the classifier's is the MSE of the logits. The detector's (``--distill-mode decoded``, the default)
compares the sigmoid outputs per anchor cell: the squared objectness difference everywhere, plus the box (decoded xy
and wh in grid units) and class differences weighted by the teacher's objectness, so background cells, whose large
negative logits vanish after the sigmoid, do not dominate it; ``raw`` is the MSE of the three raw head maps.
"""

import argparse
import copy
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from .checkpoint import load_weights, save_checkpoint
from .data import FASHION_MNIST_DIR, CocoDetection, augment_classifier_batch, collate, detection_splits, \
    find_split, load_fashion_mnist, to_classifier_input
from .loss import YoloLoss
from .models import MODEL_NAMES, build_model, is_classifier
from .models.fuse import fuse_conv_bn
from .optim import ModelEMA, apply_lr, autocast, default_device, grad_scaler, lr_factor
from .quant import METHODS, TensorQuantizer, activation_quantizers, calibrate, export_qat_classifier, \
    export_qat_detector, keep_float, quantize_model, set_quantization
from .train import images_to_float, make_loaders, validation_loss
from .train_cls import top1


def make_student_teacher(args, nc, device, example_input):
    model = build_model(args.model, nc)
    load_weights(model, args.weights)
    teacher = fuse_conv_bn(model).to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = quantize_model(copy.deepcopy(teacher), args.placement, example_input.to(device))
    if args.float_layers:
        kept = keep_float(student, args.float_layers.split(","))
        if not kept:
            raise SystemExit(f"--float-layers {args.float_layers!r} matches no quantized conv or linear")
        print(f"kept in float while fine-tuning: {', '.join(kept)}", flush=True)
    return student, teacher


def decoded_distill_loss(student_levels, teacher_levels, detect):
    """Distillation on decoded detector outputs, summed over levels of [N, na, H, W, 5+nc] raw predictions.

    Per level, the mean over anchor cells of ``(obj_s - obj_t)^2 + obj_t * (sum_box (b_s - b_t)^2 +
    mean_cls (cls_s - cls_t)^2)``: obj and cls are sigmoid probabilities, the box is yolov5's xy = 2*sig - 0.5 and
    wh = (2*sig)^2 * anchor / stride, both in grid units of the level. obj_t, the teacher's objectness, weights the box
    and class terms; no gradient reaches the teacher. ``detect`` supplies the anchors and strides.
    """
    loss = 0
    for i, (s, t) in enumerate(zip(student_levels, teacher_levels)):
        anchor = (detect.anchors[i] / detect.stride[i]).to(s).view(1, -1, 1, 1, 2)
        (box_s, obj_s, cls_s), (box_t, obj_t, cls_t) = (_decoded(p, anchor) for p in (s, t.detach()))
        box = (box_s - box_t).pow(2).sum(-1)
        cls = (cls_s - cls_t).pow(2).mean(-1)
        loss = loss + ((obj_s - obj_t).pow(2) + obj_t * (box + cls)).mean()
    return loss


def _decoded(p, anchor):
    """(box [..., 4] in grid units, objectness, class probabilities) of raw predictions [N, na, H, W, 5+nc]."""
    y = p.sigmoid()
    return torch.cat((y[..., :2] * 2 - 0.5, (y[..., 2:4] * 2) ** 2 * anchor), -1), y[..., 4], y[..., 5:]


def finetune(student, steps_per_epoch, batches, task_and_distill, args, device):
    """Shared loop: ``batches()`` yields per-epoch iterables; ``task_and_distill(batch)`` returns the two losses.
    Returns the model to keep: the student, or with ``--ema`` the moving average of its weights (and scales)."""
    student.train().requires_grad_(True)  # it was copied from the frozen teacher; amax values are buffers and stay
    quantizers = [m for m in student.modules() if isinstance(m, TensorQuantizer) and m.enabled and m.calibrated]
    if args.learn_ranges:  # LSQ: the quantizers' scales train with the weights, then go back into amax for export
        for q in quantizers:
            q.learn_range()
    scales = [p for q in quantizers for p in (q.learned_scale, q.learned_low) if p is not None]
    ids = {id(p) for p in scales}
    groups = [{"params": [p for p in student.parameters() if id(p) not in ids]}]
    if scales:  # Adam steps every parameter by about lr whatever its gradient: the scales get their own rate
        groups.append({"params": scales, "lr_scale": args.range_lr_scale})
    optimizer = torch.optim.Adam(groups, lr=args.lr)
    scaler = grad_scaler(device)
    ema = ModelEMA(student, args.ema, tau=args.ema_tau) if args.ema else None
    total, it = args.epochs * steps_per_epoch, 0
    for epoch in range(args.epochs):
        for k, batch in enumerate(batches(epoch)):
            if k >= steps_per_epoch:
                break
            apply_lr(optimizer, args.lr * lr_factor(it / max(total - 1, 1), args.final_lr), it, args.warmup)
            with autocast(device):
                task, distill = task_and_distill(batch)
                loss = args.task_weight * task + args.distill * distill
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if ema:
                ema.update(student)
            it += 1
            if (k + 1) % args.log_interval == 0 or k == steps_per_epoch - 1:
                print(f"qat epoch {epoch + 1}/{args.epochs} batch {k + 1}/{steps_per_epoch} task {task.item():.4f} "
                      f"distill {distill.item():.5f} lr {optimizer.param_groups[0]['lr']:.2e}", flush=True)
    kept = ema.ema if ema else student
    for q in kept.modules():
        if isinstance(q, TensorQuantizer):
            q.freeze_range()
    return kept


def run_detector(args, device):
    train_set, val_set = detection_splits(args.data, args.imgsz, mosaic=args.mosaic, seed=args.seed)
    nc = args.nc or train_set.num_classes
    student, teacher = make_student_teacher(args, nc, device, torch.zeros(1, 3, 64, 64))
    loss_fn = YoloLoss(teacher.detect, args.imgsz)
    train_loader, val_loader = make_loaders(train_set, val_set, args.batch, args.workers, device)

    calib_set = CocoDetection(*find_split(args.data, "train"), args.imgsz)  # no augmentation
    calib_loader = DataLoader(calib_set, batch_size=args.batch, shuffle=True, collate_fn=collate,
                              num_workers=args.workers)
    used = calibrate(student, (images_to_float(b[0], device) for b in calib_loader), args.calib_method,
                     args.percentile, args.calib_batches)
    print(f"calibrated on {used} batches ({args.calib_method})", flush=True)
    if args.asymmetric_activations:
        for q in activation_quantizers(student):
            if q.enabled:
                q.make_asymmetric()

    def report(tag, model):
        v = validation_loss(model, val_loader, loss_fn, device, args.val_batches)
        print(f"{tag} val loss {float(v.sum()):.4f} (box {v[0]:.4f} obj {v[1]:.4f} cls {v[2]:.4f})", flush=True)

    report("fp32", teacher)
    report("ptq ", student)

    def task_and_distill(batch):
        imgs, targets, _ = batch
        x = images_to_float(imgs, device)
        levels = [lv.float() for lv in student(x)]
        with torch.no_grad():
            ref = [lv.float() for lv in teacher.raw_levels(x)]
        if args.distill_mode == "decoded":
            distill = decoded_distill_loss(levels, ref, teacher.detect)
        else:
            distill = sum(F.mse_loss(s, t) for s, t in zip(levels, ref))
        return loss_fn(levels, targets)[0] / len(imgs), distill  # per image, comparable to validation losses

    def batches(epoch):
        train_set.epoch = epoch
        return train_loader

    steps = min(len(train_loader), args.max_batches or len(train_loader))
    student = finetune(student, steps, batches, task_and_distill, args, device)
    report("qat ", student)
    return student, lambda path: export_qat_detector(student, path, args.imgsz, args.head_only, args.dynamic), nc


def run_classifier(args, device):
    train_x, train_y = load_fashion_mnist("train", args.data)
    test_x, test_y = load_fashion_mnist("test", args.data)
    student, teacher = make_student_teacher(args, 10, device, torch.zeros(1, 3, 32, 32))
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train_y), generator=gen)
    calib = (to_classifier_input(train_x[order[i:i + args.batch]]).to(device)
             for i in range(0, len(order), args.batch))
    used = calibrate(student, calib, args.calib_method, args.percentile, args.calib_batches)
    print(f"calibrated on {used} batches ({args.calib_method})", flush=True)
    print(f"fp32 test top-1 {top1(teacher, test_x, test_y, device) * 100:.2f}%", flush=True)
    print(f"ptq  test top-1 {top1(student, test_x, test_y, device) * 100:.2f}%", flush=True)

    def task_and_distill(idx):
        x = augment_classifier_batch(to_classifier_input(train_x[idx]), gen).to(device)
        logits = student(x).float()
        with torch.no_grad():
            ref = teacher(x).float()
        return F.cross_entropy(logits, train_y[idx].to(device)), F.mse_loss(logits, ref)

    def batches(_epoch):
        perm = torch.randperm(len(train_y), generator=gen)
        return (perm[i:i + args.batch] for i in range(0, len(perm), args.batch))

    steps = min(-(-len(train_y) // args.batch), args.max_batches or len(train_y))
    student = finetune(student, steps, batches, task_and_distill, args, device)
    print(f"qat  test top-1 {top1(student, test_x, test_y, device) * 100:.2f}%", flush=True)
    return student, lambda path: export_qat_classifier(student, path, args.dynamic), 10


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.qat", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=MODEL_NAMES)
    ap.add_argument("--nc", type=int, default=None, help="number of classes (default: from the data)")
    ap.add_argument("--weights", required=True, help="FP32 state-dict checkpoint, or an ONNX file this package exported")
    ap.add_argument("--data", default=None, help="detection data folder; Fashion-MNIST folder for bn/gn")
    ap.add_argument("--placement", type=int, choices=(1, 2), default=1)
    ap.add_argument("--calib-method", choices=METHODS, default="mse")
    ap.add_argument("--percentile", type=float, default=99.99)
    ap.add_argument("--calib-batches", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=1, help="fine-tuning epochs (0: calibrate and export only)")
    ap.add_argument("--max-batches", type=int, default=None, help="cap on fine-tuning batches per epoch")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate, decayed by --final-lr (cosine)")
    ap.add_argument("--final-lr", type=float, default=0.1, help="the last step's learning rate, a fraction of --lr")
    ap.add_argument("--warmup", type=int, default=0, help="steps over which the learning rate ramps up from 0")
    ap.add_argument("--ema", type=float, default=0.0,
                    help="keep an exponential moving average of the weights with this decay (e.g. 0.999) and "
                         "evaluate and export it instead of the last step's weights (0: off)")
    ap.add_argument("--ema-tau", type=float, default=100.0,
                    help="steps over which the EMA's decay ramps up to --ema")
    ap.add_argument("--range-lr-scale", type=float, default=1.0,
                    help="with --learn-ranges: the quantizers' scales learn at this multiple of the learning rate")
    ap.add_argument("--distill", type=float, default=1.0, help="weight of the distillation term")
    ap.add_argument("--distill-mode", choices=("raw", "decoded"), default="decoded",
                    help="detector distillation: MSE of the raw head maps, or of the decoded outputs with box and "
                         "class terms weighted by the teacher's objectness (default)")
    ap.add_argument("--task-weight", type=float, default=1.0, help="weight of the task loss (0: pure distillation)")
    ap.add_argument("--learn-ranges", action="store_true",
                    help="train the quantizers' scales too (LSQ) instead of keeping the calibrated ranges")
    ap.add_argument("--asymmetric-activations", action="store_true",
                    help="activations in uint8 with a zero point over [observed min, calibrated high end], outside "
                         "the symmetric INT8 contract: the Q/DQ export runs on the CPU reference (`qdeploy eval "
                         "--device cpu --precision int8`), not on the GPU's INT8 kernels nor TensorRT (detectors; with "
                         "--learn-ranges the scale and the low end are learned, LSQ+)")
    ap.add_argument("--float-layers", default="",
                    help="convs / linears left unquantized while fine-tuning, as the deployment's fp16 layers will "
                         "be: module-name regexes, comma separated (e.g. 'model.1.conv,model.24.m.[0-9]')")
    ap.add_argument("--export-only", choices=("all", "weights", "activations"), default="all",
                    help="quantizers kept in the ONNX export; the other kind stays float there (to measure what the "
                         "weights' or the activations' quantization costs, docs/quantization.md)")
    ap.add_argument("--mosaic", type=float, default=0.5)
    ap.add_argument("--head-only", action="store_true", help="export s8/s16/s32 raw heads instead of output0")
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch axis in the ONNX export")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--val-batches", type=int, default=None)
    ap.add_argument("--log-interval", type=int, default=50)
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.asymmetric_activations and is_classifier(args.model):
        ap.error("--asymmetric-activations is for the detectors")
    if is_classifier(args.model):
        args.data = args.data or FASHION_MNIST_DIR
    elif not args.data:
        ap.error("--data is required for detectors")
    return args


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else default_device()
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if is_classifier(args.model):
        student, export, nc = run_classifier(args, device)
    else:
        student, export, nc = run_detector(args, device)
    save_checkpoint(out / "qat.pt", student, model_name=args.model, nc=nc, placement=args.placement,
                    calib_method=args.calib_method)
    if args.export_only != "all":  # the other kind left float in the export (a diagnostic)
        set_quantization(student, False, "activations" if args.export_only == "weights" else "weights")
    export(out / "qat.onnx")
    print(f"wrote {out / 'qat.pt'} and {out / 'qat.onnx'}")


if __name__ == "__main__":
    main()
