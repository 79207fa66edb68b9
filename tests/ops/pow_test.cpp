// Pow with an integer base: results beyond the type saturate, a NaN becomes 0 (a plain conversion is undefined).
#include <cstdint>
#include <limits>

#include "ops/movement_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using mvtest::f32;
using mvtest::i64v;
using test::run_op;
using test::values;

TEST(PowTest, IntegerResultsSaturate) {
  Tensor base(DType::kUInt8, {4});
  const uint8_t b[] = {2, 0, 3, 5};
  for (int i = 0; i < 4; ++i) base.data<uint8_t>()[i] = b[i];
  auto u8 = run_op(OpType::Pow, {}, {base, f32({4}, {10.f, -1.f, 2.f, -1.f})});  // 1024, inf, 9, 0.2
  ASSERT_TRUE(u8) << u8.status().to_string();
  EXPECT_EQ(values((*u8)[0]), (std::vector<double>{255, 255, 9, 0}));

  auto i64 = run_op(OpType::Pow, {}, {i64v({2, -2, 3}), i64v({63, 63, 2})});
  ASSERT_TRUE(i64) << i64.status().to_string();
  EXPECT_EQ((*i64)[0].data<int64_t>()[0], std::numeric_limits<int64_t>::max());  // 2^63 does not fit
  EXPECT_EQ((*i64)[0].data<int64_t>()[1], std::numeric_limits<int64_t>::lowest());
  EXPECT_EQ((*i64)[0].data<int64_t>()[2], 9);

  Tensor neg(DType::kInt32, {1});
  neg.data<int32_t>()[0] = -8;
  auto nan = run_op(OpType::Pow, {}, {neg, f32({1}, {0.5f})});  // sqrt(-8)
  ASSERT_TRUE(nan) << nan.status().to_string();
  EXPECT_EQ(values((*nan)[0]), (std::vector<double>{0}));
}

}  // namespace
}  // namespace qd
