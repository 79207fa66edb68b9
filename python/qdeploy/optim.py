"""Optimizer, learning-rate schedule, warmup and weight EMA shared by the trainers (ultralytics' recipe)."""

import contextlib
import copy
import math

import torch
from torch import nn


def make_optimizer(model, name="sgd", lr=0.01, momentum=0.937, weight_decay=5e-4):
    """Weight decay on conv/linear weights only: decaying norm scales and biases only fights the optimizer."""
    decay, no_decay = [], []
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            is_weight = pname == "weight" and not isinstance(module, (nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm))
            (decay if is_weight else no_decay).append(p)
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=True)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(momentum, 0.999))
    raise ValueError(f"unknown optimizer {name!r}; expected sgd or adamw")


def lr_factor(progress, final=0.01, schedule="cosine"):
    """Multiplier of the initial learning rate at ``progress`` in [0, 1]: cosine or linear decay to ``final``."""
    if schedule == "cosine":
        return final + (1 - final) * (1 + math.cos(math.pi * progress)) / 2
    if schedule == "linear":
        return 1 - (1 - final) * progress
    raise ValueError(f"unknown schedule {schedule!r}; expected cosine or linear")


def apply_lr(optimizer, lr, it, warmup_iters, warmup_momentum=0.8, momentum=0.937):
    """Set the iteration's learning rate (times a group's ``lr_scale``); during warmup ramp it up from 0 (and momentum
    up from 0.8) so that early large gradients of a random init do not blow up the weights."""
    if it < warmup_iters:
        frac = it / warmup_iters
        lr *= frac
        for g in optimizer.param_groups:
            if "momentum" in g:
                g["momentum"] = warmup_momentum + (momentum - warmup_momentum) * frac
            elif "betas" in g:
                g["betas"] = (warmup_momentum + (momentum - warmup_momentum) * frac, g["betas"][1])
    for g in optimizer.param_groups:
        g["lr"] = lr * g.get("lr_scale", 1.0)


class ModelEMA:
    """Exponential moving average of the weights (and a copy of the buffers); evaluation and checkpoints use it.
    The decay ramps up from 0 so that the first updates are not dominated by the random initialization."""

    def __init__(self, model, decay=0.9999, tau=2000):
        self.ema = copy.deepcopy(model).eval()
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.decay, self.tau, self.updates = decay, tau, 0

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay * (1 - math.exp(-self.updates / self.tau))
        msd = model.state_dict()
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                v.mul_(d).add_(msd[k].detach(), alpha=1 - d)
            else:
                v.copy_(msd[k])


def autocast(device):
    """fp16 autocast on CUDA (AMP), a no-op elsewhere."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.float16)


def grad_scaler(device):
    """Loss scaling for fp16 AMP; disabled (a pass-through) off CUDA."""
    enabled = device.type == "cuda"
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def default_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
