#!/usr/bin/env python3
"""Precision / speed trade-off of a detector on the GPU, like the seed documents' table: for each configuration
(FP16; INT8; INT8 with layers left in FP16; a QAT model's own Q/DQ scales) build a CUDA plan, evaluate mAP on an
annotated image folder (`qdeploy eval`), time it (`qdeploy bench --cuda-graph`) and count the conv MACs that run in
INT8 (`qdeploy inspect --json`). Writes OUT/results.json, OUT/table.md and OUT/tradeoff.svg (`qdeploy chart`).

    scripts/precision-speed.py --qdeploy build-gpu/qdeploy --model det.onnx --cache det.cache \
        --qat det_qat.onnx --images VAL/images --annotations VAL/annotations/instances_val.json --out OUT

The model should take a dynamic batch (python3 -m qdeploy.export ... --dynamic) for the batch > 1 columns; a model
with a fixed batch is timed at that batch only.
"""

import argparse
import json
import os
import subprocess
import sys
from datetime import date


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-4000:])
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}")
    return r.stdout


def configs(a):
    int8 = ["--precision", "int8", "--calib-cache", a.cache]
    out = [
        ("FP16", a.model, ["--precision", "fp16"]),
        ("INT8 (PTQ, all convs)", a.model, int8),
        ("INT8, Detect head in FP16", a.model, int8 + ["--fp16-layers", "/model.24/.*"]),
        ("INT8, stem + head in FP16", a.model, int8 + ["--fp16-layers", "/model.0/conv/Conv,/model.24/.*"]),
    ]
    if a.qat:
        out.append(("INT8 QAT (Q/DQ scales)", a.qat, ["--precision", "int8"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qdeploy", required=True)
    ap.add_argument("--model", required=True, help="float ONNX detector")
    ap.add_argument("--cache", required=True, help="its INT8 calibration cache")
    ap.add_argument("--qat", help="the same detector after QAT (Q/DQ ONNX), optional")
    ap.add_argument("--images", required=True)
    ap.add_argument("--annotations", required=True)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    q = a.qdeploy
    batches = [int(b) for b in a.batches.split(",")]
    rows = []
    for k, (name, model, flags) in enumerate(configs(a)):
        plan = os.path.join(a.out, f"config{k}.plan")
        fixed = max(json.loads(run([q, "inspect", model, "--json"]))["inputs"][0]["shape"][0], 0)  # -1: dynamic
        sizes = [fixed] if fixed else batches
        profile = []
        if not fixed:
            lo, hi = (f"images:{b}x3x{a.imgsz}x{a.imgsz}" for b in (min(sizes), max(sizes)))
            profile = ["--min", lo, "--opt", hi, "--max", hi]
        run([q, "build", model, "--device", "cuda", *flags, *profile, "-o", plan])
        macs = json.loads(run([q, "inspect", model, *flags, "--json"]))
        share = (macs["int8"]["int8_macs"] / macs["int8"]["total_macs"]) if "int8" in macs else 0.0
        stats = json.loads(run([q, "eval", plan, "--images", a.images, "--annotations", a.annotations,
                                "--imgsz", str(a.imgsz), "--batch", str(max(sizes)), "--json", "--quiet"]))["stats"]
        js = os.path.join(a.out, f"bench{k}.json")
        run([q, "bench", plan, "--batch", ",".join(map(str, sizes)), "--cuda-graph", "--json", js])
        with open(js) as f:
            timed = {r["batch"]: r for r in json.load(f)["results"]}
        row = {"config": name, "model": os.path.basename(model), "flags": " ".join(flags), "int8_mac_share": share,
               "map50_95": stats["AP"], "map50": stats["AP50"], "batches": {}}
        for b in batches:
            r = timed.get(b)
            row["batches"][str(b)] = None if r is None else {"gpu_ms": r["gpu_compute_ms"]["median"],
                                                            "images_per_s": r["throughput_ips"]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    gpu = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).strip().splitlines()[0]
    result = {"date": str(date.today()), "gpu": gpu, "imgsz": a.imgsz, "rows": rows}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)

    head = "| configuration | conv MACs in INT8 | mAP50-95 | mAP50 | " + " | ".join(
        f"GPU ms, batch {b} | img/s, batch {b}" for b in batches) + " |"
    lines = [f"{gpu}, {result['date']}, input {a.imgsz}", "", head, "|" + "---|" * (4 + 2 * len(batches))]
    for r in rows:
        cells = [r["config"], f"{100 * r['int8_mac_share']:.1f}%", f"{r['map50_95']:.3f}", f"{r['map50']:.3f}"]
        for b in batches:
            t = r["batches"][str(b)]
            cells += ["—", "—"] if t is None else [f"{t['gpu_ms']:.3f}", f"{t['images_per_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    def values(fn):
        return [fn(r) for r in rows]

    panels = [{"title": "mAP50-95", "axis_label": "val set", "values": values(lambda r: r["map50_95"]),
               "lines": [[rows[0]["map50_95"], "FP16"]]}]
    for b in batches:
        panels.append({"title": f"GPU latency, batch {b}", "axis_label": "ms (median)", "base": 0,
                       "values": values(lambda r: r["batches"][str(b)] and r["batches"][str(b)]["gpu_ms"])})
    spec = os.path.join(a.out, "chart.json")
    with open(spec, "w") as f:
        json.dump({"title": f"Precision vs speed, {gpu}, {a.imgsz}x{a.imgsz}", "rows": values(lambda r: r["config"]),
                   "panels": panels}, f, indent=1)
    run([q, "chart", spec, "-o", os.path.join(a.out, "tradeoff.svg")])


if __name__ == "__main__":
    main()
