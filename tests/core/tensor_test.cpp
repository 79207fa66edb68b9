#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace qd {

TEST(Shape, ParseAndPrint) {
  auto s = parse_shape("1x3x640x640");
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, (Shape{1, 3, 640, 640}));
  EXPECT_EQ(shape_str(*s), "1x3x640x640");
  EXPECT_EQ(*parse_shape("2,4"), (Shape{2, 4}));
  EXPECT_FALSE(parse_shape(""));
  EXPECT_FALSE(parse_shape("1x-3"));
  EXPECT_FALSE(parse_shape("1xx3"));
  EXPECT_FALSE(parse_shape("1x3x"));
  EXPECT_FALSE(parse_shape("99999999999x99999999999"));  // product overflows the element limit
}

TEST(Shape, CheckedNumel) {
  EXPECT_EQ(*checked_numel({2, 3, 4}), 24);
  EXPECT_EQ(*checked_numel({}), 1);
  EXPECT_EQ(*checked_numel({5, 0}), 0);
  EXPECT_FALSE(checked_numel({-1, 3}));
  EXPECT_FALSE(checked_numel({int64_t{1} << 30, int64_t{1} << 30, 4}));
  EXPECT_FALSE(checked_numel({int64_t{1} << 62, int64_t{1} << 62}));
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(*broadcast_shapes({1, 3, 1}, {4, 1, 5}), (Shape{4, 3, 5}));
  EXPECT_EQ(*broadcast_shapes({3}, {2, 1}), (Shape{2, 3}));
  EXPECT_EQ(*broadcast_shapes({}, {2, 2}), (Shape{2, 2}));
  EXPECT_FALSE(broadcast_shapes({2, 3}, {3, 2}));
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(*normalize_axis(-1, 4), 3);
  EXPECT_EQ(*normalize_axis(0, 4), 0);
  EXPECT_FALSE(normalize_axis(4, 4));
  EXPECT_FALSE(normalize_axis(-5, 4));
}

TEST(Half, RoundTripAndRounding) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65520.f), 0x7c00);          // rounds to +inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  // Every half value survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(float_to_half(f), h);
    }
  }
}

TEST(Tensor, CastTruncatesAndSaturates) {
  Tensor t = Tensor::from_f32({4}, {1.7f, -1.7f, 300.f, -300.f});
  Tensor i8 = t.cast(DType::kInt8);
  EXPECT_EQ(i8.data<int8_t>()[0], 1);
  EXPECT_EQ(i8.data<int8_t>()[1], -1);
  EXPECT_EQ(i8.data<int8_t>()[2], 127);
  EXPECT_EQ(i8.data<int8_t>()[3], -128);
  Tensor b = t.cast(DType::kBool);
  EXPECT_EQ(b.data<uint8_t>()[0], 1);
}

TEST(Tensor, MakeRejectsHugeShapes) {
  EXPECT_FALSE(Tensor::make(DType::kFloat32, {int64_t{1} << 41}));
  EXPECT_FALSE(Tensor::make(DType::kString, {1}));
  auto ok = Tensor::make(DType::kFloat32, {2, 2});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->nbytes(), 16u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ok->raw()) % 64, 0u);
}

}  // namespace qd
