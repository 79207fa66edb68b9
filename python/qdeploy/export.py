"""Command line ONNX export, FP32 (random init when no weights are given) or QAT (Q/DQ) checkpoints.

    python3 -m qdeploy.export --model yolov5n --nc 10 --weights CKPT.pt --imgsz 640 --out model.onnx [--head-only]
    python3 -m qdeploy.export --model yolov5n --nc 10 --weights qat.pt --placement 1 --out qat.onnx
    python3 -m qdeploy.export --model bn --nc 10 --out model_bn.onnx --dynamic
    python3 -m qdeploy.export --model yolov5n --nc 10 --weights models/yolov5n_fmnist_det.onnx --imgsz 672 --dynamic \
        --out det672.onnx      (weights read back from an ONNX this package exported)

Graph layouts (input/output names and shapes) are described in qdeploy.onnx_export.
"""

import argparse

import torch

from .checkpoint import load_weights
from .models import MODEL_NAMES, build_model, is_classifier
from .onnx_export import export_classifier, export_detector
from .quant import export_qat_classifier, export_qat_detector, quantize_model


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m qdeploy.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, choices=MODEL_NAMES)
    ap.add_argument("--nc", type=int, default=None, help="number of classes (default: 80 for YOLO, 10 for bn/gn)")
    ap.add_argument("--weights", help="state-dict checkpoint, or an ONNX file this package exported (its folded weights); "
                    "random initialization when omitted")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=1, help="batch size of the traced input")
    ap.add_argument("--head-only", action="store_true", help="export the three raw head outputs s8/s16/s32")
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch axis")
    ap.add_argument("--placement", type=int, choices=(1, 2), help="--weights is a QAT checkpoint of this placement")
    ap.add_argument("--exporter", choices=("legacy", "dynamo"), default="legacy",
                    help="legacy: the TorchScript exporter (default, opset 13); dynamo: torch's default exporter "
                    "(torch >= 2.5; opset 18 and later)")
    ap.add_argument("--opset", type=int, default=None, help="ONNX opset (default: 13 for legacy, torch's for dynamo)")
    ap.add_argument("--seed", type=int, default=0, help="seed for random initialization")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    export_args = {"exporter": args.exporter, "opset": args.opset}
    classifier = is_classifier(args.model)
    nc = args.nc or (10 if classifier else 80)
    model = build_model(args.model, nc)
    if args.placement:
        if not args.weights:
            ap.error("--placement needs --weights (a QAT checkpoint)")
        load_weights(quantize_model(model, args.placement), args.weights)
        if classifier:
            export_qat_classifier(model, args.out, args.dynamic, args.batch, **export_args)
        else:
            export_qat_detector(model, args.out, args.imgsz, args.head_only, args.dynamic, args.batch, **export_args)
    else:
        if args.weights:
            load_weights(model, args.weights)
        if classifier:
            export_classifier(model, args.out, args.dynamic, args.batch, **export_args)
        else:
            export_detector(model, args.out, args.imgsz, args.head_only, args.dynamic, args.batch, **export_args)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
