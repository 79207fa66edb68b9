// Data movement: copies (Reshape & co.), strided copies (Transpose, Slice, Expand, DepthToSpace, SpaceToDepth), Concat,
// Split, Gather, Tile, Pad, and ops whose output is known when the kernel is created (Shape, Size, ...). Elements are
// copied by width (1/2/4/8 bytes), so every dtype works, int8 activations included. Geometry comes from the reference
// op files (ops/op_geometry.h), so both backends read a node the same way.
#include <cstring>

#include "backends/cuda/kernels/generic_device.cuh"
#include "ops/op_geometry.h"

namespace qd::cuda {

namespace {

// ---- plain copies ----

class CopyKernel final : public GenericKernel {
 public:
  CopyKernel(size_t bytes, size_t mask_bytes) : bytes_(bytes), mask_bytes_(mask_bytes) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (bytes_ && in[0] != out[0]) QD_CUDA_TRY(cudaMemcpyAsync(out[0], in[0], bytes_, cudaMemcpyDeviceToDevice, s));
    // Dropout's mask (inference: all true).
    if (mask_bytes_ && out.size() > 1 && out[1]) QD_CUDA_TRY(cudaMemsetAsync(out[1], 1, mask_bytes_, s));
    return Status::ok();
  }

 private:
  size_t bytes_, mask_bytes_;
};

}  // namespace

MadeKernel make_copy(const NodeArgs& a) {
  if (a.in[0].dtype != a.out[0].dtype) return no_kernel(a, "output type differs from the input's");
  const int64_t n = volume(a.out[0].shape);
  if (n != volume(a.in[0].shape)) return no_kernel(a, "output size differs from the input's");
  size_t mask = 0;
  if (a.node.op == OpType::Dropout && a.has_in(2)) {
    // Inference only: training_mode must be a constant false (a runtime flag could turn dropout on).
    const Tensor* training = a.constant(2);
    if (!training || training->numel() != 1 || training->get_i64(0) != 0) {
      return no_kernel(a, "training_mode is not a constant false (qdeploy runs inference only)");
    }
  }
  if (a.node.op == OpType::Dropout && a.has_out(1)) {
    if (a.out[1].dtype != DType::kBool) return no_kernel_dtype(a, a.out[1].dtype, "the mask");
    mask = static_cast<size_t>(n);
  }
  return KernelPtr(new CopyKernel(static_cast<size_t>(n) * dtype_size(a.in[0].dtype), mask));
}

namespace {

// ---- strided copies: y[i] = x[base + sum_d coord_d(i) * stride_d] ----

template <typename U, typename I>
__global__ void strided_kernel(const U* __restrict__ x, U* __restrict__ y, Walk<1> w, int64_t n) {
  QD_GRID_LOOP(i, n) {
    int64_t off[1];
    walk_offsets<I>(w, i, off);
    y[i] = x[off[0]];
  }
}

// A strided copy whose input is contiguous along output dim `j` but not along the output's last dim (a transpose
// such as NCHW <-> NHWC): 32x32 tiles through shared memory, so that reads and writes are both coalesced. The other
// dims form the batch, walked by `rest` (operand 0: input offset, operand 1: output offset).
struct TileGeom {
  int64_t len_j, len_l;        // sizes of dim j and of the last dim
  int64_t in_l;                // input stride of the last dim (input stride of j is 1)
  int64_t out_j;               // output stride of dim j (output stride of the last dim is 1)
  int64_t batch;
  Walk<2> rest;
};

constexpr int kTile = 32;

template <typename U>
__global__ void transpose_tile_kernel(const U* __restrict__ x, U* __restrict__ y, TileGeom g) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kTile, l0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
    int64_t off[2];
    walk_offsets<int64_t>(g.rest, b, off);
    // Read: consecutive threads walk dim j (contiguous in the input).
    for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
      const int64_t j = j0 + threadIdx.x, l = l0 + r;
      if (j < g.len_j && l < g.len_l) tile[r][threadIdx.x] = x[off[0] + j + l * g.in_l];
    }
    __syncthreads();
    // Write: consecutive threads walk the last dim (contiguous in the output).
    for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
      const int64_t j = j0 + r, l = l0 + threadIdx.x;
      if (j < g.len_j && l < g.len_l) y[off[1] + j * g.out_j + l] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

