"""Standard ImageNet classifiers on one GPU: PyTorch against qdeploy at 224x224, batch 1, 32 and 256, FP16 and INT8.

    PYTHONPATH=python python3 bench/classifiers.py --qdeploy build-gpu/qdeploy --out OUTDIR [--models resnet50,...]

The models are those of python/qdeploy/models/zoo.py (torchvision's architectures: ResNet-50, MobileNetV2,
MobileNetV3-Large, EfficientNet-B0, RegNetY-400MF, ConvNeXt-T, ShuffleNetV2 x1.0) with seeded random weights,
BatchNorm statistics measured on random normalized images (zoo.randomize), exported to ONNX (opset 17, dynamic batch).
Per model, each step a process of its own with a time limit, so that one failure leaves the rest:

- torch: the export, N(0, 1) check images, ONNX Runtime FP32 (CPU) on them, PyTorch FP32 (TF32 off) and FP16 eager on
  them, then PyTorch eager FP16 timed (channels_last, cudnn.benchmark);
- compile (unless --no-compile): torch.compile(mode="reduce-overhead", dynamic=False) FP16 timed, one compile per batch;
- qdeploy: `qdeploy calibrate --algo minmax` on a few N(0, 1) batches (.npy; random weights: the scales only have to be
  plausible for a speed measurement), `qdeploy bench --cuda-graph --input-format fp16:nhwc --output-format fp16` at
  FP16 and INT8 (PyTorch's bindings; one call per set of batches timed with the same iteration counts), and
  `qdeploy run --device cuda` at FP32, FP16 and INT8 on the check images, compared with ONNX Runtime FP32 and
  PyTorch FP16 (max |difference| over the reference's output range, top-1 agreement).

Latency is GPU time per forward from CUDA events (median); throughput is images/s over back-to-back forwards; batches
above 32 run fewer iterations (--iters scaled by 32/batch, at least --min-iters). Writes OUTDIR/results.json and
OUTDIR/results.md, with per-layer profiles of the qdeploy plans in OUTDIR/profiles; a results.json already in OUTDIR
keeps the models not run now, so a set can be measured over several calls, and `--render A.json B.json --out DIR`
merges results files into DIR without running anything. `--budget SECONDS` ends the run inside a time limit (a GPU
call's): each step gets at most what is left, and steps past it are reported as not run. Exit status 1 when a step
failed (the results still written).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from qdeploy.models.zoo import MODEL_NAMES, PARAMETERS  # noqa: E402

RUNNERS = ("pytorch eager fp16", "pytorch compile fp16", "qdeploy fp16", "qdeploy int8")


def write_json(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def iterations(args, batch):
    """(warmup, iterations) at this batch: fewer above 32 images, so ConvNeXt at 256 stays within its step's limit."""
    scale = min(1.0, 32.0 / batch)
    return max(3, round(args.warmup * scale)), max(args.min_iters, round(args.iters * scale))


def model_dir(args, name):
    d = Path(args.work) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


# Workers: PyTorch in processes of their own (a hung torch.compile or an out-of-memory error ends only its step).

