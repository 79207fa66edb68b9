// QuantizeLinear, DequantizeLinear (per-tensor; per-axis from opset 13) and DynamicQuantizeLinear: the Q/DQ nodes
// of QAT and pre-quantized models. The arithmetic is the project's INT8 contract (ops/quantize.h).
// Later opsets: 19 adds float8 types and `saturate` (float8 only), 21 int16/uint16/int4 types, `block_size`
// (blocked quantization) and QuantizeLinear's `output_dtype`, 23 `precision` and float4, 25 int2/uint2 and
// DequantizeLinear's `output_dtype`. qdeploy reads int8/uint8/int16/uint16 per tensor and per axis; blocked
// quantization, float8/float4 and 4-/2-bit types are refused by name.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/nn_util.h"
#include "ops/op_geometry.h"
#include "ops/quantize.h"

namespace qd::ops {

Expected<QuantGeom> quant_geom(const Node& n, const Shape& x, const Shape& scale, const Shape* zp) {
  const char* sname = n.op == OpType::QuantizeLinear ? "y_scale" : "x_scale";
  const char* zname = n.op == OpType::QuantizeLinear ? "y_zero_point" : "x_zero_point";
  QuantGeom g;
  const bool scalar_like = scale.size() <= 1 && numel(scale) == 1;
  if (!scalar_like) {
    if (scale.size() != 1) {
      return invalid(std::string(sname) + " must be a scalar (per-tensor) or 1-D (per-axis), got shape " + shape_str(scale));
    }
    if (n.opset < 13) {
      return invalid(std::string(sname) + " has " + std::to_string(scale[0]) +
                     " values, but per-axis quantization needs opset 13 (re-export with opset_version >= 13), and "
                     "opset " + std::to_string(n.opset) + " takes a scalar");
    }
    const int64_t axis_attr = QD_TRY(n.attrs.get_int("axis", 1));
    auto axis = normalize_axis(axis_attr, x.size());
    if (!axis) {
      return invalid("axis " + std::to_string(axis_attr) + " is out of range for an input of rank " +
                     std::to_string(x.size()) + " (shape " + shape_str(x) + ")");
    }
    if (scale[0] != x[*axis]) {
      return invalid(std::string(sname) + " has " + std::to_string(scale[0]) + " values but the input " + shape_str(x) +
                     " has " + std::to_string(x[*axis]) + " along axis " + std::to_string(*axis) +
                     ": per-axis quantization needs one scale per slice along `axis`");
    }
    g.per_axis = true;
    g.len = scale[0];
    g.inner = std::max<int64_t>(1, range_product(x, *axis + 1, x.size()));
  }
  if (zp && numel(*zp) != numel(scale)) {
    return invalid(std::string(zname) + " has shape " + shape_str(*zp) + " but " + sname + " has shape " +
                   shape_str(scale) + "; they must match");
  }
  if (zp && zp->size() > 1) return invalid(std::string(zname) + " must be a scalar or 1-D, got shape " + shape_str(*zp));
  return g;
}

namespace {

// QuantizeLinear divides by the scale, so it must be positive and finite (the INT8 contract's s > 0).
// DequantizeLinear only multiplies: any finite scale is accepted there (0 maps everything to 0).
Status check_scales(const Tensor& s, bool quantize) {
  for (int64_t i = 0; i < s.numel(); ++i) {
    const double v = s.get_f64(i);
    if (!std::isfinite(v) || (quantize && v <= 0)) {
      return invalid(std::string(quantize ? "y_scale" : "x_scale") + " [" + std::to_string(i) + "] is " +
                     std::to_string(v) + "; scales must be " + (quantize ? "positive and finite" : "finite") +
                     " (recalibrate, or clamp the scale to a small positive value such as 1e-8 when exporting)");
    }
  }
  return Status::ok();
}

Status range_of(DType t, int32_t* lo, int32_t* hi) {
  switch (t) {
    case DType::kInt8: *lo = -128; *hi = 127; return Status::ok();
    case DType::kUInt8: *lo = 0; *hi = 255; return Status::ok();
    case DType::kInt16: *lo = -32768; *hi = 32767; return Status::ok();
    case DType::kUInt16: *lo = 0; *hi = 65535; return Status::ok();
    default: return unsupported(std::string("quantized type ") + dtype_name(t) + " (int8, uint8, int16 and uint16 only)");
  }
}

// The attributes of opsets 19-25 that qdeploy reads or refuses: blocked quantization is refused; `saturate` only
// applies to float8, which is refused where the type is read.
Status check_later_attrs(const Node& n) {
  const int64_t block = QD_TRY(n.attrs.get_int("block_size", 0));
  if (block < 0) return invalid("block_size must be >= 0, got " + std::to_string(block));
  if (block > 0) {
    return unsupported("blocked quantization (block_size " + std::to_string(block) +
                       "); qdeploy supports per-tensor and per-axis scales");
  }
  const int64_t saturate = QD_TRY(n.attrs.get_int("saturate", 1));
  if (saturate != 0 && saturate != 1) return invalid("saturate must be 0 or 1, got " + std::to_string(saturate));
  return Status::ok();
}

// An `output_dtype` attribute (QuantizeLinear from 21, DequantizeLinear from 25): 0 or absent leaves the type to
// the zero point (or the scale); otherwise it must be one qdeploy reads.
Expected<DType> output_dtype(const Node& n, DType fallback) {
  const int64_t code = QD_TRY(n.attrs.get_int("output_dtype", 0));
  if (code == 0) return fallback;
  DType t;
  if (code > INT32_MAX || !dtype_from_onnx(static_cast<int32_t>(code), &t)) {
    return unsupported("output_dtype " + onnx_type_name(static_cast<int32_t>(std::min<int64_t>(code, INT32_MAX))) +
                       " (qdeploy quantizes to int8, uint8, int16 and uint16, and dequantizes to float32/float16)");
  }
  return t;
}

std::vector<int32_t> zero_points(const Tensor* zp, int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n), 0);
  if (zp) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(zp->get_i64(i));
  }
  return v;
}

}  // namespace

