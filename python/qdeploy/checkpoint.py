"""Checkpoints are plain state dicts plus a few metadata fields (no pickled modules), so they load with
``torch.load(..., weights_only=True)`` on any torch version and never depend on this package's class layout."""

import os
from pathlib import Path

import torch


def atomic_save(obj, path):
    """torch.save to a temporary name beside ``path``, then rename: a reader (or a run killed mid-write) sees the old
    file or the new one, never a torn one."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_checkpoint(path, model, **meta):
    """Floats in ``meta`` are stored as 0-d tensors: torch 1.13's weights-only loader rejects pickled floats.
    Written atomically (see atomic_save)."""
    meta = {k: torch.tensor(v) if isinstance(v, float) else v for k, v in meta.items()}
    atomic_save({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, **meta}, path)


def read_state_dict(path):
    """Accept our checkpoints ({'model': sd}), {'state_dict': sd} and bare state dicts."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        ckpt = torch.load(path, map_location="cpu")
    for key in ("model", "state_dict"):
        if isinstance(ckpt, dict) and isinstance(ckpt.get(key), dict):
            return ckpt[key]
    if isinstance(ckpt, dict) and all(torch.is_tensor(v) for v in ckpt.values()):
        return ckpt
    raise ValueError(f"{path}: not a state dict checkpoint (expected a dict of tensors or {{'model': state_dict}})")


def read_onnx_weights(path, model):
    """The initializers of an ONNX file this package exported whose names are ``model``'s state-dict keys (the
    exporter keeps them): the conv weights and biases, BatchNorm already folded. Buffers the export turned into
    constants (Detect's anchors and strides) keep the model's own values."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    own = model.state_dict()
    sd = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer if t.name in own}
    if not sd:
        raise ValueError(f"{path}: no initializer is named like this model's parameters; was it exported by qdeploy?")
    for name, tensor in own.items():
        if name not in sd and name not in dict(model.named_parameters()):
            sd[name] = tensor
    return sd


def load_weights(model, path):
    """Load a checkpoint into ``model``; mismatched keys are an error that names them. An ``.onnx`` file exported by
    this package (BatchNorm folded) is read too: ``model`` is folded first (models.fuse), so that a shipped model can
    be fine-tuned or exported again at another size or with a dynamic batch."""
    if str(path).endswith(".onnx"):
        from .models.fuse import fuse_conv_bn

        state = read_onnx_weights(path, fuse_conv_bn(model))
    else:
        state = read_state_dict(path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"{path} does not fit this model: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}; check --model and --nc"
        )
    return model
