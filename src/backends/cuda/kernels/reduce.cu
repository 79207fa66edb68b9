// Reduce* (Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare) and ArgMax / ArgMin. Axes and output
// shapes come from the reference (ops::reduce_axes, ops::reduce_geom). Float data accumulates in fp32 (the
// reference: double); integer Sum/Mean/Prod/SumSquare/L1 wrap in 64 bits and Max/Min compare exactly, as the
// reference does. The kept and the reduced dims are each merged where contiguous: a contiguous reduced block of an
// output goes to a warp or a block, anything else to a thread per output (consecutive threads, consecutive outputs).
#include <cfloat>

#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

enum class RKind : int { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceArgs {
  Walk<1> out;   // output slot -> offset of its first input element
  Walk<1> red;   // reduced index -> offset relative to that
  int64_t m, r;  // outputs, elements per output
  RKind kind;
};

__device__ __forceinline__ float r_init(RKind k) {
  switch (k) {
    case RKind::kMax: return -INFINITY;
    case RKind::kMin: return INFINITY;
    case RKind::kProd: return 1.f;
    default: return 0.f;
  }
}

// Folds v into acc. LogSumExp's second pass sums exp(v - shift); its first pass runs as kMax.
__device__ __forceinline__ float r_add(RKind k, float acc, float v, float shift) {
  switch (k) {
    case RKind::kMax: return (isnan(acc) || isnan(v)) ? NAN : fmaxf(acc, v);  // NaN propagates, as numpy's max
    case RKind::kMin: return (isnan(acc) || isnan(v)) ? NAN : fminf(acc, v);
    case RKind::kProd: return acc * v;
    case RKind::kL1: return acc + fabsf(v);
    case RKind::kL2:
    case RKind::kSumSquare: return acc + v * v;
    case RKind::kLogSumExp: return acc + expf(v - shift);
    default: return acc + v;  // Sum, Mean, LogSum
  }
}
// Combines two partial results.
__device__ __forceinline__ float r_combine(RKind k, float a, float b) {
  switch (k) {
    case RKind::kMax: return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b);
    case RKind::kMin: return (isnan(a) || isnan(b)) ? NAN : fminf(a, b);
    case RKind::kProd: return a * b;
    default: return a + b;
  }
}

__device__ __forceinline__ float r_warp(RKind k, float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = r_combine(k, v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Over the block (every thread gets the result).
__device__ __forceinline__ float r_block(RKind k, float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = r_warp(k, v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : r_init(k == RKind::kLogSumExp ? RKind::kSum : k);
  return r_warp(k, v);
}

__device__ __forceinline__ float r_finish(RKind k, float acc, int64_t r) {
  switch (k) {
    case RKind::kMean: return acc / static_cast<float>(r);
    case RKind::kL2: return sqrtf(acc);
    case RKind::kLogSum: return logf(acc);
    default: return acc;
  }
}

// The partial result of lanes [lane, lane + lanes, ...) over one output's elements; `group` reduces across lanes.
template <typename T, typename G>
__device__ __forceinline__ float reduce_one(const ReduceArgs& a, const T* __restrict__ x, int64_t base, int lane,
                                            int lanes, G group) {
  auto pass = [&](RKind k, float shift) {
    float acc = r_init(k);
    for (int64_t j = lane; j < a.r; j += lanes) {
      int64_t off[1];
      walk_offsets<int64_t>(a.red, j, off);
      acc = r_add(k, acc, to_float(x[base + off[0]]), shift);
    }
    return group(k, acc);
  };
  if (a.kind != RKind::kLogSumExp) return r_finish(a.kind, pass(a.kind, 0.f), a.r);
  // LogSumExp: max + log(sum(exp(x - max))); NaN gives NaN, all -inf gives -inf, +inf gives +inf.
  const float mx = pass(RKind::kMax, 0.f);
  if (isnan(mx) || isinf(mx)) return mx;
  return mx + logf(pass(RKind::kLogSumExp, mx));
}

template <typename T>
__global__ void reduce_thread_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceArgs a) {
  QD_GRID_LOOP(o, a.m) {
    int64_t base[1];
    walk_offsets<int64_t>(a.out, o, base);
    y[o] = from_float<T>(reduce_one(a, x, base[0], 0, 1, [](RKind, float v) { return v; }));
  }
}

template <typename T>
__global__ void reduce_warp_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; o < a.m; o += warps) {
    int64_t base[1];
    walk_offsets<int64_t>(a.out, o, base);
    const float v = reduce_one(a, x, base[0], lane, 32, [](RKind k, float v) { return r_warp(k, v); });
    if (lane == 0) y[o] = from_float<T>(v);
  }
}

template <typename T>
__global__ void reduce_block_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceArgs a) {
  __shared__ float scratch[32];
  for (int64_t o = blockIdx.x; o < a.m; o += gridDim.x) {
    int64_t base[1];
    walk_offsets<int64_t>(a.out, o, base);
    const float v = reduce_one(a, x, base[0], threadIdx.x, blockDim.x,
                               [&](RKind k, float v) { return r_block(k, v, scratch); });
    if (threadIdx.x == 0) y[o] = from_float<T>(v);
  }
}

