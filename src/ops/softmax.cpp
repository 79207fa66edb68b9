// Softmax, LogSoftmax and Hardmax. Before opset 13 they flatten the input to 2-D at `axis` (default 1) and work along
// the second dim; from opset 13 on they work along `axis` (default -1) alone.
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/op_geometry.h"
#include "ops/nn_util.h"

namespace qd::ops {

Expected<SoftmaxGeom> softmax_geom(const Node& n, const Shape& x) {
  const bool coerce_2d = n.opset < 13;
  const int64_t axis_attr = QD_TRY(n.attrs.get_int("axis", coerce_2d ? 1 : -1));
  if (x.empty()) return invalid(std::string(op_name(n.op)) + " needs an input of rank >= 1, got a scalar");
  const int axis = QD_TRY(normalize_axis(axis_attr, x.size()));
  SoftmaxGeom g;
  if (has_zero_dim(x)) return SoftmaxGeom{0, 0, 0};
  for (size_t d = 0; d < x.size(); ++d) {
    const int di = static_cast<int>(d);
    if (di < axis) g.outer *= x[d];
    else if (di == axis || coerce_2d) g.len *= x[d];
    else g.inner *= x[d];
  }
  return g;
}

namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// Computes one [len] row (elements at x[i * stride]) in double; subtracting the maximum first keeps exp() finite.
template <typename T>
void row(Kind kind, const T* x, T* y, int64_t len, int64_t stride, std::vector<double>& tmp) {
  double mx = -std::numeric_limits<double>::infinity();
  int64_t arg = 0;
  for (int64_t i = 0; i < len; ++i) {
    const double v = x[i * stride];
    if (v > mx) {
      mx = v;
      arg = i;
    }
  }
  if (kind == Kind::kHardmax) {
    for (int64_t i = 0; i < len; ++i) y[i * stride] = static_cast<T>(i == arg ? 1 : 0);  // first maximum wins
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < len; ++i) {
    tmp[i] = std::exp(static_cast<double>(x[i * stride]) - mx);
    sum += tmp[i];
  }
  if (kind == Kind::kSoftmax) {
    for (int64_t i = 0; i < len; ++i) y[i * stride] = static_cast<T>(tmp[i] / sum);
  } else {
    const double lse = std::log(sum);
    for (int64_t i = 0; i < len; ++i) y[i * stride] = static_cast<T>(static_cast<double>(x[i * stride]) - mx - lse);
  }
}

Status infer_softmax_like(InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  QD_RETURN_IF_ERROR(softmax_geom(c.node, c.shape(0)).status());
  return infer_same_as_input(c);
}

Status run_softmax_like(KernelCtx& c, Kind kind) {
  const SoftmaxGeom g = QD_TRY(softmax_geom(c.node, c.in[0]->shape()));
  if (c.in[0]->numel() == 0) return Status::ok();  // (an empty tensor may still have one huge dim)
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    std::vector<double> tmp(static_cast<size_t>(g.len));
    for (int64_t o = 0; o < g.outer; ++o) {
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t off = o * g.len * g.inner + i;
        row(kind, x + off, y + off, g.len, g.inner, tmp);
      }
    }
    return Status::ok();
  });
}

}  // namespace

Status infer_Softmax(InferCtx& c) { return infer_softmax_like(c); }
Status run_Softmax(KernelCtx& c) { return run_softmax_like(c, Kind::kSoftmax); }
Status infer_LogSoftmax(InferCtx& c) { return infer_softmax_like(c); }
Status run_LogSoftmax(KernelCtx& c) { return run_softmax_like(c, Kind::kLogSoftmax); }
Status infer_Hardmax(InferCtx& c) { return infer_softmax_like(c); }
Status run_Hardmax(KernelCtx& c) { return run_softmax_like(c, Kind::kHardmax); }

}  // namespace qd::ops
