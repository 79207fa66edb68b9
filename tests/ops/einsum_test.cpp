// Einsum: implicit output order, ellipsis broadcasting, diagonals, and errors for malformed equations.
#include <gtest/gtest.h>

#include "nn_test_util.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::values;

AttrMap eq(const std::string& e) {
  AttrMap a;
  a.set("equation", e);
  return a;
}

TEST(Einsum, ImplicitOutputIsSortedWithUppercaseFirst) {
  // "ba" implicit output is "ab" (a transpose); "bA" is "Ab".
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = run_op(OpType::Einsum, eq("ba"), {x});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  y = run_op(OpType::Einsum, eq("bA"), {x});
  ASSERT_TRUE(y);
  EXPECT_EQ((*y)[0].shape(), (Shape{3, 2}));
}

TEST(Einsum, MatmulWithBroadcastEllipsisAndTrace) {
  const Tensor a = tensor_f32({2, 1, 2}, {1, 2, 3, 4});
  const Tensor b = tensor_f32({2, 1}, {10, 100});
  auto y = run_op(OpType::Einsum, eq("...ij,jk->...ik"), {a, b});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 1, 1}));
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{210, 430}));
  auto t = run_op(OpType::Einsum, eq("ii->"), {tensor_f32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(t);
  EXPECT_EQ(values((*t)[0]), (std::vector<double>{5}));
}

TEST(EinsumErrors, Malformed) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  for (const char* e : {"ij,jk->ik", "ijk->i", "i1->i", "ij->k", "ij->ii", "..i->i", "ij"}) {
    auto r = run_op(OpType::Einsum, eq(e), {x});
    if (std::string(e) == "ij") {
      EXPECT_TRUE(r.has_value());
      continue;
    }
    ASSERT_FALSE(r.has_value()) << e;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << e << ": " << r.status().to_string();
  }
  EXPECT_FALSE(run_op(OpType::Einsum, {}, {x}).has_value());  // no equation
  // Label sizes that disagree.
  auto r = run_op(OpType::Einsum, eq("ij,ij->"), {x, tensor_f32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace qd