template <typename U>
class StridedKernel final : public GenericKernel {
 public:
  StridedKernel(const Walk<1>& w, int64_t n, bool small) : w_(w), n_(n), small_(small) {}
  StridedKernel(const TileGeom& t, int64_t n) : n_(n), tiled_(true), t_(t) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    const U* x = static_cast<const U*>(in[0]);
    U* y = static_cast<U*>(out[0]);
    if (tiled_) {
      const dim3 grid(static_cast<unsigned>(ceil_div(t_.len_l, kTile)),
                      static_cast<unsigned>(ceil_div(t_.len_j, kTile)),
                      static_cast<unsigned>(std::min<int64_t>(t_.batch, 65535)));
      transpose_tile_kernel<U><<<grid, dim3(kTile, 8), 0, s>>>(x, y, t_);
    } else if (small_) {
      strided_kernel<U, int32_t><<<grid_1d(n_), kBlock, 0, s>>>(x, y, w_, n_);
    } else {
      strided_kernel<U, int64_t><<<grid_1d(n_), kBlock, 0, s>>>(x, y, w_, n_);
    }
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  Walk<1> w_{};
  int64_t n_;
  bool small_ = false;
  bool tiled_ = false;
  TileGeom t_{};
};

// The tiled form of a coalesced strided copy, when it applies (see TileGeom).
bool tile_geom(const DimsStrides& v, int64_t base, TileGeom* t) {
  const size_t r = v.dims.size();
  if (r < 2 || v.strides[0][r - 1] == 1) return false;
  size_t j = r;
  for (size_t d = 0; d + 1 < r; ++d) {
    if (v.strides[0][d] == 1) j = d;
  }
  if (j == r || v.dims[j] < 8 || v.dims[r - 1] < 8) return false;  // thin tiles gain nothing
  if (ceil_div(v.dims[j], kTile) > 65535) return false;            // grid.y limit
  std::vector<int64_t> out_st(r, 1);
  for (size_t d = r - 1; d-- > 0;) out_st[d] = out_st[d + 1] * v.dims[d + 1];
  DimsStrides rest;
  rest.strides.resize(2);
  for (size_t d = 0; d + 1 < r; ++d) {
    if (d == j) continue;
    rest.dims.push_back(v.dims[d]);
    rest.strides[0].push_back(v.strides[0][d]);
    rest.strides[1].push_back(out_st[d]);
  }
  if (rest.dims.empty()) {
    rest.dims = {1};
    rest.strides = {{0}, {0}};
  }
  if (!make_walk(rest, &t->rest).is_ok()) return false;
  t->rest.base[0] = base;
  t->len_j = v.dims[j];
  t->len_l = v.dims[r - 1];
  t->in_l = v.strides[0][r - 1];
  t->out_j = out_st[j];
  t->batch = 1;
  for (int64_t d : rest.dims) t->batch *= d;
  return true;
}

}  // namespace

MadeKernel make_strided(const NodeArgs& a) {
  const Shape& in = a.in[0].shape;
  const Shape& out = a.out[0].shape;
  if (a.in[0].dtype != a.out[0].dtype) return no_kernel(a, "output type differs from the input's");
  const std::vector<int64_t> in_st = strides_of(in);
  DimsStrides v;
  v.dims = out;
  v.strides.resize(1);
  int64_t base = 0;
  switch (a.node.op) {
    case OpType::Transpose: {
      const std::vector<int64_t> perm = QD_TRY(ops::transpose_perm(a.ctx));
      for (int64_t p : perm) v.strides[0].push_back(in_st[p]);
      break;
    }
    case OpType::Slice: {
      const ops::SliceGeom g = QD_TRY(ops::slice_geom(a.ctx));
      for (size_t d = 0; d < in.size(); ++d) {
        v.strides[0].push_back(in_st[d] * g.step[d]);
        base += in_st[d] * g.start[d];
      }
      break;
    }
    case OpType::Expand: v.strides[0] = broadcast_strides(in, out); break;
    case OpType::DepthToSpace:
    case OpType::SpaceToDepth: {
      const ops::PermutedView pv = QD_TRY(a.node.op == OpType::DepthToSpace ? ops::depth_to_space_view(a.ctx)
                                                                            : ops::space_to_depth_view(a.ctx));
      const std::vector<int64_t> vs = strides_of(pv.view);
      v.dims.clear();
      for (int p : pv.perm) {
        v.dims.push_back(pv.view[p]);
        v.strides[0].push_back(vs[p]);
      }
      break;
    }
    default: return no_kernel(a, "not a strided copy");
  }
  if (v.dims.size() != v.strides[0].size()) return internal("strided copy: stride count differs from the rank");
  const int64_t n = volume(out);
  const DimsStrides c = coalesce(v);
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_width(a.in[0].dtype, [&](auto tag) {
    using U = decltype(tag);
    TileGeom t{};
    if (tile_geom(c, base, &t)) {
      k.reset(new StridedKernel<U>(t, n));
      return Status::ok();
    }
    Walk<1> w;
    QD_RETURN_IF_ERROR(make_walk(c, &w));
    w.base[0] = base;
    k.reset(new StridedKernel<U>(w, n, fits_int32(n, volume(in))));
    return Status::ok();
  }));
  return std::move(k);
}

