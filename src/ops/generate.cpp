// Ops that create tensors from a few numbers: ConstantOfShape, Range, EyeLike, OneHot. Output sizes come from the
// model, so they are bounded (kMaxElements) before anything is allocated.
#include <cmath>

#include "ops/movement.h"

namespace qd::ops {

namespace {

// One element of type t holding v (e.g. the 1 of EyeLike in any dtype), to copy by width.
Tensor element_of(DType t, double v) {
  Tensor e(t, {});
  e.set_f64(0, v);
  return e;
}

// Fills y with copies of the single element in `e` (same dtype).
Status fill(Tensor& y, const Tensor& e) {
  return dispatch_width(y.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U v = *e.data<U>();
    U* p = y.data<U>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = v;
    return Status::ok();
  });
}

Expected<Tensor> constant_of_shape_value(const Node& n) {
  if (!n.attrs.has("value")) return element_of(DType::kFloat32, 0.0);
  Tensor v = QD_TRY(n.attrs.get_tensor("value"));
  if (v.numel() != 1) return invalid("value must hold exactly one element, got shape " + shape_str(v.shape()));
  if (dtype_size(v.dtype()) == 0) return unsupported(std::string("value of type ") + dtype_name(v.dtype()));
  return v;
}

// Range's element count, computed in the inputs' type as the spec says: max(ceil((limit - start) / delta), 0).
Expected<int64_t> range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  const DType t = start.dtype();
  if (limit.dtype() != t || delta.dtype() != t) return invalid("start, limit and delta must have one type");
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) {
    return invalid("start, limit and delta must be scalars");
  }
  double n;
  if (t == DType::kFloat32) {
    const float s = start.data<float>()[0], l = limit.data<float>()[0], d = delta.data<float>()[0];
    if (d == 0.f) return invalid("delta is 0");
    n = std::ceil(static_cast<double>((l - s) / d));
  } else if (t == DType::kFloat64) {
    const double s = start.data<double>()[0], l = limit.data<double>()[0], d = delta.data<double>()[0];
    if (d == 0.0) return invalid("delta is 0");
    n = std::ceil((l - s) / d);
  } else if (t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64) {
    const __int128 s = start.get_i64(0), l = limit.get_i64(0), d = delta.get_i64(0);
    if (d == 0) return invalid("delta is 0");
    const __int128 diff = l - s;
    __int128 k = 0;
    if (d > 0 && diff > 0) k = (diff + d - 1) / d;
    if (d < 0 && diff < 0) k = (-diff + (-d) - 1) / (-d);
    if (k > kMaxElements) return invalid("Range would produce more than 2^40 elements");
    return static_cast<int64_t>(k);
  } else {
    return invalid(std::string("Range takes float32, float64, int16, int32 or int64, got ") + dtype_name(t));
  }
  if (std::isnan(n)) return invalid("start, limit and delta give no finite element count");
  if (n <= 0) return int64_t{0};
  if (!(n <= static_cast<double>(kMaxElements))) return invalid("Range would produce more than 2^40 elements");
  return static_cast<int64_t>(n);
}

struct OneHotGeom {
  int axis;
  int64_t depth;
};

Expected<OneHotGeom> one_hot_geom(const InferCtx& c) {
  const Tensor* d = c.value(1);
  if (!d) return unsupported("OneHot's depth must be a constant (the output shape depends on it)");
  if (d->numel() != 1) return invalid("depth must have one element, got shape " + shape_str(d->shape()));
  if (dtype_size(d->dtype()) == 0 || d->dtype() == DType::kBool) return invalid("depth must be a number");
  const double dv = d->get_f64(0);
  if (!(dv >= 0 && dv <= static_cast<double>(kMaxElements))) {
    return invalid("depth must be in [0, 2^40], got " + std::to_string(dv));
  }
  const int64_t r = static_cast<int64_t>(c.rank(0));
  const int64_t axis = QD_TRY(c.node.attrs.get_int("axis", -1));
  const int ax = QD_TRY(normalize_axis(axis, r + 1));
  return OneHotGeom{ax, static_cast<int64_t>(dv)};
}

}  // namespace

Status infer_ConstantOfShape(InferCtx& c) {
  if (c.rank(0) != 1) return invalid("the shape input must be 1-D, got shape " + shape_str(c.shape(0)));
  const std::vector<int64_t> dims = QD_TRY(c.const_ints(0));
  for (int64_t d : dims) {
    if (d < 0) return invalid("the shape has a negative dim " + std::to_string(d));
  }
  QD_RETURN_IF_ERROR(checked_numel(dims).status());
  const Tensor v = QD_TRY(constant_of_shape_value(c.node));
  c.set_output(0, v.dtype(), dims);
  return Status::ok();
}
Status run_ConstantOfShape(KernelCtx& c) {
  const Tensor v = QD_TRY(constant_of_shape_value(c.node));
  return fill(*c.out[0], v);
}

