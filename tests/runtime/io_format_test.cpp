// I/O formats of engine bindings (runtime/io_format.h): parsing, validation against the bindings, and the host-side
// conversions between the ONNX form and a binding's memory.
#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "runtime/engine.h"
#include "runtime/io_format.h"
#include "test_util.h"

namespace qd {
namespace {

std::string error_of(const Status& s) { return s.is_ok() ? "" : s.message(); }

TEST(IoFormat, Parses) {
  auto f = parse_io_format("int8:nhwc");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dtype, DType::kInt8);
  EXPECT_EQ(f->layout, TensorLayout::kNHWC);
  f = parse_io_format("fp16");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dtype, DType::kFloat16);
  EXPECT_EQ(f->layout, TensorLayout::kNCHW);
  EXPECT_EQ(io_format_str(*f), "fp16:nchw");
  EXPECT_TRUE(parse_io_format("fp32:nchw")->is_default());
  for (const char* bad : {"", "int4:nhwc", "fp16:chw16", "FP16", "fp16:", ":nhwc"}) {
    auto b = parse_io_format(bad);
    EXPECT_FALSE(b) << bad;
    if (!b) {
      EXPECT_NE(b.status().message().find("e.g."), std::string::npos) << b.status().message();
    }
  }
}

std::vector<TensorDesc> two_inputs() {
  return {{"images", DType::kFloat32, {-1, 3, 8, 6}}, {"ids", DType::kInt64, {-1, 4}}};
}

TEST(IoFormat, AppliesToBindings) {
  auto d = two_inputs();
  ASSERT_TRUE(apply_io_formats({"int8:nhwc", "fp32"}, "input", {{"images", 0.5f}}, &d).is_ok());
  EXPECT_EQ(d[0].dtype, DType::kInt8);
  EXPECT_EQ(d[0].layout, TensorLayout::kNHWC);
  EXPECT_EQ(d[0].scale, 0.5f);
  EXPECT_EQ(d[1].dtype, DType::kInt64);
  EXPECT_EQ(io_format_str(d[0]), "int8:nhwc");

  d = two_inputs();
  EXPECT_NE(error_of(apply_io_formats({"fp16", "fp16", "fp16"}, "input", {}, &d)).find("3 formats for 2 inputs"),
            std::string::npos);
  d = two_inputs();
  EXPECT_NE(error_of(apply_io_formats({"fp16"}, "input", {}, &d)).find("'ids': the tensor is int64"),
            std::string::npos) << "one format for all applies to every input";
  d = two_inputs();
  EXPECT_NE(error_of(apply_io_formats({"int8", "fp32"}, "input", {}, &d)).find("needs the tensor's INT8 scale"),
            std::string::npos);
  d = two_inputs();
  EXPECT_NE(error_of(apply_io_formats({"int8", "fp32"}, "input", {{"images", NAN}}, &d)).find("INT8 scale"),
            std::string::npos);
  std::vector<TensorDesc> out{{"output0", DType::kFloat32, {1, 100, 15}}};
  EXPECT_NE(error_of(apply_io_formats({"fp16:nhwc"}, "output", {}, &out)).find("nhwc needs a 4-d tensor"),
            std::string::npos);
  ASSERT_TRUE(apply_io_formats({"fp16"}, "output", {}, &out).is_ok());
  EXPECT_EQ(out[0].dtype, DType::kFloat16);
}

TEST(IoFormat, HostConversionsRoundTrip) {
  const Tensor x = test::random_f32({2, 3, 4, 5}, 7, -2.f, 2.f);
  TensorDesc d{"x", DType::kInt8, {-1, 3, 4, 5}, TensorLayout::kNHWC, 0.02f};
  auto b = to_binding_format(x, d);
  ASSERT_TRUE(b) << b.status().to_string();
  EXPECT_EQ(b->dtype(), DType::kInt8);
  EXPECT_EQ(b->shape(), (Shape{2, 4, 5, 3}));
  EXPECT_EQ(binding_shape(d, x.shape()), b->shape());
  EXPECT_TRUE(is_binding_memory(*b, d));
  EXPECT_FALSE(is_binding_memory(x, d));
  EXPECT_EQ(logical_shape(*b, d), x.shape());
  EXPECT_EQ(logical_shape(x, d), x.shape());
  EXPECT_EQ(feed_dtype(d), DType::kFloat32);
  // Element (n, c, h, w) lands at [n, h, w, c], quantized by the activation rule (ties to even, saturating).
  const float* xs = x.data<float>();
  const int8_t* q = b->data<int8_t>();
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 4; ++h) {
        for (int w = 0; w < 5; ++w) {
          const float v = xs[((n * 3 + c) * 4 + h) * 5 + w];
          const float want = std::max(-128.f, std::min(127.f, std::nearbyint(v / 0.02f)));
          ASSERT_EQ(q[((n * 4 + h) * 5 + w) * 3 + c], static_cast<int8_t>(want));
        }
      }
    }
  }
  auto back = from_binding_format(*b, d);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_LE(std::fabs(back->data<float>()[i] - std::max(-2.56f, std::min(2.54f, xs[i]))), 0.01f + 1e-6f) << i;
  }

  TensorDesc h{"x", DType::kFloat16, {2, 3, 4, 5}};  // fp16:nchw
  auto hb = to_binding_format(x, h);
  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(hb->data<uint16_t>()[i], float_to_half(xs[i]));
  EXPECT_EQ(feed_dtype(h), DType::kFloat16);

  EXPECT_FALSE(to_binding_format(*hb, h)) << "only the float32 ONNX form converts";
  EXPECT_FALSE(to_binding_format(Tensor(DType::kFloat32, {3, 4}), d)) << "nhwc needs 4-d";
  EXPECT_FALSE(from_binding_format(x, d)) << "dtype differs from the binding's";
}

TEST(IoFormat, OnlyForCuda) {
  BuildOptions opt;
  opt.input_formats = {"fp16:nhwc"};
  const std::string e = error_of(check_build_options(opt));
  EXPECT_NE(e.find("for --device cuda"), std::string::npos) << e;
  opt.input_formats = {"fp32:nchw"};
  EXPECT_TRUE(check_build_options(opt).is_ok()) << "the ONNX form is every engine's";
  opt.device = "cuda";
  opt.output_formats = {"bf16"};
  EXPECT_NE(error_of(check_build_options(opt)).find("fp32, fp16 or int8"), std::string::npos);
}

}  // namespace
}  // namespace qd