namespace {

// ---- 2-d block copies (Concat, Split): `rows` rows of `width` bytes, with their own pitches ----

template <typename U>
__global__ void copy_2d_kernel(const char* __restrict__ src, int64_t spitch, char* __restrict__ dst, int64_t dpitch,
                               int64_t width_u, int64_t n) {
  QD_GRID_LOOP(i, n) {
    const int64_t r = i / width_u, c = i - r * width_u;
    *reinterpret_cast<U*>(dst + r * dpitch + c * static_cast<int64_t>(sizeof(U))) =
        *reinterpret_cast<const U*>(src + r * spitch + c * static_cast<int64_t>(sizeof(U)));
  }
}

// Copies with the widest unit (16 down to 1 bytes) that the pointers, pitches and width are all multiples of.
Status copy_2d(const void* src, int64_t spitch, void* dst, int64_t dpitch, int64_t width, int64_t rows,
               cudaStream_t s) {
  if (width == 0 || rows == 0) return Status::ok();
  const uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                        static_cast<uint64_t>(spitch) | static_cast<uint64_t>(dpitch) | static_cast<uint64_t>(width);
  const auto* sp = static_cast<const char*>(src);
  auto* dp = static_cast<char*>(dst);
  auto run = [&](auto unit) {
    using U = decltype(unit);
    const int64_t wu = width / static_cast<int64_t>(sizeof(U));
    copy_2d_kernel<U><<<grid_1d(wu * rows), kBlock, 0, s>>>(sp, spitch, dp, dpitch, wu, wu * rows);
  };
  if ((bits & 15) == 0) run(uint4{});
  else if ((bits & 7) == 0) run(uint2{});
  else if ((bits & 3) == 0) run(uint32_t{});
  else if ((bits & 1) == 0) run(uint16_t{});
  else run(uint8_t{});
  QD_CUDA_LAUNCHED();
  return Status::ok();
}

// One block copy per input (Concat) or output (Split): part k is rows x width[k] bytes at byte column col[k] of the
// whole tensor's rows of `row` bytes.
class BlocksKernel final : public GenericKernel {
 public:
  BlocksKernel(bool concat, int64_t rows, int64_t row, std::vector<int64_t> width, std::vector<int64_t> col)
      : concat_(concat), rows_(rows), row_(row), width_(std::move(width)), col_(std::move(col)) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    for (size_t k = 0; k < width_.size(); ++k) {
      if (concat_) {
        QD_RETURN_IF_ERROR(copy_2d(in[k], width_[k], static_cast<char*>(out[0]) + col_[k], row_, width_[k], rows_, s));
      } else if (k < out.size() && out[k]) {
        const char* src = static_cast<const char*>(in[0]) + col_[k];
        QD_RETURN_IF_ERROR(copy_2d(src, row_, out[k], width_[k], width_[k], rows_, s));
      }
    }
    return Status::ok();
  }

 private:
  bool concat_;
  int64_t rows_, row_;
  std::vector<int64_t> width_, col_;
};

