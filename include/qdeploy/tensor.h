// Tensors at qdeploy's public API: what an engine's inputs and outputs are (TensorInfo) and host tensors for the
// synchronous convenience paths (HostTensor). Device memory stays the caller's: contexts take raw device pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qdeploy {

// Element types, numbered as ONNX's TensorProto numbers them.
enum class DataType : int32_t {
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
};
// Bytes per element.
size_t data_type_size(DataType t);
// "float32", "float16", "int8", ...
const char* data_type_name(DataType t);

// How a 4-d binding lies in memory: NCHW (the ONNX form) or NHWC.
enum class Layout { kNCHW, kNHWC };

using Dims = std::vector<int64_t>;
int64_t volume(const Dims& d);  // the product of the dims (1 for a scalar); 0 when one is negative

// An engine input or output. shape is the ONNX (logical) shape, -1 where a dim is chosen at run time (the batch).
// dtype and layout are the binding's memory (BuildOptions::input_formats / output_formats); an int8 binding of a
// float tensor holds q = saturate(round_half_even(x / scale)).
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kFloat32;
  Dims shape;
  Layout layout = Layout::kNCHW;
  float scale = 0.f;
};

// A dense host tensor (row-major), owning its bytes.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DataType dtype, Dims shape);  // zero-filled; a negative dim makes an empty tensor

  DataType dtype() const { return dtype_; }
  const Dims& shape() const { return shape_; }
  int64_t numel() const { return static_cast<int64_t>(bytes_.size() / data_type_size(dtype_)); }
  size_t nbytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(bytes_.data()); }

 private:
  DataType dtype_ = DataType::kFloat32;
  Dims shape_;
  std::vector<uint8_t> bytes_;
};

}  // namespace qdeploy