// ---- QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point) ----

Status infer_QuantizeLinear(InferCtx& c) {
  const DType xt = c.dtype(0);
  if (xt != DType::kFloat32 && xt != DType::kFloat64 && xt != DType::kInt32) {
    return unsupported(std::string("QuantizeLinear of ") + dtype_name(xt) + " (float32, float64 and int32 only)");
  }
  if (!is_float(c.dtype(1)) || c.dtype(1) == DType::kFloat16) {
    return unsupported(std::string("y_scale of type ") + dtype_name(c.dtype(1)) + " (float32/float64 only)");
  }
  QD_RETURN_IF_ERROR(check_later_attrs(c.node));
  const int64_t precision = QD_TRY(c.node.attrs.get_int("precision", 0));
  if (precision != 0 && precision != static_cast<int64_t>(c.dtype(1))) {
    return unsupported("precision " + onnx_type_name(static_cast<int32_t>(std::min<int64_t>(precision, INT32_MAX))) +
                       " (qdeploy divides in y_scale's type)");
  }
  const DType yt = QD_TRY(output_dtype(c.node, c.has_input(2) ? c.dtype(2) : DType::kUInt8));
  if (c.has_input(2) && c.dtype(2) != yt) {
    return invalid(std::string("output_dtype is ") + dtype_name(yt) + " but y_zero_point is " + dtype_name(c.dtype(2)) +
                   "; they must match");
  }
  int32_t lo, hi;
  QD_RETURN_IF_ERROR(range_of(yt, &lo, &hi));
  QD_RETURN_IF_ERROR(quant_geom(c.node, c.shape(0), c.shape(1), c.has_input(2) ? &c.shape(2) : nullptr).status());
  if (const Tensor* s = c.value(1)) QD_RETURN_IF_ERROR(check_scales(*s, true));
  c.set_output(0, yt, c.shape(0));
  return Status::ok();
}

Status run_QuantizeLinear(KernelCtx& c) {
  const Tensor& x = *c.in[0];
  const Tensor& scale = *c.in[1];
  const Tensor* zp = c.in.size() > 2 ? c.in[2] : nullptr;
  const Shape* zs = zp ? &zp->shape() : nullptr;
  const QuantGeom g = QD_TRY(quant_geom(c.node, x.shape(), scale.shape(), zs));
  QD_RETURN_IF_ERROR(check_scales(scale, true));
  const DType yt = c.out[0]->dtype();
  int32_t lo, hi;
  QD_RETURN_IF_ERROR(range_of(yt, &lo, &hi));
  const std::vector<int32_t> zpv = zero_points(zp, scale.numel());
  const bool f32 = x.dtype() == DType::kFloat32 && scale.dtype() == DType::kFloat32;
  const int64_t n = x.numel();
  std::vector<int32_t> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ch = g.per_axis ? (i / g.inner) % g.len : 0;
    // float32 tensors divide in float32 (what ONNX Runtime and the GPU kernels compute); others in double.
    const double v = f32 ? static_cast<double>(x.data<float>()[i] / scale.data<float>()[ch]) : x.get_f64(i) / scale.get_f64(ch);
    q[i] = quantize_scaled(v, zpv[ch], lo, hi);
  }
  for (int64_t i = 0; i < n; ++i) c.out[0]->set_f64(i, q[i]);  // exact: |q| < 2^16
  return Status::ok();
}