// Rows, row bytes and per-part widths/columns for parts of `whole` split along `axis`.
MadeKernel make_blocks(const NodeArgs& a, bool concat) {
  const std::vector<TensorSpec>& parts = concat ? a.in : a.out;
  const Shape& whole = concat ? a.out[0].shape : a.in[0].shape;
  const DType t = concat ? a.out[0].dtype : a.in[0].dtype;
  if (concat && !a.node.attrs.has("axis")) return invalid("the axis attribute is required");
  const int64_t axis_attr = QD_TRY(a.node.attrs.get_int("axis", 0));
  const int axis = QD_TRY(normalize_axis(axis_attr, whole.size()));
  const int64_t esz = static_cast<int64_t>(dtype_size(t));
  if (volume(whole) == 0) return KernelPtr(new BlocksKernel(concat, 0, 0, {}, {}));
  int64_t rows = 1, inner = esz;
  for (int d = 0; d < axis; ++d) rows *= whole[d];
  for (size_t d = axis + 1; d < whole.size(); ++d) inner *= whole[d];
  std::vector<int64_t> width, col;
  int64_t c = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const bool present = concat ? a.has_in(k) : a.has_out(k);
    if (concat && !present) return no_kernel(a, "an omitted input");
    if (present && parts[k].dtype != t) return no_kernel(a, "parts of different types");
    if (parts[k].shape.size() != whole.size()) return no_kernel(a, "a part without its shape (an omitted output)");
    const int64_t w = parts[k].shape[axis] * inner;
    width.push_back(w);
    col.push_back(c);
    c += w;
  }
  if (c != whole[axis] * inner) return internal("Concat/Split parts do not add up to the whole");
  return KernelPtr(new BlocksKernel(concat, rows, whole[axis] * inner, std::move(width), std::move(col)));
}

}  // namespace

MadeKernel make_concat(const NodeArgs& a) { return make_blocks(a, true); }
MadeKernel make_split(const NodeArgs& a) { return make_blocks(a, false); }