// Integers: Sum/Mean/Prod/SumSquare/L1 in wrapping 64-bit arithmetic, Max/Min exact; a thread per output.
template <typename T>
__global__ void reduce_int_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceArgs a) {
  QD_GRID_LOOP(o, a.m) {
    int64_t base[1];
    walk_offsets<int64_t>(a.out, o, base);
    uint64_t acc = a.kind == RKind::kProd ? 1 : 0;
    using W = std::make_unsigned_t<T>;
    const T lowest = static_cast<T>(W{1} << (sizeof(T) * 8 - 1)), highest = static_cast<T>(~W{0} >> 1);
    T best = a.kind == RKind::kMax ? lowest : highest;  // (signed T: int32 and int64)
    for (int64_t j = 0; j < a.r; ++j) {
      int64_t off[1];
      walk_offsets<int64_t>(a.red, j, off);
      const T v = x[base[0] + off[0]];
      const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(v));
      switch (a.kind) {
        case RKind::kMax: best = v > best ? v : best; break;
        case RKind::kMin: best = v < best ? v : best; break;
        case RKind::kProd: acc *= u; break;
        case RKind::kSumSquare: acc += u * u; break;
        case RKind::kL1: acc += v < 0 ? uint64_t{0} - u : u; break;
        default: acc += u; break;
      }
    }
    if (a.kind == RKind::kMax || a.kind == RKind::kMin) {
      y[o] = best;
    } else {
      int64_t r = static_cast<int64_t>(acc);
      if (a.kind == RKind::kMean) r = a.r > 0 ? r / a.r : 0;
      y[o] = static_cast<T>(r);
    }
  }
}

enum class Shape3 { kThread, kWarp, kBlock };

template <typename T>
class ReduceKernel final : public GenericKernel {
 public:
  ReduceKernel(const ReduceArgs& a, Shape3 how) : a_(a), how_(how) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (a_.m == 0) return Status::ok();
    const T* x = static_cast<const T*>(in[0]);
    T* y = static_cast<T*>(out[0]);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half>) {
      if (how_ == Shape3::kBlock) reduce_block_kernel<T><<<grid_1d(a_.m * kBlock), kBlock, 0, s>>>(x, y, a_);
      else if (how_ == Shape3::kWarp) reduce_warp_kernel<T><<<grid_1d(a_.m * 32), kBlock, 0, s>>>(x, y, a_);
      else reduce_thread_kernel<T><<<grid_1d(a_.m), kBlock, 0, s>>>(x, y, a_);
    } else {
      reduce_int_kernel<T><<<grid_1d(a_.m), kBlock, 0, s>>>(x, y, a_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  ReduceArgs a_;
  Shape3 how_;
};

struct ReduceInfo {
  OpType op;
  RKind kind;
};
constexpr ReduceInfo kReduce[] = {
    {OpType::ReduceSum, RKind::kSum},         {OpType::ReduceMean, RKind::kMean},
    {OpType::ReduceMax, RKind::kMax},         {OpType::ReduceMin, RKind::kMin},
    {OpType::ReduceProd, RKind::kProd},       {OpType::ReduceL1, RKind::kL1},
    {OpType::ReduceL2, RKind::kL2},           {OpType::ReduceLogSum, RKind::kLogSum},
    {OpType::ReduceLogSumExp, RKind::kLogSumExp}, {OpType::ReduceSumSquare, RKind::kSumSquare},
};

class ReduceCopyKernel final : public GenericKernel {  // noop_with_empty_axes with no axes
 public:
  explicit ReduceCopyKernel(size_t bytes) : bytes_(bytes) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (bytes_ && in[0] != out[0]) QD_CUDA_TRY(cudaMemcpyAsync(out[0], in[0], bytes_, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }

 private:
  size_t bytes_;
};

}  // namespace

MadeKernel make_reduce(const NodeArgs& a) {
  RKind kind = RKind::kSum;
  for (const ReduceInfo& r : kReduce) {
    if (r.op == a.node.op) kind = r.kind;
  }
  const Shape& x = a.in[0].shape;
  const DType t = a.in[0].dtype;
  const std::vector<int64_t> axes = QD_TRY(ops::reduce_axes(&a.ctx, nullptr));
  const ops::ReduceGeom g = QD_TRY(ops::reduce_geom(a.node, x, axes));
  if (a.out[0].dtype != t) return internal("reduce: output type differs from the input's");
  if (g.noop) return KernelPtr(new ReduceCopyKernel(static_cast<size_t>(volume(x)) * dtype_size(t)));
  if (volume(a.out[0].shape) != volume(g.out)) {
    return internal("reduce: the output spec differs from the inferred output");
  }
  const bool int_ok = kind == RKind::kSum || kind == RKind::kMean || kind == RKind::kMax || kind == RKind::kMin ||
                      kind == RKind::kProd || kind == RKind::kSumSquare || kind == RKind::kL1;
  if (!is_float_storage(t) && !((t == DType::kInt32 || t == DType::kInt64) && int_ok)) return no_kernel_dtype(a, t);
  // Split the input's dims into kept and reduced, each walked with the input's strides.
  const std::vector<int64_t> st = strides_of(x);
  DimsStrides kept, red;
  kept.strides.resize(1);
  red.strides.resize(1);
  for (size_t d = 0; d < x.size(); ++d) {
    DimsStrides& v = g.kept[d] == 1 && x[d] != 1 ? red : kept;
    v.dims.push_back(x[d]);
    v.strides[0].push_back(st[d]);
  }
  ReduceArgs r{};
  r.kind = kind;
  r.m = volume(g.out);
  r.r = volume(x) == 0 ? 0 : volume(red.dims);
  if (r.m > 0) {
    QD_RETURN_IF_ERROR(make_walk(coalesce(kept), &r.out));
    const DimsStrides rc = coalesce(red);
    QD_RETURN_IF_ERROR(make_walk(rc.dims == std::vector<int64_t>{0} ? DimsStrides{{1}, {{0}}} : rc, &r.red));
  }
  // A contiguous block per output: cooperative reduction; otherwise a thread per output.
  const bool contiguous = r.red.rank == 1 && r.red.strides[0][0] == 1;
  const Shape3 how = !contiguous || r.r < 64 ? Shape3::kThread : r.r >= 8192 ? Shape3::kBlock : Shape3::kWarp;
  KernelPtr k;
  auto make = [&](auto tag) {
    k.reset(new ReduceKernel<decltype(tag)>(r, how));
    return Status::ok();
  };
  if (is_float_storage(t)) QD_RETURN_IF_ERROR(dispatch_float_storage(t, make));
  else if (t == DType::kInt32) make(int32_t{});
  else make(int64_t{});
  return std::move(k);
}

namespace {

// ---- ArgMax / ArgMin: thread per (outer, inner) lane, the reference's comparisons (first or last extreme) ----

template <typename T>
__device__ __forceinline__ auto arg_value(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __half>) return to_float(v);
  else return v;
}

template <typename T>
__global__ void arg_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t dim, int64_t inner,
                           bool is_max, bool last) {
  QD_GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t - o * inner;
    const T* p = x + o * dim * inner + i;
    int64_t best = 0;
    auto b = arg_value(p[0]);
    for (int64_t k = 1; k < dim; ++k) {
      const auto v = arg_value(p[k * inner]);
      const bool take = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
      if (take) {
        best = k;
        b = v;
      }
    }
    y[t] = best;
  }
}

