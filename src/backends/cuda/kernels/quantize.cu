// QuantizeLinear and DequantizeLinear, per tensor or per axis (ops::quant_geom), with the INT8 contract's arithmetic
// (ops/quantize.h): q = saturate(round_half_even(x / scale) + zero_point), the division in fp32 as the reference does
// for fp32 data; x = (q - zero_point) * scale. Float data may be stored as fp32 or fp16, scales as fp32 or fp16.
#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

struct QArgs {
  int64_t n, len, inner;
  bool per_axis, half_scale;
  int32_t lo, hi;  // the quantized type's range
};

__device__ __forceinline__ int64_t channel(const QArgs& a, int64_t i) { return a.per_axis ? (i / a.inner) % a.len : 0; }

template <typename T, typename Q>
__global__ void quantize_kernel(const T* __restrict__ x, const void* scale, const Q* zp, Q* __restrict__ y, QArgs a) {
  QD_GRID_LOOP(i, a.n) {
    const int64_t c = channel(a, i);
    const float z = zp ? static_cast<float>(zp[c]) : 0.f;
    const float q = to_float(x[i]) / load_any(scale, a.half_scale, c);
    float v;
    if (isnan(q)) v = z;  // NaN quantizes to the zero point
    else v = rintf(q) + z;  // ties to even; exact below 2^24, saturated beyond
    v = v <= a.lo ? a.lo : (v >= a.hi ? a.hi : v);
    y[i] = static_cast<Q>(static_cast<int32_t>(v));
  }
}

template <typename Q, typename T>
__global__ void dequantize_kernel(const Q* __restrict__ x, const void* scale, const Q* zp, T* __restrict__ y,
                                  QArgs a) {
  QD_GRID_LOOP(i, a.n) {
    const int64_t c = channel(a, i);
    const int64_t d = static_cast<int64_t>(x[i]) - (zp ? static_cast<int64_t>(zp[c]) : 0);
    y[i] = from_float<T>(static_cast<float>(d) * load_any(scale, a.half_scale, c));
  }
}

template <typename T, typename Q, bool kQuantize>
class QuantKernel final : public GenericKernel {
 public:
  explicit QuantKernel(const QArgs& a) : a_(a) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (a_.n == 0) return Status::ok();
    const Q* zp = in.size() > 2 ? static_cast<const Q*>(in[2]) : nullptr;
    if constexpr (kQuantize) {
      quantize_kernel<T, Q><<<grid_1d(a_.n), kBlock, 0, s>>>(static_cast<const T*>(in[0]), in[1], zp,
                                                             static_cast<Q*>(out[0]), a_);
    } else {
      dequantize_kernel<Q, T><<<grid_1d(a_.n), kBlock, 0, s>>>(static_cast<const Q*>(in[0]), in[1], zp,
                                                               static_cast<T*>(out[0]), a_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  QArgs a_;
};

}  // namespace

MadeKernel make_quantize(const NodeArgs& a) {
  const bool quantize = a.node.op == OpType::QuantizeLinear;
  const DType ft = quantize ? a.in[0].dtype : a.out[0].dtype;  // the float side
  const DType qt = quantize ? a.out[0].dtype : a.in[0].dtype;  // the integer side
  const DType st = a.in[1].dtype;
  if (!is_float_storage(ft)) return no_kernel_dtype(a, ft, quantize ? "x" : "y");
  if (!is_float_storage(st)) return no_kernel_dtype(a, st, "the scale");
  if (a.has_in(2) && a.in[2].dtype != qt) return no_kernel(a, "a zero point of another type than the quantized data");
  const ops::QuantGeom g =
      QD_TRY(ops::quant_geom(a.node, a.in[0].shape, a.in[1].shape, a.has_in(2) ? &a.in[2].shape : nullptr));
  QArgs q{};
  q.n = volume(a.in[0].shape);
  q.len = g.len;
  q.inner = g.inner;
  q.per_axis = g.per_axis;
  q.half_scale = st == DType::kFloat16;
  KernelPtr k;
  auto make = [&](auto qtag) {
    using Q = decltype(qtag);
    return dispatch_float_storage(ft, [&](auto ftag) {
      using T = decltype(ftag);
      if (quantize) k.reset(new QuantKernel<T, Q, true>(q));
      else k.reset(new QuantKernel<T, Q, false>(q));
      return Status::ok();
    });
  };
  switch (qt) {
    case DType::kInt8:
      q.lo = -128, q.hi = 127;
      QD_RETURN_IF_ERROR(make(int8_t{}));
      break;
    case DType::kUInt8:
      q.lo = 0, q.hi = 255;
      QD_RETURN_IF_ERROR(make(uint8_t{}));
      break;
    case DType::kInt16:
      q.lo = -32768, q.hi = 32767;
      QD_RETURN_IF_ERROR(make(int16_t{}));
      break;
    case DType::kUInt16:
      q.lo = 0, q.hi = 65535;
      QD_RETURN_IF_ERROR(make(uint16_t{}));
      break;
    case DType::kInt32:  // DequantizeLinear of int32 (biases)
      if (quantize) return no_kernel_dtype(a, qt, "y");
      QD_RETURN_IF_ERROR(make(int32_t{}));
      break;
    default: return no_kernel_dtype(a, qt, quantize ? "y" : "x");
  }
  return std::move(k);
}

}  // namespace qd::cuda
