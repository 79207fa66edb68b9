"""ONNX export of detectors (ultralytics layout) and classifiers (seed 004 layout); the CLI is qdeploy.export.

Detector, full mode: input ``images`` [N,3,S,S], output ``output0`` [N, 3*((S/8)^2+(S/16)^2+(S/32)^2), 5+nc] with
boxes decoded (cx, cy, w, h in input pixels, then objectness and class scores after sigmoid), as ultralytics gives.
Detector, head-only mode: outputs ``s8``, ``s16``, ``s32`` [N, 3*(5+nc), S/stride, S/stride], the raw 1x1-conv
outputs before sigmoid (the names of cuDLA-samples' --noanchor export), for runtimes that decode outside the net.
Classifier: input ``input`` [N,3,32,32], output ``output`` [N, classes] (the names of seed 004's export).
"""

import copy
import inspect
import warnings

import torch

from .models.fuse import fuse_conv_bn

OPSET = 13
HEAD_NAMES = ("s8", "s16", "s32")


def onnx_export(model, dummy, path, input_names, output_names, dynamic=False, opset=None, exporter="legacy",
                custom_opsets=None):
    """torch.onnx.export with an optional dynamic batch axis on every input and output.

    ``exporter="legacy"`` (the default) uses the TorchScript exporter at opset 13 on every torch version (newer ones
    default to dynamo, whose graphs name and shape things differently); ``exporter="dynamo"`` uses torch's default
    exporter (torch >= 2.5) at its default opset unless ``opset`` is given, as a user of a current PyTorch gets it.
    ``custom_opsets`` ({domain: version}) goes to the legacy exporter, for custom-domain nodes (qdeploy.dcnv4)."""
    if exporter not in ("legacy", "dynamo"):
        raise ValueError(f"exporter must be 'legacy' or 'dynamo', not {exporter!r}")
    kwargs = {}
    has_dynamo = "dynamo" in inspect.signature(torch.onnx.export).parameters
    if exporter == "dynamo":
        if not has_dynamo:
            raise RuntimeError(f"torch {torch.__version__} has no dynamo ONNX exporter (torch >= 2.5 has)")
        kwargs["dynamo"] = True
        if opset is not None:
            kwargs["opset_version"] = opset
    else:
        if has_dynamo:
            kwargs["dynamo"] = False
        kwargs["opset_version"] = OPSET if opset is None else opset
        kwargs["do_constant_folding"] = True
        if custom_opsets:
            kwargs["custom_opsets"] = dict(custom_opsets)
    axes = {name: {0: "batch"} for name in (*input_names, *output_names)} if dynamic else None
    with torch.no_grad(), warnings.catch_warnings():
        # Expected noise: spatial sizes are fixed at export by design (tracer warnings), torch 1.13 warns about
        # constants it cannot shape-infer, and torch >= 2.9 about choosing the TorchScript exporter.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=".*shape inference of prim::Constant")
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export", category=DeprecationWarning)
        # Custom-domain nodes (qdeploy.dcnv4): torch has no shape inference for them (qdeploy infers their shapes), and
        # torch 1.13 flags the g.op its symbolic functions call as deprecated.
        warnings.filterwarnings("ignore", message=".*shape inference of ai\\.qdeploy")
        warnings.filterwarnings("ignore", message=".*_graph_op' is deprecated", category=FutureWarning)
        torch.onnx.export(
            model, dummy, str(path), input_names=list(input_names), output_names=list(output_names),
            dynamic_axes=axes, **kwargs,
        )


def prepare_for_export(model):
    """A fused, eval-mode CPU copy, so export never changes the caller's model."""
    model = copy.deepcopy(model).cpu().float().eval()
    return fuse_conv_bn(model)


def export_detector(model, path, imgsz=640, head_only=False, dynamic=False, batch=1, prepared=False, **export_args):
    """Export a YOLOv5; ``prepared`` skips the fuse/copy step (QAT models are fused and must keep their quantizers);
    ``export_args`` (exporter, opset) go to onnx_export."""
    if imgsz % 32:
        raise ValueError(f"--imgsz {imgsz} must be a multiple of 32 (the largest stride)")
    model = model if prepared else prepare_for_export(model)
    model.detect.head_only = head_only
    try:
        dummy = torch.zeros(batch, 3, imgsz, imgsz, device=next(model.parameters()).device)
        with torch.no_grad():
            model(dummy)  # fills Detect's grid cache so the trace records the grids as constants
        onnx_export(model, dummy, path, ["images"], HEAD_NAMES if head_only else ["output0"], dynamic, **export_args)
    finally:
        model.detect.head_only = False


def export_classifier(model, path, dynamic=False, batch=1, prepared=False, **export_args):
    model = model if prepared else prepare_for_export(model)
    dummy = torch.zeros(batch, 3, 32, 32, device=next(model.parameters()).device)
    onnx_export(model, dummy, path, ["input"], ["output"], dynamic, **export_args)