template <typename T>
class ArgKernel final : public GenericKernel {
 public:
  ArgKernel(int64_t outer, int64_t dim, int64_t inner, bool is_max, bool last)
      : outer_(outer), dim_(dim), inner_(inner), is_max_(is_max), last_(last) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (outer_ * inner_ == 0) return Status::ok();
    arg_kernel<T><<<grid_1d(outer_ * inner_), kBlock, 0, s>>>(static_cast<const T*>(in[0]),
                                                              static_cast<int64_t*>(out[0]), outer_, dim_, inner_,
                                                              is_max_, last_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  int64_t outer_, dim_, inner_;
  bool is_max_, last_;
};

}  // namespace

MadeKernel make_argminmax(const NodeArgs& a) {
  const Shape& x = a.in[0].shape;
  const DType t = a.in[0].dtype;
  if (x.empty()) return invalid("input must have rank >= 1, got a scalar");
  const int axis = QD_TRY(normalize_axis(QD_TRY(a.node.attrs.get_int("axis", 0)), x.size()));
  const bool last = QD_TRY(a.node.attrs.get_int("select_last_index", 0)) != 0;
  if (a.out[0].dtype != DType::kInt64) return no_kernel_dtype(a, a.out[0].dtype, "the output");
  if (x[axis] == 0) return invalid("cannot take ArgMax/ArgMin over an empty axis");
  const bool empty = volume(x) == 0;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis && !empty; ++d) outer *= x[d];
  for (size_t d = axis + 1; d < x.size() && !empty; ++d) inner *= x[d];
  if (empty) outer = 0;
  const bool is_max = a.node.op == OpType::ArgMax;
  KernelPtr k;
  auto make = [&](auto tag) {
    k.reset(new ArgKernel<decltype(tag)>(outer, x[axis], inner, is_max, last));
    return Status::ok();
  };
  switch (t) {
    case DType::kFloat32: make(float{}); break;
    case DType::kFloat16: make(__half{}); break;
    case DType::kInt32: make(int32_t{}); break;
    case DType::kInt64: make(int64_t{}); break;
    case DType::kInt8: make(int8_t{}); break;
    case DType::kUInt8: make(uint8_t{}); break;
    default: return no_kernel_dtype(a, t);
  }
  return std::move(k);
}

}  // namespace qd::cuda
