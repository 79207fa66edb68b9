#include "runtime/io_format.h"

#include <cmath>

#include "core/half.h"
#include "ops/quantize.h"

namespace qd {

namespace {

// Element i of a tensor of the binding's dtype as fp32 (int8 dequantized with `scale`).
float load(const Tensor& t, int64_t i, float scale) {
  switch (t.dtype()) {
    case DType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
    case DType::kInt8: return ops::dequantize_value(t.data<int8_t>()[i], scale, 0);
    default: return t.data<float>()[i];
  }
}

void store(Tensor* t, int64_t i, float v, float scale) {
  switch (t->dtype()) {
    case DType::kFloat16: t->data<uint16_t>()[i] = float_to_half(v); break;
    case DType::kInt8: t->data<int8_t>()[i] = static_cast<int8_t>(ops::quantize_value(v, scale, 0, -128, 127)); break;
    default: t->data<float>()[i] = v; break;
  }
}

// Copies every element between a tensor in the ONNX form (logical NCHW) and the same tensor in the binding's format;
// to_binding: ONNX form -> binding, else back.
void convert(const Tensor& src, Tensor* dst, const TensorDesc& d, bool to_binding) {
  const Shape& s = to_binding ? src.shape() : dst->shape();  // logical
  const bool nhwc = d.layout == TensorLayout::kNHWC;
  const int64_t C = nhwc ? s[1] : 1, HW = nhwc ? s[2] * s[3] : 1;
  const int64_t total = to_binding ? src.numel() : dst->numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t j = i;  // i's position in the binding
    if (nhwc) {
      const int64_t n = i / (C * HW), c = i / HW % C, p = i % HW;
      j = (n * HW + p) * C + c;
    }
    if (to_binding) {
      store(dst, j, load(src, i, 0.f), d.scale);
    } else {
      store(dst, i, load(src, j, d.scale), 0.f);
    }
  }
}

}  // namespace

const char* io_dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kInt8: return "int8";
    default: return dtype_name(t);
  }
}

Expected<IoFormat> parse_io_format(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string dt = text.substr(0, colon), lay = colon == std::string::npos ? "nchw" : text.substr(colon + 1);
  IoFormat f;
  if (dt == "fp32") {
    f.dtype = DType::kFloat32;
  } else if (dt == "fp16") {
    f.dtype = DType::kFloat16;
  } else if (dt == "int8") {
    f.dtype = DType::kInt8;
  } else {
    return invalid("I/O format '" + text + "': the dtype must be fp32, fp16 or int8 (e.g. int8:nhwc)");
  }
  if (lay == "nchw") {
    f.layout = TensorLayout::kNCHW;
  } else if (lay == "nhwc") {
    f.layout = TensorLayout::kNHWC;
  } else {
    return invalid("I/O format '" + text + "': the layout must be nchw or nhwc (e.g. fp16:nchw)");
  }
  return f;
}

std::string io_format_str(const IoFormat& f) {
  return std::string(io_dtype_name(f.dtype)) + (f.layout == TensorLayout::kNHWC ? ":nhwc" : ":nchw");
}

std::string io_format_str(const TensorDesc& d) { return io_format_str(IoFormat{d.dtype, d.layout}); }

Status apply_io_formats(const std::vector<std::string>& specs, const char* what,
                        const std::map<std::string, float>& scales, std::vector<TensorDesc>* descs) {
  if (specs.empty()) return Status::ok();
  const std::string flag = std::string("--") + what + "-format";
  if (specs.size() != 1 && specs.size() != descs->size()) {
    return invalid(flag + " has " + std::to_string(specs.size()) + " formats for " + std::to_string(descs->size()) +
                   " " + what + "s: give one for all of them or one per " + what + ", in order");
  }
  for (size_t k = 0; k < descs->size(); ++k) {
    TensorDesc& d = (*descs)[k];
    const IoFormat f = QD_TRY(parse_io_format(specs.size() == 1 ? specs[0] : specs[k]));
    if (f.is_default()) continue;
    const std::string where = flag + " " + io_format_str(f) + " for " + what + " '" + d.name + "': ";
    if (d.dtype != DType::kFloat32) {
      return invalid(where + "the tensor is " + dtype_name(d.dtype) + "; formats apply to float32 tensors");
    }
    if (f.layout == TensorLayout::kNHWC && d.shape.size() != 4) {
      return invalid(where + "nhwc needs a 4-d tensor, this one is [" + shape_str(d.shape) + "]");
    }
    if (f.dtype == DType::kInt8) {
      auto it = scales.find(d.name);
      if (it == scales.end() || !(it->second > 0.f) || !std::isfinite(it->second)) {
        return invalid(where + "int8 needs the tensor's INT8 scale (an --precision int8 build whose calibration "
                               "cache or Q/DQ model has one for '" + d.name + "')");
      }
      d.scale = it->second;
    }
    d.dtype = f.dtype;
    d.layout = f.layout;
  }
  return Status::ok();
}

Shape binding_shape(const TensorDesc& d, const Shape& logical) {
  if (d.layout != TensorLayout::kNHWC || logical.size() != 4) return logical;
  return {logical[0], logical[2], logical[3], logical[1]};
}

bool is_binding_memory(const Tensor& t, const TensorDesc& d) {
  return t.dtype() == d.dtype && (d.dtype != DType::kFloat32 || d.layout == TensorLayout::kNCHW);
}

DType feed_dtype(const TensorDesc& d) {
  return d.scale > 0.f || d.layout == TensorLayout::kNHWC ? DType::kFloat32 : d.dtype;
}

Shape logical_shape(const Tensor& t, const TensorDesc& d) {
  const Shape& s = t.shape();
  if (!is_binding_memory(t, d) || d.layout != TensorLayout::kNHWC || s.size() != 4) return s;
  return {s[0], s[3], s[1], s[2]};
}

Expected<Tensor> to_binding_format(const Tensor& x, const TensorDesc& d) {
  if (x.dtype() != DType::kFloat32) {
    return invalid("input '" + d.name + "': converting to the binding's format " + io_format_str(d) +
                   " needs a float32 tensor, got " + dtype_name(x.dtype()));
  }
  if (d.layout == TensorLayout::kNHWC && x.rank() != 4) {
    return invalid("input '" + d.name + "': an nhwc binding needs a 4-d [N,C,H,W] tensor, got [" +
                   shape_str(x.shape()) + "]");
  }
  Tensor out = QD_TRY(Tensor::make(d.dtype, binding_shape(d, x.shape())));
  convert(x, &out, d, true);
  return out;
}

Expected<Tensor> from_binding_format(const Tensor& x, const TensorDesc& d) {
  if (x.dtype() != d.dtype) {
    return invalid("output '" + d.name + "': expected " + dtype_name(d.dtype) + ", got " + dtype_name(x.dtype()));
  }
  Shape logical = x.shape();
  if (d.layout == TensorLayout::kNHWC) {
    if (x.rank() != 4) return invalid("output '" + d.name + "': an nhwc binding is 4-d");
    logical = {x.shape()[0], x.shape()[3], x.shape()[1], x.shape()[2]};
  }
  Tensor out = QD_TRY(Tensor::make(DType::kFloat32, logical));
  convert(x, &out, d, false);
  return out;
}

}  // namespace qd
