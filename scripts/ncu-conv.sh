#!/usr/bin/env bash
# Nsight Compute on single fused-conv layers (run ON the GPU machine, after scripts/gpu-check.sh unpacked build-gpu):
# builds one-conv ONNX models, plans them with qdeploy's own kernels (fp16), and profiles one launch of the conv
# kernel each (speed of light, memory, warp stalls). Results: OUT/ncu-*.txt.
# Usage: scripts/ncu-conv.sh OUT "N C H W K R S STRIDE ACT [PAD]" ...   (ACT: silu | none; PAD default R/2; YOLOv5's
# stem, run as qdeploy's space-to-depth conv: "32 3 640 640 32 6 6 2 silu 2")
set -uo pipefail
OUT=${1:?usage: scripts/ncu-conv.sh OUT "N C H W K R S STRIDE ACT" ...}
shift
B=build-gpu
mkdir -p "$OUT" /tmp/ncu-conv
for spec in "$@"; do
  read -r n c h w k r s st act pad <<< "$spec"
  pad=${pad:-$((r / 2))}
  tag="n${n}c${c}h${h}k${k}r${r}s${st}p${pad}_${act}"
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
  "$B/qdeploy" build "/tmp/ncu-conv/$tag.onnx" --device cuda --precision fp16 --tactic-sources qdeploy \
    -o "/tmp/ncu-conv/$tag.plan" > /dev/null || continue
  "$B/qdeploy" inspect "/tmp/ncu-conv/$tag.plan" 2>&1 | grep -i "conv" | head -3 > "$OUT/ncu-$tag.txt"
  ncu -k regex:"conv_igemm_kernel|conv_stem_halo" --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    "$B/qdeploy" bench "/tmp/ncu-conv/$tag.plan" --batch "$n" --warmup 0 --iterations 1 >> "$OUT/ncu-$tag.txt" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|conv_igemm_kernel<|conv_stem_halo|Executed Ipc|Issue Slots Busy|Block Size|Grid Size|L1/TEX Hit|L2 Hit" \
    "$OUT/ncu-$tag.txt" | head -40
done
