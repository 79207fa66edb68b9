// Slice (clamping, negative steps), Concat, Split, Pad (reflect beyond the edge, cropping), Expand, Tile: values of
// edge cases and the errors for bad parameters.
#include <limits>

#include "ops/movement_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using mvtest::attrs;
using mvtest::i64v;
using mvtest::iota_f32;
using mvtest::op_error;
using test::run_op;
using test::values;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(SliceTest, ClampingAndNegativeSteps) {
  const Tensor x = iota_f32({5});
  auto slice = [&](int64_t s, int64_t e, int64_t step) {
    auto r = run_op(OpType::Slice, {}, {x, i64v({s}), i64v({e}), i64v({0}), i64v({step})});
    EXPECT_TRUE(r) << r.status().to_string();
    return r ? values((*r)[0]) : std::vector<double>{};
  };
  EXPECT_EQ(slice(-1, kMin, -1), (std::vector<double>{4, 3, 2, 1, 0}));   // reverse the whole axis
  EXPECT_EQ(slice(1, kMax, 2), (std::vector<double>{1, 3}));
  EXPECT_EQ(slice(-100, 100, 1), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(slice(100, -100, -2), (std::vector<double>{4, 2, 0}));
  EXPECT_EQ(slice(3, 1, 1), std::vector<double>{});
  EXPECT_EQ(slice(0, 5, kMax), std::vector<double>{0});                   // a huge step takes one element
  EXPECT_EQ(slice(4, kMin, kMin), std::vector<double>{4});
  // As the spec and ONNX Runtime: with a negative step the start clamps to [0, dim-1].
  EXPECT_EQ(slice(-10, kMin, -1), std::vector<double>{0});
}

TEST(SliceTest, MultiAxisAndOpset9Attributes) {
  const Tensor x = iota_f32({3, 4});
  auto r = run_op(OpType::Slice, {}, {x, i64v({-1, 1}), i64v({0, 3}), i64v({1, 0}), i64v({-1, 1})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{7, 6, 5, 11, 10, 9}));
  auto a = run_op(OpType::Slice,
                  attrs({{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{3}},
                         {"axes", std::vector<int64_t>{1}}}),
                  {x}, 1, 9);
  ASSERT_TRUE(a) << a.status().to_string();
  EXPECT_EQ((*a)[0].shape(), (Shape{3, 2}));
}

TEST(SliceTest, BadParametersAreErrors) {
  const Tensor x = iota_f32({3, 4});
  QD_EXPECT_INVALID(op_error(OpType::Slice, {}, {x, i64v({0}), i64v({1}), i64v({0}), i64v({0})}), "step");
  QD_EXPECT_INVALID(op_error(OpType::Slice, {}, {x, i64v({0, 0}), i64v({1, 1}), i64v({1, -1})}), "listed twice");
  QD_EXPECT_INVALID(op_error(OpType::Slice, {}, {x, i64v({0}), i64v({1}), i64v({2})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Slice, {}, {x, i64v({0, 0}), i64v({1})}), "ends has 1");
}

TEST(ConcatSplitTest, ValuesAndErrors) {
  const Tensor a = iota_f32({2, 1});
  const Tensor b = iota_f32({2, 2});
  auto c = run_op(OpType::Concat, attrs({{"axis", int64_t{-1}}}), {a, b});
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(values((*c)[0]), (std::vector<double>{0, 0, 1, 1, 2, 3}));
  QD_EXPECT_INVALID(op_error(OpType::Concat, attrs({{"axis", int64_t{0}}}), {a, b}), "does not match");
  QD_EXPECT_INVALID(op_error(OpType::Concat, attrs({{"axis", int64_t{2}}}), {a, b}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Concat, attrs({{"axis", int64_t{0}}}), {a, i64v({1})}), "input 1 is int64");
  QD_EXPECT_INVALID(op_error(OpType::Concat, {}, {a, b}), "'axis' is missing");

  auto s = run_op(OpType::Split, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 5}), i64v({2, 3})}, 2);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(values((*s)[0]), (std::vector<double>{0, 1, 5, 6}));
  EXPECT_EQ(values((*s)[1]), (std::vector<double>{2, 3, 4, 7, 8, 9}));
  QD_EXPECT_INVALID(op_error(OpType::Split, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 5}), i64v({2, 2})}, 2),
                    "add up to 4");
  QD_EXPECT_INVALID(op_error(OpType::Split, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 5}), i64v({6, -1})}, 2),
                    "negative");
  QD_EXPECT_INVALID(op_error(OpType::Split, attrs({{"axis", int64_t{1}}}), {iota_f32({2, 5})}, 2), "equal parts");
  QD_EXPECT_INVALID(op_error(OpType::Split, {}, {iota_f32({2, 5}), i64v({1, 1, 0})}, 2), "3 sizes");
}

