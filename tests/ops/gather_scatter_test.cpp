// Gather, GatherElements, GatherND, ScatterElements, ScatterND: negative indices, and out-of-range indices from a
// model or its inputs must be errors, never reads or writes out of bounds.
#include "ops/movement_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using mvtest::attrs;
using mvtest::i64;
using mvtest::i64v;
using mvtest::iota_f32;
using mvtest::op_error;
using test::run_op;
using test::values;

TEST(GatherTest, NegativeIndicesAndAxis) {
  const Tensor x = iota_f32({3, 4});
  auto r = run_op(OpType::Gather, attrs({{"axis", int64_t{1}}}), {x, i64({2, 2}, {-1, 0, 1, -4})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{3, 0, 1, 0, 7, 4, 5, 4, 11, 8, 9, 8}));
  // A scalar index drops the axis (the Shape -> Gather -> Concat pattern of exported models).
  auto s = run_op(OpType::Gather, {}, {i64v({1, 3, 640, 640}), Tensor::scalar_i64(2)});
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)[0].shape(), Shape{});
  EXPECT_EQ((*s)[0].get_i64(0), 640);
}

TEST(GatherTest, OutOfRangeIndexIsAnError) {
  const Tensor x = iota_f32({3, 4});
  QD_EXPECT_INVALID(op_error(OpType::Gather, {}, {x, i64v({0, 3})}), "index 3 (element 1) is out of range");
  QD_EXPECT_INVALID(op_error(OpType::Gather, {}, {x, i64v({-4})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Gather, attrs({{"axis", int64_t{2}}}), {x, i64v({0})}), "axis 2 is out of range");
  QD_EXPECT_INVALID(op_error(OpType::Gather, {}, {x, iota_f32({1})}), "int32 or int64");
  Tensor i32(DType::kInt32, {1});
  i32.data<int32_t>()[0] = 1 << 30;
  QD_EXPECT_INVALID(op_error(OpType::Gather, {}, {x, i32}), "out of range");
}

TEST(GatherElementsTest, ValuesAndErrors) {
  const Tensor x = iota_f32({2, 3});
  auto r = run_op(OpType::GatherElements, attrs({{"axis", int64_t{1}}}), {x, i64({2, 2}, {2, -3, 1, 1})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{2, 0, 4, 4}));
  QD_EXPECT_INVALID(op_error(OpType::GatherElements, attrs({{"axis", int64_t{1}}}), {x, i64({2, 1}, {0, 3})}),
                    "out of range");
  QD_EXPECT_INVALID(op_error(OpType::GatherElements, attrs({{"axis", int64_t{1}}}), {x, i64({3, 1}, {0, 0, 0})}),
                    "exceeds the data shape");
  QD_EXPECT_INVALID(op_error(OpType::GatherElements, {}, {x, i64v({0})}), "rank");
}

TEST(GatherNDTest, BatchDimsAndErrors) {
  const Tensor x = iota_f32({2, 2, 3});
  auto r = run_op(OpType::GatherND, attrs({{"batch_dims", int64_t{1}}}), {x, i64({2, 1}, {1, 0})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{3, 4, 5, 6, 7, 8}));
  QD_EXPECT_INVALID(op_error(OpType::GatherND, {}, {x, i64({1, 2}, {0, 2})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::GatherND, {}, {x, i64({1, 4}, {0, 0, 0, 0})}), "last dim of indices");
  QD_EXPECT_INVALID(op_error(OpType::GatherND, attrs({{"batch_dims", int64_t{1}}}), {x, i64({3, 1}, {0, 0, 0})}),
                    "batch dim 0 differs");
  QD_EXPECT_INVALID(op_error(OpType::GatherND, attrs({{"batch_dims", int64_t{5}}}), {x, i64({2, 1}, {0, 0})}),
                    "batch_dims");
}

TEST(ScatterTest, ElementsWithReductionAndErrors) {
  const Tensor data = iota_f32({1, 5});
  const Tensor upd = mvtest::f32({1, 3}, {10, 20, 30});
  auto r = run_op(OpType::ScatterElements, attrs({{"axis", int64_t{1}}, {"reduction", std::string("add")}}),
                  {data, i64({1, 3}, {1, -4, 4}), upd});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{0, 31, 2, 3, 34}));
  QD_EXPECT_INVALID(op_error(OpType::ScatterElements, attrs({{"axis", int64_t{1}}}), {data, i64({1, 3}, {1, 5, 0}), upd}),
                    "out of range");
  QD_EXPECT_INVALID(op_error(OpType::ScatterElements, attrs({{"axis", int64_t{1}}}), {data, i64({1, 2}, {1, 2}), upd}),
                    "updates shape");
  QD_EXPECT_INVALID(op_error(OpType::ScatterElements, attrs({{"reduction", std::string("avg")}}), {data, i64({1, 3}, {0, 0, 0}), upd}),
                    "reduction");
}

TEST(ScatterTest, NDValuesAndErrors) {
  const Tensor data = iota_f32({4, 2});
  auto r = run_op(OpType::ScatterND, {}, {data, i64({2, 1}, {-1, 0}), mvtest::f32({2, 2}, {9, 9, 8, 8})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{8, 8, 2, 3, 4, 5, 9, 9}));
  QD_EXPECT_INVALID(op_error(OpType::ScatterND, {}, {data, i64({1, 1}, {4}), mvtest::f32({1, 2}, {0, 0})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::ScatterND, {}, {data, i64({1, 1}, {0}), mvtest::f32({1, 3}, {0, 0, 0})}),
                    "updates shape");
}

}  // namespace
}  // namespace qd
