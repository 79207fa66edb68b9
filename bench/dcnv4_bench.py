#!/usr/bin/env python3
"""DCNv4 kernel times, qdeploy's CUDA kernels side by side with the official op's forward kernel (OpenGVLab/DCNv4,
compiled from its source into bench/dcnv4_kernel_bench.cpp) in one run on one GPU, timed the same way, and how far
apart their outputs are:
- speed: the paper's shapes (64x56x56 with 4 groups of 32 channels, 128x56x56 with 4x16) and FlashInternImage-T's
  four stage shapes at 224x224 (56/28/14/7 with 4/8/16/32 groups of 16) at batch 1 and 64, fp16 and fp32; 3x3
  kernels, stride 1, pad 1, offsets in [-2, 2]. Each side at its best: every qdeploy tactic, and the official kernel
  at every launch configuration it takes; per-launch medians of CUDA graphs of 20 launches.
- agreement: those cases and five more (remove_center, stride 2 with pad 0 and dilation 2, offset_scale 0.5, odd
  sizes); fp32 must agree within 1e-5 of the output range (exit 1 otherwise), fp16 is reported.

  mkdir -p bench/peers && git --git-dir=DCNv4-MIRROR archive HEAD DCNv4_op | tar -x -C bench/peers   # once
  python3 bench/dcnv4_bench.py --plugin build-gpu/plugins/dcnv4/libqd_dcnv4.so [--json out/dcnv4_bench.json]

The binary is built with nvcc where it is missing (--bench-binary); it can be built on another machine and carried.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "bench" / "peers" / "DCNv4_op" / "src"

# (label, N, H, W, G, D) for speed; the agreement cases add stride, pad, dilation, remove_center, offset_scale.
SHAPES = [("paper", 64, 56, 56, 4, 32), ("paper", 128, 56, 56, 4, 16)]
for b in (1, 64):
    for i, (hw, g) in enumerate(((56, 4), (28, 8), (14, 16), (7, 32))):
        SHAPES.append((f"FlashInternImage-T stage {i + 1}", b, hw, hw, g, 16))
CHECKS = [
    ("4x16, odd size", "3,9,11,4,16"),
    ("8x16 remove_center", "1,8,8,8,16,1,1,1,1,1"),
    ("stride 2, pad 0, dilation 2", "2,13,12,4,16,2,0,2,0,1"),
    ("offset_scale 0.5", "1,10,10,2,32,1,1,1,0,0.5"),
    ("paper groups, small", "2,14,14,4,32"),
]


def build(binary):
    cmd = ["nvcc", "-x", "cu", "-std=c++17", "-O2", "-arch=sm_90a", f"-I{ROOT / 'include'}",
           "-DQD_DCNV4_OFFICIAL", f"-I{ROOT / 'bench' / 'peer_shim'}", f"-I{PEER}",
           str(ROOT / "bench" / "dcnv4_kernel_bench.cpp"), "-o", str(binary), "-ldl"]
    if not (PEER / "cuda" / "dcnv4_im2col_cuda.cuh").exists():
        sys.exit(f"error: the official op's source is not in {PEER.parent} (see this script's help)")
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", default=str(ROOT / "build-gpu" / "plugins" / "dcnv4" / "libqd_dcnv4.so"))
    ap.add_argument("--bench-binary", default=str(ROOT / "build-gpu" / "dcnv4_kernel_bench"))
    ap.add_argument("--json")
    args = ap.parse_args()
    binary = Path(args.bench_binary)
    if not binary.exists():
        build(binary)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()[0]
    print(f"{gpu}\n")
    cases = [(label, f"{n},{h},{w},{g},{d}") for label, n, h, w, g, d in SHAPES] + CHECKS
    rows, ok = [], True
    print("| case (N,H,W,G,D[,stride,pad,dilation,remove_center,offset_scale]) | dtype | official ms | config | "
          "qdeploy ms | tactic | speed-up | max diff / range |\n|---|---|---|---|---|---|---|---|")
    for dtype in ("fp16", "fp32"):
        out = subprocess.run([str(binary), args.plugin, dtype, *[c for _, c in cases]], check=True,
                             capture_output=True, text=True).stdout
        for (label, spec), q in zip(cases, [json.loads(x) for x in out.splitlines() if x.startswith("{")]):
            q.update(label=label, speedup=q["official_ms"] / q["ms"])
            passed = dtype == "fp16" or q["max_rel_diff"] <= 1e-5
            ok &= passed
            rows.append(q)
            print(f"| {label}: {spec} | {dtype} | {q['official_ms']:.4f} | {q['official_config']} | {q['ms']:.4f} | "
                  f"{q['tactic']} | {q['speedup']:.2f}x | {q['max_rel_diff']:.1e}{'' if passed else ' FAIL'} |",
                  flush=True)
            print(f"  kernels: {q['kernels']}", file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(dict(gpu=gpu, rows=rows), indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
