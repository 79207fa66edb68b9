// Shape and Size: the shape (optionally sliced by start/end, opset 15) or element count of the input as int64.
#include "ops/common.h"

namespace qd::ops {

namespace {
Expected<std::pair<int64_t, int64_t>> shape_range(const Node& n, int64_t rank) {
  int64_t start = QD_TRY(n.attrs.get_int("start", 0));
  int64_t end = QD_TRY(n.attrs.get_int("end", rank));
  auto clampi = [&](int64_t v) { return std::max<int64_t>(0, std::min<int64_t>(rank, v < 0 ? v + rank : v)); };
  start = clampi(start);
  end = clampi(end);
  return std::make_pair(start, std::max(start, end));
}
}  // namespace

Status infer_Shape(InferCtx& c) {
  auto [start, end] = QD_TRY(shape_range(c.node, static_cast<int64_t>(c.rank(0))));
  c.set_output(0, DType::kInt64, {end - start});
  return Status::ok();
}
Status run_Shape(KernelCtx& c) {
  auto [start, end] = QD_TRY(shape_range(c.node, static_cast<int64_t>(c.in[0]->rank())));
  for (int64_t i = start; i < end; ++i) c.out[0]->data<int64_t>()[i - start] = c.in[0]->shape()[i];
  return Status::ok();
}

Status infer_Size(InferCtx& c) {
  c.set_output(0, DType::kInt64, {});
  return Status::ok();
}
Status run_Size(KernelCtx& c) {
  *c.out[0]->data<int64_t>() = numel(c.in[0]->shape());
  return Status::ok();
}

}  // namespace qd::ops
