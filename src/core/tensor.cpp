#include "core/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/half.h"

namespace qd {

namespace {
std::shared_ptr<std::byte> alloc_bytes(size_t n) {
  const size_t padded = ((n == 0 ? 1 : n) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, padded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, padded);
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = qd::numel(shape_);
  buf_ = alloc_bytes(nbytes());
}

Expected<Tensor> Tensor::make(DType dtype, const Shape& shape) {
  if (dtype_size(dtype) == 0) return unsupported(std::string("tensors of type ") + dtype_name(dtype));
  auto n = checked_numel(shape);
  if (!n) return n.status();
  const uint64_t bytes = static_cast<uint64_t>(*n) * dtype_size(dtype);
  if (bytes > kMaxTensorBytes) {
    return invalid("a tensor of shape " + shape_str(shape) + " needs " + std::to_string(bytes >> 20) +
                   " MiB, more than the " + std::to_string(kMaxTensorBytes >> 30) + " GiB limit for one tensor");
  }
  try {
    return Tensor(dtype, shape);
  } catch (const std::bad_alloc&) {
    return invalid("out of memory allocating a tensor of shape " + shape_str(shape) + " (" +
                   std::to_string(bytes >> 20) + " MiB)");
  }
}

Tensor Tensor::scalar_f32(float v) {
  Tensor t(DType::kFloat32, {});
  *t.data<float>() = v;
  return t;
}

Tensor Tensor::scalar_i64(int64_t v) {
  Tensor t(DType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

Tensor Tensor::from_i64(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 8);
  return t;
}

Tensor Tensor::from_f32(const Shape& shape, const std::vector<float>& v) {
  Tensor t(DType::kFloat32, shape);
  const size_t n = std::min<size_t>(v.size(), static_cast<size_t>(t.numel()));
  if (n) std::memcpy(t.raw(), v.data(), n * 4);
  return t;
}

Tensor Tensor::clone() const {
  if (empty()) return {};
  Tensor t(dtype_, shape_);
  std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

double Tensor::get_f64(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat32: return data<float>()[i];
    case DType::kFloat64: return data<double>()[i];
    case DType::kFloat16: return half_to_float(data<uint16_t>()[i]);
    case DType::kUInt8: return data<uint8_t>()[i];
    case DType::kInt8: return data<int8_t>()[i];
    case DType::kUInt16: return data<uint16_t>()[i];
    case DType::kInt16: return data<int16_t>()[i];
    case DType::kInt32: return data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kUInt32: return data<uint32_t>()[i];
    case DType::kUInt64: return static_cast<double>(data<uint64_t>()[i]);
    case DType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64: return data<int64_t>()[i];
    case DType::kInt32: return data<int32_t>()[i];
    case DType::kUInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: {
      const double v = get_f64(i);
      if (!(std::fabs(v) < 9.2e18)) return 0;
      return static_cast<int64_t>(v);
    }
  }
}

namespace {
template <typename T>
T saturate_cast(double v) {
  if (std::isnan(v)) return T(0);
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

void Tensor::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DType::kFloat32: data<float>()[i] = static_cast<float>(v); break;
    case DType::kFloat64: data<double>()[i] = v; break;
    case DType::kFloat16: data<uint16_t>()[i] = float_to_half(static_cast<float>(v)); break;
    case DType::kUInt8: data<uint8_t>()[i] = saturate_cast<uint8_t>(v); break;
    case DType::kInt8: data<int8_t>()[i] = saturate_cast<int8_t>(v); break;
    case DType::kUInt16: data<uint16_t>()[i] = saturate_cast<uint16_t>(v); break;
    case DType::kInt16: data<int16_t>()[i] = saturate_cast<int16_t>(v); break;
    case DType::kInt32: data<int32_t>()[i] = saturate_cast<int32_t>(v); break;
    case DType::kInt64: data<int64_t>()[i] = saturate_cast<int64_t>(v); break;
    case DType::kUInt32: data<uint32_t>()[i] = saturate_cast<uint32_t>(v); break;
    case DType::kUInt64: data<uint64_t>()[i] = saturate_cast<uint64_t>(v); break;
    case DType::kBool: data<uint8_t>()[i] = v != 0.0; break;
    default: break;
  }
}

Tensor Tensor::cast(DType to) const {
  if (to == dtype_) return clone();
  Tensor out(to, shape_);
  if (dtype_ == DType::kInt64 && (to == DType::kInt32 || to == DType::kUInt64)) {
    for (int64_t i = 0; i < numel_; ++i) {
      if (to == DType::kInt32) out.data<int32_t>()[i] = static_cast<int32_t>(data<int64_t>()[i]);
      else out.data<uint64_t>()[i] = static_cast<uint64_t>(data<int64_t>()[i]);
    }
    return out;
  }
  if (to == DType::kInt64 && is_integer(dtype_)) {
    for (int64_t i = 0; i < numel_; ++i) out.data<int64_t>()[i] = get_i64(i);
    return out;
  }
  for (int64_t i = 0; i < numel_; ++i) {
    const double v = get_f64(i);
    out.set_f64(i, is_integer(to) && !std::isnan(v) ? std::trunc(v) : v);
  }
  return out;
}

}  // namespace qd