Status infer_Range(InferCtx& c) {
  for (size_t i = 0; i < 3; ++i) {
    if (!c.value(i)) return unsupported("Range's start, limit and delta must be constants (they set the output size)");
  }
  const int64_t n = QD_TRY(range_count(*c.value(0), *c.value(1), *c.value(2)));
  c.set_output(0, c.dtype(0), {n});
  return Status::ok();
}
Status run_Range(KernelCtx& c) {
  const int64_t n = QD_TRY(range_count(*c.in[0], *c.in[1], *c.in[2]));
  Tensor& y = *c.out[0];
  if (y.numel() != n) return internal("Range output size changed since inference");
  switch (y.dtype()) {
    case DType::kFloat32: {
      const float s = c.in[0]->data<float>()[0], d = c.in[2]->data<float>()[0];
      for (int64_t i = 0; i < n; ++i) y.data<float>()[i] = s + static_cast<float>(i) * d;
      break;
    }
    case DType::kFloat64: {
      const double s = c.in[0]->data<double>()[0], d = c.in[2]->data<double>()[0];
      for (int64_t i = 0; i < n; ++i) y.data<double>()[i] = s + static_cast<double>(i) * d;
      break;
    }
    default: {
      const int64_t s = c.in[0]->get_i64(0), d = c.in[2]->get_i64(0);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d));
        if (y.dtype() == DType::kInt64) y.data<int64_t>()[i] = v;
        else if (y.dtype() == DType::kInt32) y.data<int32_t>()[i] = static_cast<int32_t>(v);
        else y.data<int16_t>()[i] = static_cast<int16_t>(v);
      }
    }
  }
  return Status::ok();
}

Status infer_EyeLike(InferCtx& c) {
  if (c.rank(0) != 2) return invalid("EyeLike takes a 2-D input, got shape " + shape_str(c.shape(0)));
  DType t = c.dtype(0);
  if (c.node.attrs.has("dtype")) {
    const int64_t code = QD_TRY(c.node.attrs.get_int("dtype"));
    if (code < 0 || code > INT32_MAX || !dtype_from_onnx(static_cast<int32_t>(code), &t)) {
      return unsupported("EyeLike with ONNX element type " + std::to_string(code));
    }
  }
  QD_RETURN_IF_ERROR(c.node.attrs.get_int("k", 0).status());
  c.set_output(0, t, c.shape(0));
  return Status::ok();
}
Status run_EyeLike(KernelCtx& c) {
  const int64_t k = QD_TRY(c.node.attrs.get_int("k", 0));
  Tensor& y = *c.out[0];
  QD_RETURN_IF_ERROR(fill(y, element_of(y.dtype(), 0.0)));
  const Tensor one = element_of(y.dtype(), 1.0);
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  const size_t esz = dtype_size(y.dtype());
  auto* p = static_cast<std::byte*>(y.raw());
  for (int64_t i = 0; i < rows; ++i) {
    if (k > cols || k < -rows) break;  // the diagonal misses the matrix (and i + k cannot overflow below)
    const int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(p + (i * cols + j) * esz, one.raw(), esz);
  }
  return Status::ok();
}

Status infer_OneHot(InferCtx& c) {
  if (c.rank(2) != 1 || c.shape(2)[0] != 2) {
    return invalid("values must be a 1-D tensor [off_value, on_value], got shape " + shape_str(c.shape(2)));
  }
  if (dtype_size(c.dtype(0)) == 0 || c.dtype(0) == DType::kBool) return invalid("indices must be numeric");
  const OneHotGeom g = QD_TRY(one_hot_geom(c));
  Shape out = c.shape(0);
  out.insert(out.begin() + g.axis, g.depth);
  QD_RETURN_IF_ERROR(checked_numel(out).status());
  c.set_output(0, c.dtype(2), std::move(out));
  return Status::ok();
}
Status run_OneHot(KernelCtx& c) {
  const InferCtx ic = infer_ctx_of(c);
  const OneHotGeom g = QD_TRY(one_hot_geom(ic));
  const Tensor& idx = *c.in[0];
  const Shape& is = idx.shape();
  const int64_t inner = dim_product(is, g.axis, is.size());
  const int64_t depth = g.depth;
  return dispatch_width(c.out[0]->dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U off = c.in[2]->data<U>()[0], on = c.in[2]->data<U>()[1];
    U* y = c.out[0]->data<U>();
    for (int64_t i = 0; i < c.out[0]->numel(); ++i) y[i] = off;
    for (int64_t p = 0; p < idx.numel(); ++p) {
      int64_t v = idx.get_i64(p);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;  // out of range: the whole row stays off_value, as the spec says
      const int64_t o = p / inner, i = p % inner;
      y[(o * depth + v) * inner + i] = on;
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
