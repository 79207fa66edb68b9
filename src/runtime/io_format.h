// I/O formats of engine bindings (--input-format / --output-format, like trtexec's --inputIOFormats): the dtype and
// layout an input is given in or an output is written in, so that a caller's own kernels (e.g. an INT8 NHWC
// preprocessing kernel) feed the engine without a conversion pass, and outputs cross PCIe in half the bytes.
//
//   FORMAT := DTYPE[:LAYOUT]   DTYPE: fp32 | fp16 | int8   LAYOUT: nchw (default) | nhwc
//
// int8 bindings hold the tensor quantized with its INT8 scale (the calibration cache's or the Q/DQ model's), by the
// activation rule q = saturate(round_half_even(x / scale), -128, 127); nhwc needs a 4-d tensor. Host tensors given
// in the ONNX form (fp32, logical shape) are converted to a binding's format by to_binding_format().
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/engine.h"

namespace qd {

struct IoFormat {
  DType dtype = DType::kFloat32;
  TensorLayout layout = TensorLayout::kNCHW;
  bool is_default() const { return dtype == DType::kFloat32 && layout == TensorLayout::kNCHW; }
};

// "fp16:nhwc" -> {kFloat16, kNHWC}; errors name the accepted values.
Expected<IoFormat> parse_io_format(const std::string& text);
std::string io_format_str(const IoFormat& f);
// "fp32", "fp16", "int8" (other dtypes: dtype_name).
const char* io_dtype_name(DType t);
// "int8:nhwc" for a binding.
std::string io_format_str(const TensorDesc& d);

// Applies --input-format (what = "input") or --output-format values to the bindings `descs` (ONNX form): none, one
// for all, or one per binding in order. Sets dtype, layout and, for int8, the scale from `scales` (tensor name ->
// INT8 scale). Errors: a count that fits neither, a non-float tensor, nhwc on a tensor that is not 4-d, int8 without
// a scale.
Status apply_io_formats(const std::vector<std::string>& specs, const char* what,
                        const std::map<std::string, float>& scales, std::vector<TensorDesc>* descs);

// The binding's memory shape for a logical (ONNX) shape: [N, H, W, C] for nhwc, else the same.
Shape binding_shape(const TensorDesc& d, const Shape& logical);
// Host tensors given for binding d: one of the binding's dtype, other than fp32, is its memory (binding_shape); any
// other is the ONNX form (fp32, logical shape), converted by to_binding_format. (So an fp32:nhwc binding takes the
// ONNX form from the host.)
bool is_binding_memory(const Tensor& t, const TensorDesc& d);
// The dtype of generated host data (random feeds) for binding d, in its logical shape: the ONNX form's float32 for
// int8 and nhwc bindings (converted on upload), else the binding's dtype.
DType feed_dtype(const TensorDesc& d);
// The logical (ONNX) shape of such a host tensor.
Shape logical_shape(const Tensor& t, const TensorDesc& d);
// An ONNX-form host tensor (fp32, logical shape) in the binding's format (dtype, layout, quantized for int8).
Expected<Tensor> to_binding_format(const Tensor& x, const TensorDesc& d);
// The inverse: a tensor in the binding's format back to fp32 in the logical shape (int8 dequantized).
Expected<Tensor> from_binding_format(const Tensor& x, const TensorDesc& d);

}  // namespace qd
