// Resize and Upsample: the YOLOv5 nearest x2 upsample (float and int8), bilinear values, and bad parameters.
#include "ops/movement_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using mvtest::attrs;
using mvtest::f32;
using mvtest::i64v;
using mvtest::iota_f32;
using mvtest::op_error;
using test::run_op;
using test::values;

// y[n, c, h, w] == x[n, c, h / 2, w / 2]
void expect_nearest_x2(const Tensor& x, const Tensor& y) {
  const Shape& s = x.shape();
  ASSERT_EQ(y.shape(), (Shape{s[0], s[1], 2 * s[2], 2 * s[3]}));
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < 2 * s[2]; ++h)
        for (int64_t w = 0; w < 2 * s[3]; ++w) {
          const int64_t yi = ((n * s[1] + c) * 2 * s[2] + h) * 2 * s[3] + w;
          const int64_t xi = ((n * s[1] + c) * s[2] + h / 2) * s[3] + w / 2;
          ASSERT_EQ(y.get_f64(yi), x.get_f64(xi)) << "at " << yi;
        }
}

TEST(ResizeTest, NearestTimesTwoWithScalesAsYoloV5Exports) {
  const Tensor x = test::random_f32({1, 3, 5, 7}, 11);
  const Tensor scales = f32({4}, {1, 1, 2, 2});
  // YOLOv5 (opset 11-13): asymmetric + floor; the defaults (half_pixel + round_prefer_floor) agree for x2.
  auto a = run_op(OpType::Resize,
                  attrs({{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                         {"nearest_mode", std::string("floor")}}),
                  {x, Tensor(), scales});
  ASSERT_TRUE(a) << a.status().to_string();
  expect_nearest_x2(x, (*a)[0]);
  auto d = run_op(OpType::Resize, attrs({{"mode", std::string("nearest")}}), {x, Tensor(DType::kFloat32, {0}), scales});
  ASSERT_TRUE(d) << d.status().to_string();
  expect_nearest_x2(x, (*d)[0]);
  // Opset 10 Resize and Upsample 7 / 9.
  auto r10 = run_op(OpType::Resize, {}, {x, scales}, 1, 10);
  ASSERT_TRUE(r10) << r10.status().to_string();
  expect_nearest_x2(x, (*r10)[0]);
  auto u7 = run_op(OpType::Upsample, attrs({{"scales", std::vector<float>{1, 1, 2, 2}}}), {x}, 1, 7);
  ASSERT_TRUE(u7) << u7.status().to_string();
  expect_nearest_x2(x, (*u7)[0]);
  auto u9 = run_op(OpType::Upsample, {}, {x, scales}, 1, 9);
  ASSERT_TRUE(u9) << u9.status().to_string();
  expect_nearest_x2(x, (*u9)[0]);
}

TEST(ResizeTest, NearestRunsOnInt8DirectlyButLinearDoesNot) {
  Tensor x(DType::kInt8, {1, 2, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int8_t>()[i] = static_cast<int8_t>(i * 7 - 60);
  const Tensor scales = f32({4}, {1, 1, 2, 2});
  auto r = run_op(OpType::Resize, attrs({{"mode", std::string("nearest")}}), {x, Tensor(), scales});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].dtype(), DType::kInt8);
  expect_nearest_x2(x, (*r)[0]);
  auto lin = run_op(OpType::Resize, attrs({{"mode", std::string("linear")}}), {x, Tensor(), scales});
  ASSERT_FALSE(lin);
  EXPECT_EQ(lin.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(lin.status().message().find("int8"), std::string::npos);
}

TEST(ResizeTest, BilinearAlignCornersAndHalfPixel) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto ac = run_op(OpType::Resize,
                   attrs({{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}),
                   {x, Tensor(), Tensor(), i64v({1, 1, 3, 3})});
  ASSERT_TRUE(ac) << ac.status().to_string();
  EXPECT_EQ(values((*ac)[0]), (std::vector<double>{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}));
  // half_pixel x2: output pixel 1 samples input coordinate 0.25.
  auto hp = run_op(OpType::Resize, attrs({{"mode", std::string("linear")}}), {x, Tensor(), f32({4}, {1, 1, 2, 2})});
  ASSERT_TRUE(hp) << hp.status().to_string();
  const std::vector<double> v = values((*hp)[0]);
  ASSERT_EQ(v.size(), 16u);
  EXPECT_DOUBLE_EQ(v[0], 1.0);
  EXPECT_DOUBLE_EQ(v[1], 1.25);
  EXPECT_DOUBLE_EQ(v[5], 1.75 - 0.0);  // (0.25, 0.25): 1 + 0.25 * 1 + 0.25 * 2
  EXPECT_DOUBLE_EQ(v[15], 4.0);
}

TEST(ResizeTest, TransposedAspectDoesNotBuildAHugeIntermediate) {
  // [4096, 1] -> [1, 4096]: shrinking first keeps the intermediate at 4096 elements, not 4096^2.
  auto r = run_op(OpType::Resize, attrs({{"mode", std::string("linear")}}),
                  {iota_f32({4096, 1}), Tensor(), Tensor(), i64v({1, 4096})});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{1, 4096}));
  EXPECT_EQ(values((*r)[0]), std::vector<double>(4096, 2047.5));
}

TEST(ResizeTest, BadParametersAreErrors) {
  const Tensor x = iota_f32({1, 1, 2, 2});
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), f32({4}, {1, 1, 2, 2}), i64v({1, 1, 4, 4})}),
                    "exactly one of scales and sizes");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x}), "exactly one of scales and sizes");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), f32({2}, {2, 2})}), "has rank 4");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), f32({4}, {1, 1, -2, 2})}), "positive");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), f32({4}, {1, 1, 1e30f, 1e30f})}), "too large");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), Tensor(), i64v({1, 1, -4, 4})}), "negative");
  QD_EXPECT_INVALID(op_error(OpType::Resize, {}, {x, Tensor(), Tensor(), i64v({1, 1 << 20, 1 << 20, 1 << 20})}), "2^40");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"mode", std::string("area")}}), {x, Tensor(), f32({4}, {1, 1, 2, 2})}),
                    "mode must be");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"nearest_mode", std::string("up")}}), {x, Tensor(), f32({4}, {1, 1, 2, 2})}),
                    "nearest_mode");
  // Opset 18's attributes: checked, not ignored.
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"antialias", int64_t{2}}}), {x, Tensor(), f32({4}, {1, 1, 2, 2})}),
                    "antialias must be 0 or 1");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"axes", std::vector<int64_t>{2, 5}}}), {x, Tensor(), f32({2}, {2, 2})}),
                    "out of range");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"axes", std::vector<int64_t>{2, -2}}}), {x, Tensor(), f32({2}, {2, 2})}),
                    "twice");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"axes", std::vector<int64_t>{2, 3}}}), {x, Tensor(), f32({4}, {1, 1, 2, 2})}),
                    "axes lists 2");
  QD_EXPECT_INVALID(op_error(OpType::Resize, attrs({{"keep_aspect_ratio_policy", std::string("fill")}}),
                             {x, Tensor(), Tensor(), i64v({1, 1, 4, 4})}),
                    "keep_aspect_ratio_policy must be");
}

}  // namespace
}  // namespace qd