// ---- DequantizeLinear: y = (x - x_zero_point) * x_scale ----

Status infer_DequantizeLinear(InferCtx& c) {
  const DType xt = c.dtype(0);
  if (xt != DType::kInt8 && xt != DType::kUInt8 && xt != DType::kInt16 && xt != DType::kUInt16 && xt != DType::kInt32) {
    return unsupported(std::string("DequantizeLinear of ") + dtype_name(xt) + " (int8, uint8, int16, uint16 and int32 only)");
  }
  QD_RETURN_IF_ERROR(check_later_attrs(c.node));
  if (c.has_input(2) && c.dtype(2) != xt) {
    return invalid(std::string("x_zero_point is ") + dtype_name(c.dtype(2)) + " but x is " + dtype_name(xt) + "; they must match");
  }
  const DType st = c.dtype(1);
  if (st != DType::kFloat32 && st != DType::kFloat64) {
    return unsupported(std::string("x_scale of type ") + dtype_name(st) + " (float32/float64 only)");
  }
  const DType yt = QD_TRY(output_dtype(c.node, st));
  if (yt != st) {
    return unsupported(std::string("output_dtype ") + dtype_name(yt) + " with an x_scale of " + dtype_name(st) +
                       " (qdeploy dequantizes to the scale's type)");
  }
  QD_RETURN_IF_ERROR(quant_geom(c.node, c.shape(0), c.shape(1), c.has_input(2) ? &c.shape(2) : nullptr).status());
  if (const Tensor* s = c.value(1)) QD_RETURN_IF_ERROR(check_scales(*s, false));
  c.set_output(0, st, c.shape(0));
  return Status::ok();
}

Status run_DequantizeLinear(KernelCtx& c) {
  const Tensor& x = *c.in[0];
  const Tensor& scale = *c.in[1];
  const Tensor* zp = c.in.size() > 2 ? c.in[2] : nullptr;
  const QuantGeom g = QD_TRY(quant_geom(c.node, x.shape(), scale.shape(), zp ? &zp->shape() : nullptr));
  QD_RETURN_IF_ERROR(check_scales(scale, false));
  std::vector<int64_t> zpv(static_cast<size_t>(scale.numel()), 0);
  if (zp) {
    for (int64_t i = 0; i < scale.numel(); ++i) zpv[i] = zp->get_i64(i);
  }
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ch = g.per_axis ? (i / g.inner) % g.len : 0;
    const int64_t d = x.get_i64(i) - zpv[ch];
    if (scale.dtype() == DType::kFloat32) {
      c.out[0]->data<float>()[i] = static_cast<float>(d) * scale.data<float>()[ch];
    } else {
      c.out[0]->data<double>()[i] = static_cast<double>(d) * scale.data<double>()[ch];
    }
  }
  return Status::ok();
}

// ---- DynamicQuantizeLinear: uint8 with scale and zero point from the data's range (extended to include 0) ----

Status infer_DynamicQuantizeLinear(InferCtx& c) {
  if (c.dtype(0) != DType::kFloat32) {
    return unsupported(std::string("DynamicQuantizeLinear of ") + dtype_name(c.dtype(0)) + " (float32 only)");
  }
  c.set_output(0, DType::kUInt8, c.shape(0));
  if (c.has_output(1)) c.set_output(1, DType::kFloat32, {});
  if (c.has_output(2)) c.set_output(2, DType::kUInt8, {});
  return Status::ok();
}

Status run_DynamicQuantizeLinear(KernelCtx& c) {
  const float* x = c.in[0]->data<float>();
  const int64_t n = c.in[0]->numel();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    return invalid("DynamicQuantizeLinear input contains infinities; its range cannot be quantized");
  }
  // Spelled as ONNX's function body, in float32: scale = range / 255, zp = round(clip(0 - min / scale, 0, 255)).
  const float scale = (hi - lo) / 255.0f;
  int32_t zp = 0;
  if (scale > 0) {
    const float zf = std::min(255.0f, std::max(0.0f, 0.0f - lo / scale));
    zp = static_cast<int32_t>(round_half_even(zf));
  }
  uint8_t* y = c.out[0]->data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<uint8_t>(scale > 0 ? quantize_value(x[i], scale, zp, 0, 255) : zp);
  if (c.out.size() > 1 && c.out[1]) *c.out[1]->data<float>() = scale;
  if (c.out.size() > 2 && c.out[2]) *c.out[2]->data<uint8_t>() = static_cast<uint8_t>(zp);
  return Status::ok();
}

}  // namespace qd::ops