TEST(PadTest, ModesBeyondTheEdgeAndCropping) {
  const Tensor x = mvtest::f32({3}, {1, 2, 3});
  auto pad = [&](const char* mode, int64_t b, int64_t e) {
    auto r = run_op(OpType::Pad, attrs({{"mode", std::string(mode)}}), {x, i64v({b, e}), mvtest::f32({}, {9})});
    EXPECT_TRUE(r) << r.status().to_string();
    return r ? values((*r)[0]) : std::vector<double>{};
  };
  EXPECT_EQ(pad("constant", 1, 2), (std::vector<double>{9, 1, 2, 3, 9, 9}));
  EXPECT_EQ(pad("edge", 2, 1), (std::vector<double>{1, 1, 1, 2, 3, 3}));
  // Pads wider than the axis reflect again, as numpy.pad does.
  EXPECT_EQ(pad("reflect", 4, 4), (std::vector<double>{1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}));
  EXPECT_EQ(pad("wrap", 2, 1), (std::vector<double>{2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(pad("constant", -1, 1), (std::vector<double>{2, 3, 9}));
  EXPECT_EQ(pad("reflect", -2, 0), (std::vector<double>{3}));
  // Opset 2-10: pads and value are attributes.
  auto old = run_op(OpType::Pad, attrs({{"pads", std::vector<int64_t>{0, 1}}, {"value", 5.f}}), {x}, 1, 10);
  ASSERT_TRUE(old) << old.status().to_string();
  EXPECT_EQ(values((*old)[0]), (std::vector<double>{1, 2, 3, 5}));
}

TEST(PadTest, BadPadsAreErrors) {
  const Tensor x = iota_f32({2, 3});
  QD_EXPECT_INVALID(op_error(OpType::Pad, {}, {x, i64v({1, 1})}), "2 per padded axis");
  QD_EXPECT_INVALID(op_error(OpType::Pad, {}, {x, i64v({0, -2, 0, -2})}), "below zero");
  QD_EXPECT_INVALID(op_error(OpType::Pad, attrs({{"mode", std::string("mirror")}}), {x, i64v({0, 0, 0, 0})}), "mode");
  QD_EXPECT_INVALID(op_error(OpType::Pad, {}, {x, i64v({0, int64_t{1} << 41, 0, 0})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Pad, attrs({{"mode", std::string("edge")}}), {Tensor(DType::kFloat32, {0}), i64v({1, 1})}),
                    "empty axis");
  QD_EXPECT_INVALID(op_error(OpType::Pad, {}, {x, i64v({0, 0, 0, 0}), mvtest::i64s(1)}), "constant_value is int64");
}

TEST(ExpandTileTest, ValuesAndErrors) {
  auto e = run_op(OpType::Expand, {}, {iota_f32({3, 1}), i64v({2, 1, 2})});
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ((*e)[0].shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values((*e)[0]), (std::vector<double>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  QD_EXPECT_INVALID(op_error(OpType::Expand, {}, {iota_f32({3, 2}), i64v({4})}), "cannot expand");
  QD_EXPECT_INVALID(op_error(OpType::Expand, {}, {iota_f32({3, 1}), i64v({-1, 1})}), "negative");

  auto t = run_op(OpType::Tile, {}, {iota_f32({2, 2}), i64v({1, 2})});
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(values((*t)[0]), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
  QD_EXPECT_INVALID(op_error(OpType::Tile, {}, {iota_f32({2, 2}), i64v({1})}), "rank 2");
  QD_EXPECT_INVALID(op_error(OpType::Tile, {}, {iota_f32({2, 2}), i64v({1, -1})}), ">= 0");
  QD_EXPECT_INVALID(op_error(OpType::Tile, {}, {iota_f32({2, 2}), i64v({int64_t{1} << 30, int64_t{1} << 30})}), "2^40");
}

}  // namespace
}  // namespace qd