namespace {

// ---- Gather: y[o, k, e] = x[o, idx[k] (negative counts from the end), e], each e a unit of `inner` units ----

template <typename U, typename Idx>
__global__ void gather_kernel(const U* __restrict__ x, const Idx* __restrict__ idx, U* __restrict__ y, int64_t n,
                              int64_t nidx, int64_t dim, int64_t inner) {
  QD_GRID_LOOP(i, n) {
    const int64_t e = i % inner, ok = i / inner;
    const int64_t k = ok % nidx, o = ok / nidx;
    int64_t j = static_cast<int64_t>(idx[k]);
    if (j < 0) j += dim;
    // The reference rejects out-of-range indices; a kernel cannot fail, so it reads zeros instead of out of bounds.
    y[i] = (j >= 0 && j < dim) ? x[(o * dim + j) * inner + e] : U{};
  }
}

template <typename U, typename Idx>
class GatherKernel final : public GenericKernel {
 public:
  GatherKernel(int64_t n, int64_t nidx, int64_t dim, int64_t inner) : n_(n), nidx_(nidx), dim_(dim), inner_(inner) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    gather_kernel<U, Idx><<<grid_1d(n_), kBlock, 0, s>>>(static_cast<const U*>(in[0]), static_cast<const Idx*>(in[1]),
                                                         static_cast<U*>(out[0]), n_, nidx_, dim_, inner_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  int64_t n_, nidx_, dim_, inner_;
};

}  // namespace

MadeKernel make_gather(const NodeArgs& a) {
  const Shape& ds = a.in[0].shape;
  const DType it = a.in[1].dtype;
  if (it != DType::kInt32 && it != DType::kInt64) return no_kernel_dtype(a, it, "indices");
  if (ds.empty()) return no_kernel(a, "scalar data");
  const int axis = QD_TRY(normalize_axis(QD_TRY(a.node.attrs.get_int("axis", 0)), ds.size()));
  const int64_t n = volume(a.out[0].shape);
  int64_t inner_bytes = static_cast<int64_t>(dtype_size(a.in[0].dtype));
  for (size_t d = axis + 1; d < ds.size(); ++d) inner_bytes *= ds[d];
  const int64_t nidx = volume(a.in[1].shape);
  // Copy in the widest unit that divides a gathered row (rows are contiguous in x and y).
  const int64_t unit = (inner_bytes % 16 == 0) ? 16 : (inner_bytes % 8 == 0) ? 8 : (inner_bytes % 4 == 0) ? 4
                       : (inner_bytes % 2 == 0) ? 2 : 1;
  const int64_t inner = inner_bytes / unit;
  const int64_t units = n == 0 ? 0 : n * static_cast<int64_t>(dtype_size(a.in[0].dtype)) / unit;
  KernelPtr k;
  auto make = [&](auto u) {
    using U = decltype(u);
    if (it == DType::kInt32) k.reset(new GatherKernel<U, int32_t>(units, nidx, ds[axis], inner));
    else k.reset(new GatherKernel<U, int64_t>(units, nidx, ds[axis], inner));
  };
  switch (unit) {
    case 16: make(uint4{}); break;
    case 8: make(uint2{}); break;
    case 4: make(uint32_t{}); break;
    case 2: make(uint16_t{}); break;
    default: make(uint8_t{}); break;
  }
  return std::move(k);
}

namespace {

// ---- Tile: y[c_0, ..., c_r] = x[c_0 % d_0, ..., c_r % d_r] ----

struct TileArgs {
  int rank;
  int64_t out_dims[kMaxRank], in_dims[kMaxRank], in_strides[kMaxRank];
};

template <typename U>
__global__ void tile_kernel(const U* __restrict__ x, U* __restrict__ y, TileArgs t, int64_t n) {
  QD_GRID_LOOP(i, n) {
    int64_t rest = i, off = 0;
    for (int d = t.rank - 1; d >= 0; --d) {
      const int64_t c = rest % t.out_dims[d];
      rest /= t.out_dims[d];
      off += (c % t.in_dims[d]) * t.in_strides[d];
    }
    y[i] = x[off];
  }
}

template <typename U>
class TileKernel final : public GenericKernel {
 public:
  TileKernel(const TileArgs& t, int64_t n) : t_(t), n_(n) {}
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    tile_kernel<U><<<grid_1d(n_), kBlock, 0, s>>>(static_cast<const U*>(in[0]), static_cast<U*>(out[0]), t_, n_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  TileArgs t_;
  int64_t n_;
};

}  // namespace

MadeKernel make_tile(const NodeArgs& a) {
  const Shape& in = a.in[0].shape;
  const Shape& out = a.out[0].shape;
  if (in.size() != out.size()) return internal("Tile: output rank differs from the input's");
  if (in.size() > static_cast<size_t>(kMaxRank)) return no_kernel(a, "rank above 8");
  const int64_t n = volume(out);
  TileArgs t{};
  t.rank = static_cast<int>(in.size());
  const std::vector<int64_t> st = strides_of(in);
  for (size_t d = 0; d < in.size(); ++d) {
    t.out_dims[d] = out[d];
    t.in_dims[d] = std::max<int64_t>(in[d], 1);
    t.in_strides[d] = st[d];
  }
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_width(a.in[0].dtype, [&](auto u) {
    k.reset(new TileKernel<decltype(u)>(t, n));
    return Status::ok();
  }));
  return std::move(k);
}

namespace {

// ---- Pad: per axis, a table maps each output coordinate to an input coordinate or -1 (the constant) ----

using PadArgs = AxisMaps;

template <typename U>
class PadKernel final : public GenericKernel {
 public:
  PadKernel(const PadArgs& p, int64_t n, bool value_input, U value)
      : p_(p), n_(n), value_input_(value_input), value_(value) {}
  DeviceBuffer maps;
  Status launch(const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) override {
    if (n_ == 0) return Status::ok();
    const U* vp = value_input_ ? static_cast<const U*>(in[2]) : nullptr;
    axis_map_gather_kernel<U><<<grid_1d(n_), kBlock, 0, s>>>(static_cast<const U*>(in[0]), static_cast<U*>(out[0]),
                                                             p_, maps.get<int64_t>(), vp, value_, n_);
    QD_CUDA_LAUNCHED();
    return Status::ok();
  }

