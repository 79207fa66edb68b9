// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, DepthToSpace, SpaceToDepth: the YOLOv5 head pattern and the
// errors a bad model must produce.
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

TEST(ReshapeTest, YoloV5HeadReshapeThenPermute) {
  // [1, 255, 80, 80] -> [1, 3, 85, 80, 80] -> Transpose(0, 1, 3, 4, 2) -> [1, 3, 80, 80, 85].
  const Tensor x = test::random_f32({1, 255, 80, 80}, 7);
  auto r = run_op(OpType::Reshape, {}, {x, i64v({1, 3, 85, 80, 80})});
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ((*r)[0].shape(), (Shape{1, 3, 85, 80, 80}));
  auto t = run_op(OpType::Transpose, attrs({{"perm", std::vector<int64_t>{0, 1, 3, 4, 2}}}), {(*r)[0]});
  ASSERT_TRUE(t) << t.status().to_string();
  const Tensor& y = (*t)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 3, 80, 80, 85}));
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t h : {0, 1, 41, 79}) {
      for (int64_t w : {0, 7, 79}) {
        for (int64_t c = 0; c < 85; ++c) {
          ASSERT_EQ(py[((a * 80 + h) * 80 + w) * 85 + c], px[((a * 85 + c) * 80 + h) * 80 + w]);
        }
      }
    }
  }
}

TEST(ReshapeTest, ZeroCopiesAndMinusOneInfers) {
  const Tensor x = iota_f32({2, 3, 4});
  auto r = run_op(OpType::Reshape, {}, {x, i64v({0, -1})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(test::max_abs_diff((*r)[0].reshaped(x.shape()), x), 0.0);
  // allowzero=1: a 0 is a real 0-sized dim.
  auto z = run_op(OpType::Reshape, attrs({{"allowzero", int64_t{1}}}), {Tensor(DType::kFloat32, {0, 3}), i64v({3, 0})});
  ASSERT_TRUE(z) << z.status().to_string();
  EXPECT_EQ((*z)[0].shape(), (Shape{3, 0}));
}

TEST(ReshapeTest, ElementCountMismatchIsAnError) {
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({2, 3}), i64v({4, 2})}), "cannot reshape 2x3 (6 elements)");
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({2, 3}), i64v({-1, -1})}), "more than one -1");
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({2, 3}), i64v({-2, 3})}), "dims must be >= 0");
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({2, 3}), i64v({4, -1})}), "cannot infer the -1");
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({6}), i64v({0, 0})}), "has only 1 dims");
  QD_EXPECT_INVALID(op_error(OpType::Reshape, attrs({{"allowzero", int64_t{1}}}), {Tensor(DType::kFloat32, {0}), i64v({0, -1})}),
                    "cannot hold both 0 and -1");
  // Products that overflow int64 are caught before they wrap.
  const int64_t big = int64_t{1} << 40;
  QD_EXPECT_INVALID(op_error(OpType::Reshape, {}, {iota_f32({6}), i64v({big, big, big})}), "2^40");
}

TEST(ReshapeTest, RuntimeShapeInputIsUnsupportedNotACrash) {
  Node n;
  n.name = "r";
  n.op = OpType::Reshape;
  n.opset = 17;
  n.inputs = {0, 1};
  n.outputs = {2};
  InferCtx ctx(n, {DType::kFloat32, DType::kInt64}, {{2, 3}, {2}}, {nullptr, nullptr});
  const Status s = infer_node(ctx);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.to_string().find("constant"), std::string::npos) << s.to_string();
}

