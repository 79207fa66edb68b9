#!/usr/bin/env python3
"""Real ONNX exports of python/qdeploy's models with the installed torch's exporters, checked against ONNX Runtime.

Run on the GPU machine (torch >= 2.9, onnx, onnxruntime), from the repository root:

    python3 scripts/onnx-exports.py export OUT [--models yolov5n,bn] [--imgsz 640]
        Exports every model with the legacy TorchScript exporter (opset 13), torch's default exporter (dynamo) at
        its default opset, and dynamo at opset 18; YOLOv5 decoded and head-only, with a dynamic batch axis. Runs
        ONNX Runtime on a fixed input (batch 2) and saves OUT/<name>.onnx and OUT/<name>.npz (inputs, outputs);
        OUT/exports.json lists each export's opset and op types.
    python3 scripts/onnx-exports.py check OUT QDEPLOY [--samples models/samples]
        Runs each export with `QDEPLOY run` on the CPU reference (and `--device cuda` when --cuda is given) and
        compares with ONNX Runtime: max |diff| / output range <= 1e-4. For detectors, `QDEPLOY detect` on the sample
        images gives the same detections for the dynamo and the legacy export. Writes OUT/check.json and prints a
        table; exit 1 when any check fails.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

TOLERANCE = 1e-4  # of the output's range


def export_all(args):
    import onnx
    import onnxruntime as ort
    import torch

    from qdeploy.checkpoint import load_weights
    from qdeploy.models import build_model, is_classifier
    from qdeploy.onnx_export import export_classifier, export_detector

    os.makedirs(args.out, exist_ok=True)
    shipped = {"yolov5n": "models/yolov5n_fmnist_det.onnx", "bn": "models/model_bn.onnx", "gn": "models/model_gn.onnx"}
    exporters = [("legacy13", {"exporter": "legacy"}), ("dynamo", {"exporter": "dynamo"}),
                 ("dynamo18", {"exporter": "dynamo", "opset": 18})]
    summary = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
               "onnx_max_opset": onnx.defs.onnx_opset_version(), "models": {}}
    rng = np.random.default_rng(0)
    for name in args.models.split(","):
        classifier = is_classifier(name)
        torch.manual_seed(0)
        nc = 10 if (classifier or name in shipped) else 80
        model = build_model(name, nc)
        if name in shipped:
            try:
                load_weights(model, shipped[name])
            except ValueError as e:  # fall back to random weights: the comparison does not need trained ones
                print(f"{name}: random weights ({e})", flush=True)
        forms = [("", False)] if classifier else [("", False), ("-head", True)]
        for suffix, head_only in forms:
            for tag, export_args in exporters:
                stem = f"{name}{suffix}-{tag}"
                path = os.path.join(args.out, stem + ".onnx")
                try:
                    if classifier:
                        export_classifier(model, path, dynamic=True, **export_args)
                    else:
                        export_detector(model, path, args.imgsz, head_only=head_only, dynamic=True, **export_args)
                    # The dynamo exporter may write weights beside the model; keep one self-contained file.
                    m = onnx.load(path)
                    onnx.save_model(m, path, save_as_external_data=False)
                    for f in os.listdir(args.out):
                        if f == stem + ".onnx.data":
                            os.remove(os.path.join(args.out, f))
                except Exception as e:  # report and go on: one failing export must not hide the others
                    summary["models"][stem] = {"error": f"{type(e).__name__}: {e}"}
                    print(f"{stem}: export failed: {e}", flush=True)
                    continue
                m = onnx.load(path)
                size = 32 if classifier else args.imgsz
                x = rng.random((2, 3, size, size), dtype=np.float32)
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                feed = {sess.get_inputs()[0].name: x}
                outs = sess.run(None, feed)
                np.savez(os.path.join(args.out, stem + ".npz"), **feed,
                         **{o.name: v for o, v in zip(sess.get_outputs(), outs)})
                ops = collections.Counter(f"{n.domain}::{n.op_type}" if n.domain else n.op_type for n in m.graph.node)
                summary["models"][stem] = {
                    "opsets": {i.domain or "ai.onnx": i.version for i in m.opset_import},
                    "functions": len(m.functions), "nodes": len(m.graph.node), "ops": dict(sorted(ops.items())),
                    "inputs": [i.name for i in m.graph.input], "outputs": [o.name for o in m.graph.output],
                }
                print(f"{stem}: opset {summary['models'][stem]['opsets']}, {len(m.graph.node)} nodes", flush=True)
                with open(os.path.join(args.out, "exports.json"), "w") as f:  # kept current: a cut-off run still counts
                    json.dump(summary, f, indent=1)
    # Q/DQ models of the newer opsets: the shipped QAT detector converted by onnx's version converter.
    qat = "models/yolov5n_fmnist_det_qat.onnx"
    for opset in (19, 21):
        stem = f"yolov5n-qat-opset{opset}"
        try:
            m = onnx.version_converter.convert_version(onnx.load(qat), opset)
            path = os.path.join(args.out, stem + ".onnx")
            onnx.save(m, path)
            x = rng.random((1, 3, 640, 640), dtype=np.float32)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            outs = sess.run(None, feed)
            np.savez(os.path.join(args.out, stem + ".npz"), **feed, **{o.name: v for o, v in zip(sess.get_outputs(), outs)})
            summary["models"][stem] = {"opsets": {i.domain or "ai.onnx": i.version for i in m.opset_import},
                                       "nodes": len(m.graph.node)}
        except Exception as e:
            summary["models"][stem] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{stem}: failed: {e}", flush=True)
    with open(os.path.join(args.out, "exports.json"), "w") as f:
        json.dump(summary, f, indent=1)


def run_qdeploy(qdeploy, model, npz, device, tmp):
    """Outputs of `qdeploy run` for the inputs stored in npz (inputs are the arrays whose names the model reads)."""
    import onnx

    m = onnx.load(model, load_external_data=False)
    inputs = [i.name for i in m.graph.input]
    cmd = [qdeploy, "run", model, "--output-dir", tmp, "--device", device]
    for name in inputs:
        p = os.path.join(tmp, f"in_{len(cmd)}.npy")
        np.save(p, npz[name])
        cmd += ["--input", f"{name}={p}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1] if (r.stderr or r.stdout) else "failed")
    return {o.name: np.load(os.path.join(tmp, o.name + ".npy")) for o in m.graph.output}, [o.name for o in m.graph.output]


def detections(qdeploy, model, samples, out):
    """detections.json of `QDEPLOY detect` on the sample images, with file paths dropped (they name the folder)."""
    r = subprocess.run([qdeploy, "detect", model, samples, "--out", out, "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    with open(os.path.join(out, "detections.json")) as f:
        return [d["detections"] for d in json.load(f)]


def check_all(args):
    with open(os.path.join(args.out, "exports.json")) as f:
        summary = json.load(f)
    devices = ["cpu"] + (["cuda"] if args.cuda else [])
    results, failed = {}, 0
    for stem, info in summary["models"].items():
        if "error" in info:
            results[stem] = {"error": info["error"]}
            failed += 1
            continue
        model = os.path.join(args.out, stem + ".onnx")
        npz = np.load(os.path.join(args.out, stem + ".npz"))
        res = {}
        for device in devices:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    got, names = run_qdeploy(args.qdeploy, model, npz, device, tmp)
                    worst = 0.0
                    for n in names:
                        want = npz[n].astype(np.float64)
                        rng_ = float(want.max() - want.min()) or 1.0
                        worst = max(worst, float(np.abs(got[n].astype(np.float64) - want).max()) / rng_)
                    res[device] = {"max_diff_of_range": worst, "ok": worst <= TOLERANCE}
                except Exception as e:
                    res[device] = {"error": str(e), "ok": False}
            failed += not res[device]["ok"]
        legacy = stem.rsplit("-", 1)[0] + "-legacy13"
        if args.samples and not stem.endswith("legacy13") and "-head" not in stem and stem.startswith("yolov5") \
                and legacy in summary["models"] and "qat" not in stem:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    same = detections(args.qdeploy, model, args.samples, os.path.join(tmp, "a")) == \
                        detections(args.qdeploy, os.path.join(args.out, legacy + ".onnx"), args.samples,
                                   os.path.join(tmp, "b"))
                    res["same_detections_as_legacy"] = same
                except Exception as e:
                    res["same_detections_as_legacy"] = f"error: {e}"
                    same = False
            failed += not same
        results[stem] = res
        print(f"{stem:32s} {json.dumps(res)}", flush=True)
    with open(os.path.join(args.out, "check.json"), "w") as f:
        json.dump({"tolerance_of_range": TOLERANCE, "results": results}, f, indent=1)
    print(f"{len(results) - failed if failed <= len(results) else 0} of {len(results)} exports checked; {failed} failures")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("out")
    e.add_argument("--models", default="yolov5n,yolov5s,bn,gn")
    e.add_argument("--imgsz", type=int, default=640)
    c = sub.add_parser("check")
    c.add_argument("out")
    c.add_argument("qdeploy")
    c.add_argument("--samples", default="models/samples")
    c.add_argument("--cuda", action="store_true")
    args = ap.parse_args()
    return export_all(args) if args.cmd == "export" else check_all(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