 private:
  PadArgs p_;
  int64_t n_;
  bool value_input_;
  U value_;
};

}  // namespace

MadeKernel make_pad(const NodeArgs& a) {
  const ops::PadGeom g = QD_TRY(ops::pad_geom(a.ctx));
  const Shape& in = a.in[0].shape;
  const Shape& out = a.out[0].shape;
  const DType t = a.in[0].dtype;
  if (out != g.out || a.out[0].dtype != t) return internal("Pad: the output spec differs from the inferred output");
  if (in.size() > static_cast<size_t>(kMaxRank)) return no_kernel(a, "rank above 8");
  const int64_t n = volume(out);
  PadArgs p{};
  p.rank = static_cast<int>(in.size());
  std::vector<int64_t> maps;
  const std::vector<int64_t> st = strides_of(in);
  if (n > 0) {
    for (size_t d = 0; d < in.size(); ++d) {
      p.out_dims[d] = out[d];
      p.in_strides[d] = st[d];
      p.map_at[d] = static_cast<int64_t>(maps.size());
      for (int64_t o = 0; o < out[d]; ++o) maps.push_back(ops::pad_map_coord(o, g.begin[d], in[d], g.mode));
    }
  }
  // The constant: input 2 when given (read on the device), else the attribute (before opset 11), else 0; as one
  // element of the data's type, converted as the reference converts it.
  const bool value_input = a.has_in(2) && volume(a.in[2].shape) > 0;
  if (value_input && a.in[2].dtype != t) return no_kernel(a, "constant_value of another type than the data");
  Tensor value(t, {});
  if (!value_input && a.node.attrs.has("value")) value.set_f64(0, QD_TRY(a.node.attrs.get_float("value")));
  KernelPtr k;
  QD_RETURN_IF_ERROR(dispatch_width(t, [&](auto u) {
    using U = decltype(u);
    U bits;
    std::memcpy(&bits, value.raw(), sizeof(U));
    auto* pk = new PadKernel<U>(p, n, value_input, bits);
    k.reset(pk);
    return pk->maps.upload(maps);
  }));
  return std::move(k);
}

namespace {

// ---- outputs known when the kernel is created: computed by the reference on the host, copied at launch ----

class ConstantKernel final : public GenericKernel {
 public:
  DeviceBuffer data;
  size_t bytes = 0;
  Status launch(const std::vector<const void*>&, const std::vector<void*>& out, cudaStream_t s) override {
    if (bytes) QD_CUDA_TRY(cudaMemcpyAsync(out[0], data.get<void>(), bytes, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }
};

}  // namespace

MadeKernel make_precomputed(const NodeArgs& a) {
  // Shape, Size and EyeLike read only their input's shape; the other ops need constant inputs.
  const OpType op = a.node.op;
  const bool shape_only = op == OpType::Shape || op == OpType::Size || op == OpType::EyeLike;
  std::vector<Tensor> owned(a.in.size());
  std::vector<DType> types;
  std::vector<Shape> shapes;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < a.in.size(); ++i) {
    const Tensor* c = a.constant(i);
    if (!c && a.has_in(i)) {
      if (!shape_only) return no_kernel(a, "input " + std::to_string(i) + " is not a constant");
      DType t = a.in[i].dtype;
      if (!is_float(t) && !is_integer(t) && t != DType::kBool) return no_kernel_dtype(a, t);
      owned[i] = QD_TRY(Tensor::make(t, a.in[i].shape));
      c = &owned[i];
    }
    types.push_back(c ? c->dtype() : DType::kUndefined);
    shapes.push_back(c ? c->shape() : Shape{});
    values.push_back(c);
  }
  InferCtx ctx(a.node, types, shapes, values);
  QD_RETURN_IF_ERROR(infer_node(ctx));
  std::vector<Tensor> outs = QD_TRY(run_node(ctx, values));
  if (outs.empty() || outs[0].shape() != a.out[0].shape) return internal("the output spec differs from the reference");
  Tensor y = outs[0].dtype() == a.out[0].dtype ? outs[0] : outs[0].cast(a.out[0].dtype);
  auto* k = new ConstantKernel();
  KernelPtr owner(k);
  k->bytes = y.nbytes();
  QD_RETURN_IF_ERROR(k->data.upload(y.raw(), y.nbytes()));
  return std::move(owner);
}

}  // namespace qd::cuda