def worker_torch(args):
    import torch
    import torch_timing

    from qdeploy.models import zoo

    name, d = args.model, model_dir(args, args.model)
    out = {"rows": [], "errors": []}
    out["meta"] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version()}
    path = d / "torch.json"
    write_json(path, out)
    # FP32 references without TF32 (cuDNN convs default to it).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = zoo.build(name, seed=args.seed).cuda()
    zoo.randomize(model, seed=args.seed, imgsz=args.imgsz, batch=16)
    model = model.cpu()
    torch.save(model.state_dict(), d / "model.pt")
    zoo.export_onnx(model, d / "export.onnx", imgsz=args.imgsz, dynamic=True)
    os.replace(d / "export.onnx", d / f"{name}.onnx")  # no partial file when the step's time runs out
    g = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(args.check_batch, 3, args.imgsz, args.imgsz, generator=g)
    np.save(d / "x.npy", x.numpy())
    (d / "calib").mkdir(exist_ok=True)
    for i in range((args.calib_images + 3) // 4):
        np.save(d / "calib" / f"batch{i}.npy", torch.randn(4, 3, args.imgsz, args.imgsz, generator=g).numpy())
    print(f"{name}: exported, {zoo.count_parameters(model):,} parameters", flush=True)
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(str(d / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        np.save(d / "ref_onnxruntime_fp32.npy", sess.run(None, {"input": x.numpy()})[0])
        out["meta"]["onnxruntime"] = ort.__version__
    except Exception as e:  # noqa: BLE001 (reported, the other comparisons go on)
        out["errors"].append(f"onnxruntime: {type(e).__name__}: {e}")
    with torch.inference_mode():
        net = model.cuda().eval()
        np.save(d / "out_pytorch_fp32.npy", net(x.cuda()).float().cpu().numpy())
        try:
            out["torchvision"] = torchvision_check(name, net, x.cuda())
        except Exception as e:  # noqa: BLE001 (a note, not a failure of the step)
            out["torchvision"] = f"check failed: {type(e).__name__}: {e}"
        net = net.half().to(memory_format=torch.channels_last)
        xh = x.cuda().half().to(memory_format=torch.channels_last)
        y16 = net(xh).float().cpu().numpy()
        np.save(d / "ref_pytorch_fp16.npy", y16)  # the reference of qdeploy's outputs
        np.save(d / "out_pytorch_eager_fp16.npy", y16)  # compared with ONNX Runtime
        write_json(path, out)
        torch.backends.cudnn.benchmark = True
        for b in args.batch_list:
            xb = torch.randn(b, 3, args.imgsz, args.imgsz, device="cuda").half().to(memory_format=torch.channels_last)
            lat, ips = torch_timing.time_torch(net, xb, *iterations(args, b))
            out["rows"].append({"runner": "pytorch eager fp16", "batch": b, "latency_ms": lat, "images_per_s": ips})
            print(json.dumps({"model": name, **out["rows"][-1]}), flush=True)
            write_json(path, out)


def torchvision_check(name, net, x):
    """Where torchvision is installed: its model's state dict names and shapes against ours, and its output with our
    weights loaded (FP32)."""
    try:
        import torchvision
    except ImportError:
        return None
    import torch

    tv = getattr(torchvision.models, name)().cuda().eval()
    ours = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in tv.state_dict().items()}
    if ours != theirs:
        diff = sorted(set(ours.items()) ^ set(theirs.items()))[:5]
        return f"torchvision {torchvision.__version__}: state dicts differ, e.g. {diff}"
    tv.load_state_dict(net.state_dict())
    with torch.inference_mode():
        err = float((tv(x) - net(x)).abs().max())
    return f"torchvision {torchvision.__version__}: same state dict; max |output difference| {err:.3g}"


def worker_compile(args):
    import torch
    import torch_timing

    from qdeploy.models import zoo

    name, d = args.model, model_dir(args, args.model)
    out = {"rows": [], "compile_s": {}}
    model = zoo.build(name, seed=args.seed)
    model.load_state_dict(torch.load(d / "model.pt"))
    net = model.cuda().half().to(memory_format=torch.channels_last)
    torch.backends.cudnn.benchmark = True
    compiled = torch.compile(net, mode="reduce-overhead", dynamic=False)
    with torch.inference_mode():
        for b in args.batch_list:
            x = torch.randn(b, 3, args.imgsz, args.imgsz, device="cuda").half().to(memory_format=torch.channels_last)
            t0 = time.time()
            compiled(x)
            compiled(x)
            torch.cuda.synchronize()
            out["compile_s"][str(b)] = round(time.time() - t0, 1)
            lat, ips = torch_timing.time_torch(compiled, x, *iterations(args, b))
            out["rows"].append({"runner": "pytorch compile fp16", "batch": b, "latency_ms": lat, "images_per_s": ips})
            print(json.dumps({"model": name, "compile_s": out["compile_s"][str(b)], **out["rows"][-1]}), flush=True)
            write_json(d / "compile.json", out)


# The driver: no CUDA in this process.

def run_step(entry, d, label, cmd, timeout, deadline):
    """Run one step with a time limit, its own or what is left of --budget (its whole process group killed past
    it); its output goes to d/logs."""
    log = d / "logs" / (label.replace(" ", "_") + ".log")
    cut = False  # the --budget's end, not the step's own limit, bounds it
    log.parent.mkdir(exist_ok=True)
    if deadline is not None:
        if deadline - time.time() < 1:
            entry["errors"].append(f"{label}: not run: --budget spent")
            print(f"[{entry['model']}] {label}: not run (--budget spent)", flush=True)
            return False
        left = round(deadline - time.time())
        cut = left < timeout
        timeout = min(timeout, left)
    print(f"[{entry['model']}] {label} ...", flush=True)
    t0 = time.time()
    with open(log, "w") as f:
        f.write(" ".join(map(str, cmd)) + "\n")
        f.flush()
        p = subprocess.Popen(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    secs = round(time.time() - t0, 1)
    entry["steps"][label] = {"seconds": secs, "rc": rc}
    if rc == 0:
        print(f"[{entry['model']}] {label}: ok in {secs} s", flush=True)
        return True
    tail = log.read_text(errors="replace").strip().splitlines()[1:][-3:]  # the first line is the command
    why = f"exit {rc}" if rc is not None else f"stopped at the --budget's end after {timeout} s" if cut else \
        f"timed out after {timeout} s"
    entry["errors"].append(f"{label}: {why}: {' | '.join(tail)[-600:]} (log: {log.name})")
    print(f"[{entry['model']}] {label}: FAILED ({why}); log {log}\n  " + "\n  ".join(tail), flush=True)
    return False


def compare(got, ref):
    err = float(np.abs(got.astype(np.float64) - ref).max())
    rng = float(ref.max() - ref.min())
    return {"max_abs": err, "range": rng, "rel": err / rng if rng > 0 else None,
            "top1": float(np.mean(got.argmax(1) == ref.argmax(1)))}


def run_model(args, name, deadline):
    shutil.rmtree(Path(args.work) / name, ignore_errors=True)  # nothing of an earlier run (weights, ONNX, caches)
    d = model_dir(args, name)
    entry = {"model": name, "parameters": PARAMETERS[name], "imgsz": args.imgsz, "check_batch": args.check_batch,
             "rows": [], "accuracy": [], "errors": [], "steps": {},
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": args.command}
    t0 = time.time()
    common = ["--model", name, "--out", args.out, "--work", args.work, "--imgsz", args.imgsz, "--batches",
              args.batches, "--seed", args.seed, "--warmup", args.warmup, "--iters", args.iters, "--min-iters",
              args.min_iters]
    me = [sys.executable, __file__]
    run_step(entry, d, "torch", [*me, "--worker", "torch", *common, "--check-batch", args.check_batch,
                                 "--calib-images", args.calib_images], args.torch_timeout, deadline)
    if (d / "torch.json").exists():
        t = json.loads((d / "torch.json").read_text())
        entry.update(t["meta"])
        entry["rows"] += t["rows"]
        entry["errors"] += t["errors"]
        entry["torchvision"] = t.get("torchvision")
    if not args.no_compile and (d / "model.pt").exists():
        run_step(entry, d, "compile", [*me, "--worker", "compile", *common], args.compile_timeout, deadline)
        if (d / "compile.json").exists():
            c = json.loads((d / "compile.json").read_text())
            entry["rows"] += c["rows"]
            entry["compile_s"] = c["compile_s"]
    onnx = d / f"{name}.onnx"
    if not onnx.exists():
        entry["errors"].append("no ONNX export: the qdeploy steps did not run")
        return finish(entry, t0)

    qd = args.qdeploy
    cache = d / "calib.cache"
    if "int8" in args.precision_list:
        run_step(entry, d, "calibrate", [qd, "calibrate", onnx, "--data", d / "calib", "--algo", "minmax",
                                         "--batches", "0", "--cache", cache], args.step_timeout, deadline)
    prof = Path(args.out) / "profiles"
    prof.mkdir(exist_ok=True)
    for stale in prof.glob(f"{name}_*.json"):
        stale.unlink()
    for prec in args.precision_list:
        if prec == "int8" and not cache.exists():
            continue
        groups = {}  # one call for the batches of the same iteration counts (each call builds the plan)
        for b in args.batch_list:
            groups.setdefault(iterations(args, b), []).append(b)
        for (warmup, iters), bs in groups.items():
            tag = f"{prec}_b{'_'.join(map(str, bs))}"
            js = d / f"bench_{tag}.json"
            cmd = [qd, "bench", onnx, "--device", "cuda", "--precision", prec, "--batch", ",".join(map(str, bs)),
                   "--cuda-graph", "--warmup", warmup, "--iterations", iters, "--input-format", "fp16:nhwc",
                   "--output-format", "fp16", "--json", js, "--timing-cache", d / f"timing_{prec}.cache"]
            if not args.no_profile:
                cmd += ["--export-profile", prof / f"{name}_{tag}.json"]
            if prec == "int8":
                cmd += ["--calib-cache", cache]
            if run_step(entry, d, f"bench {tag.replace('_', ' ')}", cmd, args.step_timeout, deadline):
                for r in json.loads(js.read_text())["results"]:
                    row = {"runner": f"qdeploy {prec}", "batch": r["batch"],
                           "latency_ms": r["gpu_compute_ms"]["median"], "images_per_s": r["throughput_ips"]}
                    entry["rows"].append(row)
                    print(json.dumps({"model": name, **row}), flush=True)

    x = d / "x.npy"
    for prec in ("fp32", "fp16", "int8"):
        if not x.exists() or (prec == "int8" and not cache.exists()):
            continue
        od = d / f"run_{prec}"
        cmd = [qd, "run", onnx, "--device", "cuda", "--precision", prec, "--input", f"input={x}", "--output-dir", od,
               "--timing-cache", d / f"timing_{prec}.cache"]
        if prec == "int8":
            cmd += ["--calib-cache", cache]
        if run_step(entry, d, f"run {prec}", cmd, args.step_timeout, deadline):
            os.replace(od / "output.npy", d / f"out_qdeploy_{prec}.npy")
    for ref_name in ("onnxruntime_fp32", "pytorch_fp16"):
        ref_path = d / f"ref_{ref_name}.npy"
        if not ref_path.exists():
            continue
        ref = np.load(ref_path).astype(np.float64)
        for runner in ("pytorch_fp32", "pytorch_eager_fp16", "qdeploy_fp32", "qdeploy_fp16", "qdeploy_int8"):
            p = d / f"out_{runner}.npy"
            if p.exists() and not (ref_name == "pytorch_fp16" and runner.startswith("pytorch")):
                entry["accuracy"].append({"runner": runner.replace("_", " "), "reference": ref_name.replace("_", " "),
                                          **compare(np.load(p), ref)})
    return finish(entry, t0)


def finish(entry, t0):
    entry["seconds"] = round(time.time() - t0, 1)
    print(f"[{entry['model']}] done in {entry['seconds']} s, {len(entry['errors'])} errors", flush=True)
    return entry


def speedups(rows):
    ips = {(r["runner"], r["batch"]): r["images_per_s"] for r in rows}
    for r in rows:
        for base, key in (("pytorch compile fp16", "vs_compile"), ("pytorch eager fp16", "vs_eager")):
            other = ips.get((base, r["batch"]))
            r[key] = r["images_per_s"] / other if other and r["runner"] != base else None
    return rows


def render(results):
    models = results["models"]
    names = [n for n in MODEL_NAMES if n in models] + sorted(set(models) - set(MODEL_NAMES))
    sizes = ", ".join(sorted({f"{m.get('check_batch')} at {m.get('imgsz')}x{m.get('imgsz')}" for m in models.values()}))
    gpus = sorted({m.get("gpu", "?") for m in models.values()})
    lines = ["# Standard classifiers: PyTorch against qdeploy", "",
             f"GPU: {', '.join(gpus)}; torch {', '.join(sorted({m.get('torch', '?') for m in models.values()}))}; "
             f"dates {', '.join(sorted({m['date'] for m in models.values()}))}", "",
             "Commands: " + "; ".join(sorted({f"`{models[n].get('command', '')}`" for n in names})), "",
             "Latency: GPU time per forward (median, ms); images/s over back-to-back forwards; speed-ups are "
             "throughput ratios at the same batch. PyTorch: FP16, channels_last; qdeploy: fp16 NHWC input, fp16 "
             "output, CUDA graph.", "",
             "| model | runner | batch | latency (ms) | images/s | vs torch.compile | vs eager |",
             "|---|---|---|---|---|---|---|"]
    order = {r: i for i, r in enumerate(RUNNERS)}
    for name in names:
        rows = sorted(speedups(models[name]["rows"]), key=lambda r: (r["batch"], order.get(r["runner"], 99)))
        for r in rows:
            f = (lambda v: f"{v:.2f}x" if v else "")  # noqa: E731
            lines.append(f"| {name} | {r['runner']} | {r['batch']} | {r['latency_ms']:.3f} | "
                         f"{r['images_per_s']:,.0f} | {f(r['vs_compile'])} | {f(r['vs_eager'])} |")
    lines += ["", f"Correctness on the check images (N(0, 1), {sizes}): max |output - reference| over the reference's "
              "output range, and the share of images with the same top-1 class.", "",
              "| model | runner | reference | max abs diff / range | top-1 agreement |", "|---|---|---|---|---|"]
    for name in names:
        for a in models[name]["accuracy"]:
            rel = f" ({a['rel']:.2e})" if a["rel"] is not None else ""
            lines.append(f"| {name} | {a['runner']} | {a['reference']} | {a['max_abs']:.3g} / {a['range']:.3g}{rel} "
                         f"| {a['top1']:.0%} |")
    errors = [(name, e) for name in names for e in models[name]["errors"]]
    if errors:
        lines += ["", "Errors:", ""] + [f"- {name}: {e}" for name, e in errors]
    notes = [(name, models[name]["torchvision"]) for name in names if models[name].get("torchvision")]
    if notes:
        lines += ["", "Against torchvision:", ""] + [f"- {name}: {t}" for name, t in notes]
    return "\n".join(lines) + "\n"


def save(out, results):
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "results.json"), results)
    with open(os.path.join(out, "results.md.tmp"), "w") as f:
        f.write(render(results))
    os.replace(os.path.join(out, "results.md.tmp"), os.path.join(out, "results.md"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qdeploy", help="qdeploy binary (CUDA build)")
    ap.add_argument("--out", required=True, help="results: results.json, results.md, profiles/")
    ap.add_argument("--work", default="/tmp/qdeploy-classifiers", help="scratch folder: ONNX, weights, data, logs")
    ap.add_argument("--models", default=",".join(MODEL_NAMES), help=f"comma separated, of {','.join(MODEL_NAMES)}")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--precisions", default="fp16,int8", help="qdeploy plans to time (comma separated)")
    ap.add_argument("--imgsz", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100, help="timed iterations up to batch 32 (fewer above)")
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--check-batch", type=int, default=8, help="check images for the correctness comparisons")
    ap.add_argument("--calib-images", type=int, default=8, help="INT8 calibration images (batches of 4)")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile (minutes per model)")
    ap.add_argument("--no-profile", action="store_true", help="no per-layer profiles of the qdeploy plans")
    ap.add_argument("--fresh", action="store_true", help="drop the models of an OUTDIR/results.json already there")
    ap.add_argument("--torch-timeout", type=int, default=300, help="seconds for the export and eager step")
    ap.add_argument("--compile-timeout", type=int, default=420, help="seconds for the torch.compile step")
    ap.add_argument("--step-timeout", type=int, default=300, help="seconds for each qdeploy step")
    ap.add_argument("--budget", type=int, help="seconds for the whole run: later steps get what is left, or none "
                    "(so that it ends, with its results written, inside a limit such as a GPU call's)")
    ap.add_argument("--render", nargs="+", metavar="JSON", help="merge these results files into OUT; run nothing")
    ap.add_argument("--worker", choices=("torch", "compile"), help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.batch_list = [int(b) for b in args.batches.split(",")]
    args.precision_list = [p for p in args.precisions.split(",") if p]
    if args.worker:
        return (worker_torch if args.worker == "torch" else worker_compile)(args)

    if args.render:
        results = {"models": {}}
        for path in args.render:
            r = json.loads(Path(path).read_text())
            results["models"].update(r["models"])
        save(args.out, results)
        print(render(results))
        return
    if not args.qdeploy:
        sys.exit("--qdeploy is required (unless --render)")
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODEL_NAMES]
    if unknown:
        sys.exit(f"unknown models {unknown}; expected some of {','.join(MODEL_NAMES)}")
    bad = [p for p in args.precision_list if p not in ("fp32", "fp16", "int8")]
    if bad:
        sys.exit(f"--precisions {bad}: expected fp32, fp16 or int8")
    old = Path(args.out) / "results.json"
    results = json.loads(old.read_text()) if old.exists() and not args.fresh else {"models": {}}
    args.command = "python3 bench/classifiers.py " + " ".join(sys.argv[1:])
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    deadline = t0 + args.budget if args.budget else None
    for name in names:
        if deadline is not None and deadline - time.time() < 1:
            print(f"[{name}] not run: --budget spent (its earlier results, if any, kept)", flush=True)
            continue
        results["models"][name] = run_model(args, name, deadline)
        save(args.out, results)
    print(f"all done in {time.time() - t0:.0f} s\n")
    print(render(results))
    return 1 if any(results["models"][n]["errors"] for n in names) else 0


if __name__ == "__main__":
    sys.exit(main())