TEST(ReshapeTest, FlattenSqueezeUnsqueeze) {
  const Tensor x = iota_f32({2, 1, 3, 1});
  auto f = run_op(OpType::Flatten, attrs({{"axis", int64_t{-2}}}), {x});
  ASSERT_TRUE(f);
  EXPECT_EQ((*f)[0].shape(), (Shape{2, 3}));
  auto f0 = run_op(OpType::Flatten, attrs({{"axis", int64_t{0}}}), {x});
  ASSERT_TRUE(f0);
  EXPECT_EQ((*f0)[0].shape(), (Shape{1, 6}));
  QD_EXPECT_INVALID(op_error(OpType::Flatten, attrs({{"axis", int64_t{5}}}), {x}), "out of range");

  auto s_all = run_op(OpType::Squeeze, {}, {x});
  ASSERT_TRUE(s_all);
  EXPECT_EQ((*s_all)[0].shape(), (Shape{2, 3}));
  auto s1 = run_op(OpType::Squeeze, {}, {x, i64v({-1})});
  ASSERT_TRUE(s1);
  EXPECT_EQ((*s1)[0].shape(), (Shape{2, 1, 3}));
  QD_EXPECT_INVALID(op_error(OpType::Squeeze, {}, {x, i64v({0})}), "its size is 2, not 1");
  QD_EXPECT_INVALID(op_error(OpType::Squeeze, {}, {x, i64v({4})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Squeeze, {}, {x, i64v({1, -3})}), "listed twice");
  // Opset 11 takes axes as an attribute.
  auto s11 = run_op(OpType::Squeeze, attrs({{"axes", std::vector<int64_t>{1}}}), {x}, 1, 11);
  ASSERT_TRUE(s11) << s11.status().to_string();
  EXPECT_EQ((*s11)[0].shape(), (Shape{2, 3, 1}));

  auto u = run_op(OpType::Unsqueeze, {}, {iota_f32({2, 3}), i64v({-1, 0})});
  ASSERT_TRUE(u);
  EXPECT_EQ((*u)[0].shape(), (Shape{1, 2, 3, 1}));
  auto u11 = run_op(OpType::Unsqueeze, attrs({{"axes", std::vector<int64_t>{1}}}), {iota_f32({2, 3})}, 1, 11);
  ASSERT_TRUE(u11) << u11.status().to_string();
  EXPECT_EQ((*u11)[0].shape(), (Shape{2, 1, 3}));
  QD_EXPECT_INVALID(op_error(OpType::Unsqueeze, {}, {iota_f32({2, 3}), i64v({1, 1})}), "listed twice");
  QD_EXPECT_INVALID(op_error(OpType::Unsqueeze, {}, {iota_f32({2, 3}), i64v({3})}), "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Unsqueeze, {}, {iota_f32({2, 3})}), "axes input");
}

TEST(TransposeTest, DefaultReversesAndBadPermIsAnError) {
  const Tensor x = iota_f32({2, 3, 4});
  auto t = run_op(OpType::Transpose, {}, {x});
  ASSERT_TRUE(t);
  const Tensor& y = (*t)[0];
  ASSERT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(y.data<float>()[(3 * 3 + 1) * 2 + 1], x.data<float>()[(1 * 3 + 1) * 4 + 3]);
  QD_EXPECT_INVALID(op_error(OpType::Transpose, attrs({{"perm", std::vector<int64_t>{0, 0, 1}}}), {x}),
                    "permutation");
  QD_EXPECT_INVALID(op_error(OpType::Transpose, attrs({{"perm", std::vector<int64_t>{0, 1, 3}}}), {x}),
                    "permutation");
  QD_EXPECT_INVALID(op_error(OpType::Transpose, attrs({{"perm", std::vector<int64_t>{1, 0}}}), {x}), "rank 3");
}

TEST(TransposeTest, Int8AndBoolMoveAsBytes) {
  Tensor x(DType::kInt8, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<int8_t>()[i] = static_cast<int8_t>(i - 3);
  auto t = run_op(OpType::Transpose, {}, {x});
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)[0].dtype(), DType::kInt8);
  EXPECT_EQ((*t)[0].data<int8_t>()[1], x.data<int8_t>()[3]);
}

TEST(DepthToSpaceTest, InvertsSpaceToDepthAndChecksShapes) {
  const Tensor x = iota_f32({1, 2, 4, 6});
  auto s = run_op(OpType::SpaceToDepth, attrs({{"blocksize", int64_t{2}}}), {x});
  ASSERT_TRUE(s) << s.status().to_string();
  ASSERT_EQ((*s)[0].shape(), (Shape{1, 8, 2, 3}));
  auto d = run_op(OpType::DepthToSpace, attrs({{"blocksize", int64_t{2}}, {"mode", std::string("DCR")}}), {(*s)[0]});
  ASSERT_TRUE(d) << d.status().to_string();
  EXPECT_EQ(test::max_abs_diff((*d)[0], x), 0.0);
  QD_EXPECT_INVALID(op_error(OpType::DepthToSpace, attrs({{"blocksize", int64_t{2}}}), {iota_f32({1, 3, 2, 2})}),
                    "not a multiple of blocksize^2");
  QD_EXPECT_INVALID(op_error(OpType::SpaceToDepth, attrs({{"blocksize", int64_t{3}}}), {x}), "not multiples");
  QD_EXPECT_INVALID(op_error(OpType::SpaceToDepth, attrs({{"blocksize", int64_t{0}}}), {x}), "positive");
  QD_EXPECT_INVALID(op_error(OpType::DepthToSpace, attrs({{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}}),
                             {iota_f32({1, 4, 1, 1})}),
                    "DCR or CRD");
}

}  // namespace
}  // namespace qd
