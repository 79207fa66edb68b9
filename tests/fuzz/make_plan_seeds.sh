#!/bin/sh
# Writes the plan fuzzer's seed corpus (tests/fuzz/corpus/plan): small CPU plans built from the ONNX seed corpus in
# fp32, INT8 exact and fake (with a one-line calibration cache), with a shape profile, and from a QAT-style model;
# with `cuda` (on a machine with a GPU), CUDA plans in fp32, fp16 and INT8 instead (cuda_*.plan).
# Usage: tests/fuzz/make_plan_seeds.sh build/qdeploy [cuda]
set -eu
Q=${1:?usage: $0 path/to/qdeploy}
HERE=$(cd "$(dirname "$0")" && pwd)
IN=$HERE/corpus/onnx
OUT=$HERE/corpus/plan
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
printf 'TRT-8600-EntropyCalibration2\nx: 3c010204\n' >"$TMP/x.cache"
if [ "${2:-}" = cuda ]; then
  for p in fp32 fp16; do
    "$Q" build "$IN/conv_bn_silu_add.onnx" -o "$OUT/cuda_conv_bn_silu_add_$p.plan" --device cuda --precision $p >/dev/null
  done
  "$Q" build "$IN/yolo_head_like.onnx" -o "$OUT/cuda_yolo_head_like_fp16.plan" --device cuda --precision fp16 \
    --output-format fp16 >/dev/null
  "$Q" build "$IN/conv_relu_maxpool.onnx" -o "$OUT/cuda_conv_relu_maxpool_int8.plan" --device cuda --precision int8 \
    --calib-cache "$TMP/x.cache" --input-format int8:nhwc >/dev/null
  ls -l "$OUT"/cuda_*
  exit 0
fi
for m in conv_relu_maxpool conv_bn_silu_add constants_and_math resize_slice_pad yolo_head_like matmul_layernorm \
         node_gemm_default_single_elem_vector_bias node_convtranspose node_gather_0 node_where_example; do
  "$Q" build "$IN/$m.onnx" -o "$OUT/$m.plan" >/dev/null
done
"$Q" build "$IN/conv_relu_maxpool.onnx" -o "$OUT/conv_relu_maxpool_int8_exact.plan" --precision int8 \
  --calib-cache "$TMP/x.cache" >/dev/null
"$Q" build "$IN/conv_bn_silu_add.onnx" -o "$OUT/conv_bn_silu_add_int8_fake.plan" --precision int8 --int8-mode fake \
  --calib-cache "$TMP/x.cache" --fp32-layers 'nothing.*' >/dev/null
"$Q" build "$IN/qdq_conv.onnx" -o "$OUT/qdq_conv_int8.plan" --precision int8 >/dev/null
"$Q" build "$IN/dynamic_batch_view.onnx" -o "$OUT/dynamic_batch_view_profile.plan" \
  --min x:1x2x2x2 --opt x:2x2x2x2 --max x:4x2x2x2 >/dev/null
ls -l "$OUT"
