#!/usr/bin/env bash
# Nsight Compute on single fused-conv layers (run ON the GPU machine, after scripts/gpu-check.sh unpacked build-gpu):
# builds one-conv ONNX models, plans them with qdeploy's own kernels (fp16, or int8 with QD_NCU_PRECISION=int8: every
# tensor at scale 0.05), and profiles one launch of the conv kernel each (speed of light, memory, warp stalls).
# Results: OUT/ncu-*.txt; with QD_NCU_SASS=1 also OUT/sass-*.txt, the instruction mix and the hottest SASS lines
# (executed instructions and stall samples, from the report's source page; all of it in OUT/sass-*.csv.gz).
# Usage: scripts/ncu-conv.sh OUT "N C H W K R S STRIDE ACT [PAD]" ...   (ACT: silu | none; PAD default R/2; YOLOv5's
# stem, run as qdeploy's space-to-depth conv: "32 3 640 640 32 6 6 2 silu 2"). QD_NCU_BUILD_FLAGS adds `qdeploy build`
# flags (e.g. "--input-format fp16:nhwc", the binding the YOLOv5s benchmark gives the stem).
set -uo pipefail
OUT=${1:?usage: scripts/ncu-conv.sh OUT "N C H W K R S STRIDE ACT" ...}
shift
B=build-gpu
PREC=${QD_NCU_PRECISION:-fp16}
mkdir -p "$OUT" /tmp/ncu-conv
for spec in "$@"; do
  read -r n c h w k r s st act pad <<< "$spec"
  pad=${pad:-$((r / 2))}
  tag="n${n}c${c}h${h}k${k}r${r}s${st}p${pad}_${act}_$PREC"
  python3 - "$n" "$c" "$h" "$w" "$k" "$r" "$s" "$st" "$act" "/tmp/ncu-conv/$tag.onnx" "$pad" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
n, c, h, w, k, r, s, st = map(int, sys.argv[1:9]); act, path, pad = sys.argv[9], sys.argv[10], int(sys.argv[11])
rng = np.random.default_rng(0)
W = numpy_helper.from_array((rng.standard_normal((k, c, r, s)) * 0.05).astype(np.float32), "w")
Bb = numpy_helper.from_array(np.zeros(k, np.float32), "b")
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y0"], kernel_shape=[r, s], strides=[st, st],
                          pads=[pad, pad, pad, pad])]
out = "y0"
if act == "silu":
    nodes += [helper.make_node("Sigmoid", ["y0"], ["sg"]), helper.make_node("Mul", ["y0", "sg"], ["y1"])]
    out = "y1"
# A second conv reads it, so the first writes NHWC fp16 as inside a network.
W2 = numpy_helper.from_array((rng.standard_normal((8, k, 1, 1)) * 0.05).astype(np.float32), "w2")
nodes.append(helper.make_node("Conv", [out, "w2"], ["y"], kernel_shape=[1, 1]))
g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [W, Bb, W2])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
PYEOF
  calib=()
  if [ "$PREC" = int8 ]; then
    printf 'TRT-8600-EntropyCalibration2\n' > "/tmp/ncu-conv/$tag.cache"
    for t in x y0 sg y1 y; do printf '%s: 3d4ccccd\n' "$t" >> "/tmp/ncu-conv/$tag.cache"; done
    calib=(--calib-cache "/tmp/ncu-conv/$tag.cache")
  fi
  "$B/qdeploy" build "/tmp/ncu-conv/$tag.onnx" --device cuda --precision "$PREC" --tactic-sources qdeploy \
    "${calib[@]}" ${QD_NCU_BUILD_FLAGS:-} -o "/tmp/ncu-conv/$tag.plan" > /dev/null || continue
  "$B/qdeploy" inspect "/tmp/ncu-conv/$tag.plan" 2>&1 | grep -i "conv" | head -3 > "$OUT/ncu-$tag.txt"
  sass=()
  [ "${QD_NCU_SASS:-0}" = 1 ] && sass=(--section SourceCounters --section InstructionStats -f -o "/tmp/ncu-conv/$tag")
  ncu -k regex:"conv_igemm_kernel|conv_stem_halo|conv_warp_halo|conv_warp_pw|conv_tma" --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis "${sass[@]}" \
    "$B/qdeploy" bench "/tmp/ncu-conv/$tag.plan" --batch "$n" --warmup 0 --iterations 1 >> "$OUT/ncu-$tag.txt" 2>&1
  if [ ${#sass[@]} -gt 0 ]; then
    ncu --import "/tmp/ncu-conv/$tag.ncu-rep" >> "$OUT/ncu-$tag.txt" 2>&1
    ncu --import "/tmp/ncu-conv/$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/ncu-conv/$tag-sass.csv" 2>&1
    gzip -c "/tmp/ncu-conv/$tag-sass.csv" > "$OUT/sass-$tag.csv.gz"
    python3 - "/tmp/ncu-conv/$tag-sass.csv" > "$OUT/sass-$tag.txt" <<'PYEOF'
import collections, csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next(i for i, r in enumerate(rows) if "Source" in r)
cols, body = rows[head], rows[head + 1:]
def col(*names):
    for n in names:
        for i, c in enumerate(cols):
            if c.startswith(n): return i
    return None
src, ex, st = col("Source"), col("Instructions Executed"), col("Warp Stall Sampling (All", "Warp Stall Sampling")
num = lambda r, i: float(r[i].replace(",", "") or 0) if i is not None and i < len(r) else 0.0
body = [r for r in body if src < len(r)]
tot_ex, tot_st = sum(num(r, ex) for r in body), sum(num(r, st) for r in body)
print(f"columns: {cols}\ninstructions executed (warp) {tot_ex:.0f}, stall samples {tot_st:.0f}")
mix = collections.Counter()
for r in body: mix[r[src].split()[0].split(".")[0] if r[src].split() else "?"] += num(r, ex)
print("mix:", ", ".join(f"{k} {v / tot_ex:.1%}" for k, v in mix.most_common(25)))
for key, name in ((st, "stall samples"), (ex, "executed")):
    print(f"--- top by {name}")
    for r in sorted(body, key=lambda r: -num(r, key))[:40]:
        print(f"{num(r, ex):10.0f} {num(r, st):8.0f}  {r[src][:90]}")
PYEOF
  fi
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|conv_igemm_kernel<|conv_stem_halo|conv_warp|Executed Ipc|Issue Slots Busy|Block Size|Grid Size|L1/TEX Hit|L2 Hit" \
    "$OUT/ncu-$tag.txt" | head -40
done
