// Helpers for the tensor and data-movement op tests (reshape_test, gather_scatter_test, slice_pad_test, resize_test,
// generate_cast_test): build small tensors and check error statuses. Running one op reuses run_op from
// nn_test_util.h.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/nn_test_util.h"

namespace qd::mvtest {

using test::run_op;
using test::values;

inline Tensor i64(const Shape& s, const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, s);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}
inline Tensor i64v(const std::vector<int64_t>& v) { return Tensor::from_i64(v); }
inline Tensor i64s(int64_t v) { return Tensor::scalar_i64(v); }
inline Tensor f32(const Shape& s, const std::vector<float>& v) { return Tensor::from_f32(s, v); }
// 0, 1, 2, ... as float32.
inline Tensor iota_f32(const Shape& s) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

inline AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

// The error of running an op that must fail: its code and message (for EXPECT_* on both).
inline Status op_error(OpType op, const AttrMap& a, const std::vector<Tensor>& inputs, int num_outputs = 1,
                       int opset = 17) {
  auto r = run_op(op, a, inputs, num_outputs, opset);
  if (r) return internal("expected an error, but the op succeeded");
  return r.status();
}

}  // namespace qd::mvtest

// The op fails with an invalid-argument status whose message contains `text`.
#define QD_EXPECT_INVALID(status_expr, text)                                 \
  do {                                                                       \
    const ::qd::Status qd_s = (status_expr);                                 \
    EXPECT_EQ(qd_s.code(), ::qd::StatusCode::kInvalidArgument) << qd_s.to_string(); \
    EXPECT_NE(qd_s.message().find(text), std::string::npos) << qd_s.to_string();    \
  } while (0)
