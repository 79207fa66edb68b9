// Tensor: a dtype, a static shape and a shared, 64-byte aligned host buffer.
// Copies share the buffer; use clone() for a deep copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace qd {

// Largest single tensor qdeploy allocates (8 GiB): a model or input asking for more is refused with an error.
constexpr uint64_t kMaxTensorBytes = uint64_t{8} << 30;

// How a 4-d image-like tensor lies in memory: [N, C, H, W] or [N, H, W, C].
enum class TensorLayout { kNCHW, kNHWC };

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialized storage. The shape must be valid (see make()).
  Tensor(DType dtype, Shape shape);
  // Checked allocation for shapes derived from untrusted input.
  static Expected<Tensor> make(DType dtype, const Shape& shape);
  static Tensor scalar_f32(float v);
  static Tensor scalar_i64(int64_t v);
  static Tensor from_i64(const std::vector<int64_t>& v);  // 1-D int64
  static Tensor from_f32(const Shape& shape, const std::vector<float>& v);

  bool empty() const { return !buf_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  void* raw() { return buf_.get(); }
  const void* raw() const { return buf_.get(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(buf_.get()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(buf_.get()); }

  Tensor clone() const;
  // Same buffer, new shape with the same element count.
  Tensor reshaped(const Shape& shape) const;
  // Element i converted to double / int64 (any numeric dtype).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);
  // Converts to another dtype (float<->int with truncation toward zero as ONNX Cast does; to bool: != 0).
  Tensor cast(DType to) const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte> buf_;
};

}  // namespace qd
