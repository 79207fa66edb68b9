// The stem kernel that reads the image itself (ConvParams::in_format kImageF16 / kImageF32 / kImageI8,
// conv_warp_halo_kernel): a 6x6 stride-2 pad-2 conv over an image of 3 channels, NCHW planes or NHWC pixels, fp16 or
// fp32 (INT8 also an int8 NHWC image, quantized already: the same outputs as from the float image), computed as the
// 3x3 stride-1 conv over its space-to-depth. fp16: against the reference backend's fp32 Conv (fp16-exact image and
// weights), and an fp32 image gives the same bits as the same image in fp16 (the kernel rounds it to fp16). INT8:
// against the reference's QuantizeLinear of the image, ConvInteger and y = acc * (s_x * s_w[k]) + bias[k],
// bit-exact, the image quantized by the exact rule (values on rounding ties included). Both also as a stem inside a
// network writes: NHWC fp16 or int8 with SiLU, against the reference within fp16's rounding or 1 LSB.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/conv.h"
#include "core/half.h"
#include "ops/op.h"
#include "ops/quantize.h"
#include "cuda/conv_case.h"
#include "cuda/gpu_test.h"
#include "test_util.h"

namespace qd {
namespace {

struct StemCase {
  int n, c, h, w, k;
};

// The image [N, C, H, W] in the layout and dtype the kernel reads: NCHW as it is, or NHWC of exactly C values; an
// int8 tensor as int8 NHWC.
std::vector<unsigned char> image_bytes(const Tensor& x, bool nchw, bool f16) {
  const auto& s = x.shape();
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  if (x.dtype() == DType::kInt8) {
    std::vector<unsigned char> out(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {  // i: NCHW index
      const int64_t n = i / (C * H * W), c = i / (H * W) % C, yx = i % (H * W);
      out[(n * H * W + yx) * C + c] = static_cast<unsigned char>(x.data<int8_t>()[i]);
    }
    return out;
  }
  const size_t esize = f16 ? 2 : 4;
  std::vector<unsigned char> out(static_cast<size_t>(x.numel()) * esize);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx) {
          const float v = x.data<float>()[((n * C + c) * H + y) * W + xx];
          const int64_t at = nchw ? ((n * C + c) * H + y) * W + xx : ((n * H + y) * W + xx) * C + c;
          if (f16) {
            const uint16_t h = float_to_half(v);
            std::memcpy(out.data() + at * 2, &h, 2);
          } else {
            std::memcpy(out.data() + at * 4, &v, 4);
          }
        }
  return out;
}

// [K][C][6][6] weights as the space-to-depth conv's packed rows: [K][3][3][16] (channel (dy * 2 + dx) * C + c, the
// rest zero), rows of kp elements.
template <typename T, typename F>
std::vector<T> s2d_rows(const Tensor& w, int kp, F cvt) {
  const auto& s = w.shape();
  const int64_t K = s[0], C = s[1];
  std::vector<T> out(static_cast<size_t>(K) * kp, T{});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int r = 0; r < 6; ++r)
        for (int q = 0; q < 6; ++q) {
          const int64_t ch = ((r % 2) * 2 + q % 2) * C + c, tap = (r / 2) * 3 + q / 2;
          out[k * kp + tap * 16 + ch] = cvt(w.data<float>()[((k * C + c) * 6 + r) * 6 + q]);
        }
  return out;
}

cuda::ConvParams stem_params(const StemCase& cs, int kp, bool nchw, bool f16) {
  cuda::ConvParams p;
  p.N = cs.n, p.H = cs.h / 2, p.W = cs.w / 2, p.C = 16, p.K = cs.k, p.R = p.S = 3;
  p.pad_h = p.pad_w = 1;
  p.OH = p.H, p.OW = p.W, p.Kp = kp;
  p.in_format = f16 ? cuda::InFormat::kImageF16 : cuda::InFormat::kImageF32;
  p.in_nchw = nchw;
  p.in_channels = cs.c;
  p.in_ld = nchw ? 0 : cs.c;
  p.out_format = cuda::OutFormat::kNchwF32;
  return p;
}

// The configuration that runs p (one stem kernel per precision and image dtype), or -1; with `variants`, also the
// INT8 kernel's copies with another register cap (stem_image_i8_nhwc16_b5: the same code, so the same results).
int stem_config(const cuda::ConvParams& p, bool int8, std::vector<int>* variants = nullptr) {
  int found = -1;
  for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) {
    if (cuda::conv_igemm_config_int8(cfg) != int8 || !cuda::conv_igemm_config_fits(cfg, p)) continue;
    if (cuda::conv_igemm_config_name(cfg).find("_b") != std::string::npos) {
      EXPECT_TRUE(variants) << cuda::conv_igemm_config_name(cfg);
      if (variants) variants->push_back(cfg);
      continue;
    }
    EXPECT_EQ(found, -1) << "two configurations fit an image stem";
    found = cfg;
  }
  return found;
}

// The NHWC output with SiLU that a stem inside a network writes (fp16, or int8 with scale out_scale; the kernel's
// lean register epilogue where K is a multiple of 8), launched with config and read back as NCHW floats (int8: the
// integers).
std::vector<float> run_nhwc_silu(cuda::ConvParams p, cuda::ConvArgs a, int cfg, bool i8, float out_scale) {
  p.out_format = i8 ? cuda::OutFormat::kNhwcI8 : cuda::OutFormat::kNhwcF16;
  p.out_ld = p.K;
  p.out_scale = out_scale;
  p.act = cuda::Act::kSilu;
  const int64_t hw = static_cast<int64_t>(p.OH) * p.OW, total = p.N * hw * p.K;
  cuda::DeviceBuffer dy;
  EXPECT_TRUE(dy.alloc(total * (i8 ? 1 : 2)).is_ok());
  a.y = dy.get();
  EXPECT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
  std::vector<unsigned char> raw(total * (i8 ? 1 : 2));
  EXPECT_EQ(cudaMemcpy(raw.data(), dy.get(), raw.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> out(total);
  for (int64_t i = 0; i < total; ++i) {  // i: NHWC index
    const int64_t n = i / (hw * p.K), pix = i / p.K % hw, k = i % p.K;
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, i8 ? 0 : 2);
    out[(n * p.K + k) * hw + pix] = i8 ? static_cast<int8_t>(raw[i]) : half_to_float(h);
  }
  return out;
}

float silu(float v) { return v / (1.f + std::exp(-v)); }

Tensor reference(OpType op, const std::vector<const Tensor*>& in) {
  Node node{"conv", op, op == OpType::Conv ? 13 : 10, {}, {0, 1, 2}, {3}};
  node.inputs.resize(in.size());
  node.attrs.set("kernel_shape", std::vector<int64_t>{6, 6});
  node.attrs.set("strides", std::vector<int64_t>{2, 2});
  node.attrs.set("pads", std::vector<int64_t>{2, 2, 2, 2});
  std::vector<DType> types;
  std::vector<Shape> shapes;
  for (const Tensor* t : in) types.push_back(t->dtype()), shapes.push_back(t->shape());
  InferCtx ctx(node, types, shapes, in);
  EXPECT_TRUE(infer_node(ctx).is_ok());
  auto ref = run_node(ctx, in);
  EXPECT_TRUE(ref) << ref.status().to_string();
  return ref ? (*ref)[0] : Tensor();
}

class ConvStemImage : public ::testing::TestWithParam<StemCase> {};

TEST_P(ConvStemImage, Fp16MatchesReference) {
  SKIP_WITHOUT_GPU();
  const StemCase cs = GetParam();
  std::mt19937 rng(cs.c * 7 + cs.k);
  std::uniform_real_distribution<float> ux(0.f, 1.f), uw(-0.1f, 0.1f), ub(-1.f, 1.f);
  auto fp16 = [](float v) { return half_to_float(float_to_half(v)); };
  Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}), w(DType::kFloat32, {cs.k, cs.c, 6, 6});
  Tensor b(DType::kFloat32, {cs.k});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = fp16(ux(rng));
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = fp16(uw(rng));
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = ub(rng);
  const Tensor want = reference(OpType::Conv, {&x, &w, &b});
  ASSERT_EQ(want.shape(), (Shape{cs.n, cs.k, cs.h / 2, cs.w / 2}));
  double range = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) range = std::max(range, std::fabs(double{want.data<float>()[i]}));

  const int kp = 160;  // 9 x 16 rounded up to 32
  cuda::DeviceBuffer dw, db, dy;
  ASSERT_TRUE(dw.upload(s2d_rows<uint16_t>(w, kp, [](float v) { return float_to_half(v); })).is_ok() &&
              db.upload(b.data<float>(), b.nbytes()).is_ok() && dy.alloc(want.nbytes()).is_ok());
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  for (const bool nchw : {true, false}) {
    std::vector<float> first;
    for (const bool f16 : {true, false}) {
      SCOPED_TRACE(std::string(nchw ? "NCHW " : "NHWC ") + (f16 ? "fp16" : "fp32"));
      cuda::DeviceBuffer dx;
      ASSERT_TRUE(dx.upload(image_bytes(x, nchw, f16)).is_ok());
      cuda::ConvParams p = stem_params(cs, kp, nchw, f16);
      const int cfg = stem_config(p, false);
      ASSERT_GE(cfg, 0);
      cuda::ConvArgs a;
      a.x = dx.get();
      a.w = dw.get();
      a.bias = static_cast<const float*>(db.get());
      a.y = dy.get();
      ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
      std::vector<float> y(want.numel());
      ASSERT_EQ(cudaMemcpy(y.data(), dy.get(), want.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      double err = 0;
      for (int64_t i = 0; i < want.numel(); ++i) err = std::max(err, std::fabs(double{y[i]} - want.data<float>()[i]));
      EXPECT_LE(err, 1e-4 * range) << "max |diff| " << err;
      // The fp32 image holds fp16-exact values: the same products in the same order as from the fp16 image.
      if (first.empty()) {
        first = y;
      } else {
        EXPECT_EQ(y, first);
      }
      // As inside a network: NHWC fp16 with SiLU.
      const std::vector<float> ys = run_nhwc_silu(p, a, cfg, false, 1.f);
      double serr = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float s = silu(want.data<float>()[i]);
        serr = std::max(serr, std::fabs(double{ys[i]} - s) / (std::fabs(s) + 1e-2 * range));
      }
      EXPECT_LE(serr, 2e-3) << "NHWC fp16 SiLU output: max relative |diff|";
      // In an INT8 plan with the stem in fp16: its int8 output for the INT8 layers after it, within 1 LSB.
      const float so = 0.02f;
      const std::vector<float> q = run_nhwc_silu(p, a, cfg, true, so);
      int64_t q_within = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        q_within += std::fabs(q[i] - ops::quantize_value(silu(want.data<float>()[i]), so, 0, -128, 127)) <= 1;
      }
      EXPECT_EQ(q_within, want.numel()) << "NHWC int8 SiLU output of the fp16 stem beyond 1 LSB";
    }
  }
}

TEST_P(ConvStemImage, Int8MatchesReference) {
  SKIP_WITHOUT_GPU();
  const StemCase cs = GetParam();
  std::mt19937 rng(cs.c * 11 + cs.k);
  std::uniform_int_distribution<int> qw8(-127, 127), qx(-128, 127);
  std::uniform_real_distribution<float> frac(-0.4f, 0.4f), u(0.5f, 2.f), ub(-1.f, 1.f);
  const float sx = 0.0173f;
  // Image values: most a fraction of a step from an integer multiple of sx, every 16th on a half-integer multiple (a
  // tie, or within an ulp of one), for the exact rule.
  Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w});
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float q = static_cast<float>(qx(rng)), f = i % 16 ? frac(rng) : 0.5f;
    x.data<float>()[i] = half_to_float(float_to_half((q + f) * sx));
  }
  Tensor wq(DType::kInt8, {cs.k, cs.c, 6, 6}), wf(DType::kFloat32, wq.shape());
  for (int64_t i = 0; i < wq.numel(); ++i) {
    wq.data<int8_t>()[i] = static_cast<int8_t>(qw8(rng));
    wf.data<float>()[i] = wq.data<int8_t>()[i];
  }
  std::vector<float> alpha(cs.k), bias(cs.k);
  for (int k = 0; k < cs.k; ++k) alpha[k] = sx * (u(rng) / 127.f), bias[k] = ub(rng);
  const int kp = 192;  // 9 x 16 rounded up to 64
  cuda::DeviceBuffer dw, da, db, dy;
  ASSERT_TRUE(dw.upload(s2d_rows<int8_t>(wf, kp, [](float v) { return static_cast<int8_t>(v); })).is_ok() &&
              da.upload(alpha).is_ok() && db.upload(bias).is_ok());
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  // The kernel rounds the image by the exact rule in either plan, ties included.
  Tensor xq(DType::kInt8, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    xq.data<int8_t>()[i] = static_cast<int8_t>(ops::quantize_value(x.data<float>()[i], sx, 0, -128, 127));
  }
  const Tensor acc = reference(OpType::ConvInteger, {&xq, &wq});
  ASSERT_TRUE(dy.alloc(acc.numel() * 4).is_ok());
  for (const bool exact : {true, false}) {
    std::vector<float> nhwc_q;  // the NHWC fp16 image's SiLU output, which the int8 image's must equal
    for (const bool nchw : {true, false})
      for (const int dtype : {0, 1, 2}) {  // the image in fp16, fp32, int8 (NHWC only)
        if (dtype == 2 && nchw) continue;
        const bool f16 = dtype == 0;
        SCOPED_TRACE(std::string(exact ? "bit-exact plan " : "default plan ") + (nchw ? "NCHW " : "NHWC ") +
                     (dtype == 0 ? "fp16" : dtype == 1 ? "fp32" : "int8"));
        cuda::DeviceBuffer dx;
        ASSERT_TRUE(dx.upload(image_bytes(dtype == 2 ? xq : x, nchw, f16)).is_ok());
        cuda::ConvParams p = stem_params(cs, kp, nchw, f16);
        if (dtype == 2) p.in_format = cuda::InFormat::kImageI8;
        p.in_scale = sx;
        p.exact_silu = exact;  // the bit-exact plans' flag: the staged epilogue, not the registers'
        std::vector<int> variants;
        const int cfg = stem_config(p, true, &variants);
        ASSERT_GE(cfg, 0);
        cuda::ConvArgs a;
        a.x = dx.get();
        a.w = dw.get();
        a.alpha = static_cast<const float*>(da.get());
        a.bias = static_cast<const float*>(db.get());
        a.y = dy.get();
        ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
        std::vector<float> y(acc.numel());
        ASSERT_EQ(cudaMemcpy(y.data(), dy.get(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        const int64_t plane = static_cast<int64_t>(cs.h / 2) * (cs.w / 2);
        int64_t same = 0;
        for (int64_t i = 0; i < acc.numel(); ++i) {
          const int k = static_cast<int>(i / plane % cs.k);
          same += y[i] == static_cast<float>(acc.data<int32_t>()[i]) * alpha[k] + bias[k];
        }
        EXPECT_EQ(same, acc.numel()) << "fp32 outputs not bit-exact";
        // As inside a network: NHWC int8 with SiLU, against the reference's quantized SiLU, within 1 LSB.
        const float so = 0.02f;
        const std::vector<float> q = run_nhwc_silu(p, a, cfg, true, so);
        int64_t q_same = 0, q_within = 0;
        for (int64_t i = 0; i < acc.numel(); ++i) {
          const int k = static_cast<int>(i / plane % cs.k);
          const float v = silu(static_cast<float>(acc.data<int32_t>()[i]) * alpha[k] + bias[k]);
          const int w = ops::quantize_value(v, so, 0, -128, 127);
          q_same += q[i] == w;
          q_within += std::fabs(q[i] - w) <= 1;
        }
        EXPECT_EQ(q_within, acc.numel()) << "NHWC int8 SiLU output beyond 1 LSB";
        EXPECT_GE(q_same, acc.numel() - acc.numel() / 100) << "NHWC int8 SiLU output: fewer than 99% identical";
        if (!nchw && dtype == 0) nhwc_q = q;
        if (dtype == 2) {
          EXPECT_EQ(q, nhwc_q) << "the int8 image's SiLU output differs from the fp16 image's";
        }
        // The accumulators converted without I2F (ConvParams::small_acc, which the stem's 108 weights per output
        // allow): outside the bit-exact plan and with K a multiple of 8, the kernel's lean copy; the same integers.
        cuda::ConvParams ps = p;
        ps.small_acc = true;
        EXPECT_EQ(run_nhwc_silu(ps, a, cfg, true, so), q) << "the accumulators' conversion without I2F";
        ps.out_format = cuda::OutFormat::kNhwcI8;
        ps.out_ld = ps.K;
        ps.act = cuda::Act::kSilu;
        EXPECT_EQ(cuda::conv_igemm_config_lean(cfg, ps, a), !exact && cs.k % 8 == 0);
        for (const int v : variants) {
          EXPECT_EQ(run_nhwc_silu(p, a, v, true, so), q) << cuda::conv_igemm_config_name(v);
          EXPECT_EQ(run_nhwc_silu(ps, a, v, true, so), q) << cuda::conv_igemm_config_name(v) << " without I2F";
        }
        EXPECT_EQ(variants.size(), !nchw && dtype != 1 ? 1u : 0u) << "register-capped copies of the NHWC stems";
        // With an fp16 output (the next layer in fp16).
        const std::vector<float> h = run_nhwc_silu(p, a, cfg, false, 1.f);
        double herr = 0;
        for (int64_t i = 0; i < acc.numel(); ++i) {
          const int k = static_cast<int>(i / plane % cs.k);
          const float v = silu(static_cast<float>(acc.data<int32_t>()[i]) * alpha[k] + bias[k]);
          herr = std::max(herr, std::fabs(double{h[i]} - v) / (std::fabs(v) + 1.0));
        }
        EXPECT_LE(herr, 2e-3) << "NHWC fp16 SiLU output of the INT8 stem: max relative |diff|";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvStemImage,
                         ::testing::Values(StemCase{2, 3, 10, 256, 32},    // YOLOv5's stem, an odd number of rows
                                           StemCase{1, 3, 6, 64, 16},      // one column group, 16 outputs
                                           StemCase{3, 3, 64, 384, 24},    // several strips of rows
                                           StemCase{2, 3, 14, 192, 32},    // 3 column groups per row
                                           StemCase{1, 3, 8, 128, 20}));   // a partial N tile

// Only 3-channel images whose output width is a multiple of 32 (elsewhere a space-to-depth pass and the halo stem).
TEST(ConvStemImage, FitsOnlyThreeChannelsAndWhole32Columns) {
  for (const bool nchw : {true, false})
    for (const bool f16 : {true, false}) {
      cuda::ConvParams p = stem_params(StemCase{1, 3, 8, 128, 32}, 160, nchw, f16);
      int fit = 0;
      for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) fit += cuda::conv_igemm_config_fits(cfg, p);
      // One fp16 and one INT8 configuration, and for an fp16 NHWC image the INT8 one's copy capped for 5 blocks per
      // SM (stem_image_i8_nhwc16_b5).
      EXPECT_EQ(fit, !nchw && f16 ? 3 : 2);
      for (const StemCase& cs : {StemCase{1, 4, 8, 128, 32}, StemCase{1, 3, 8, 112, 32}}) {
        p = stem_params(cs, 160, nchw, f16);
        for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) EXPECT_FALSE(cuda::conv_igemm_config_fits(cfg, p));
      }
    }
  // An int8 image: NHWC only, INT8 only.
  for (const bool nchw : {true, false}) {
    cuda::ConvParams p = stem_params(StemCase{1, 3, 8, 128, 32}, 192, nchw, false);
    p.in_format = cuda::InFormat::kImageI8;
    int fit = 0;
    for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) {
      if (!cuda::conv_igemm_config_fits(cfg, p)) continue;
      ++fit;
      EXPECT_TRUE(cuda::conv_igemm_config_int8(cfg)) << cuda::conv_igemm_config_name(cfg);
    }
    EXPECT_EQ(fit, nchw ? 0 : 2);  // stem_image_i8_nhwc8 and its _b5 copy
  }
}

// The same kernel over activations (halo3x3_*_c32: YOLOv5's C3 bottleneck 3x3, 32 -> 32 channels with a residual),
// as inside a network: NHWC output with SiLU and the residual added (the register epilogue), fp16 and INT8, against
// a plain loop over the same fp16-exact (or integer) values.
TEST(ConvWarpHalo, SiluResidualMatchesReference) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  for (const test::ConvCase cs :
       {test::ConvCase{2, 32, 9, 64, 32, 3, 3, 1, 1}, test::ConvCase{1, 32, 4, 96, 24, 3, 3, 1, 1}}) {
    SCOPED_TRACE(std::to_string(cs.h) + "x" + std::to_string(cs.w) + " -> " + std::to_string(cs.k));
    std::mt19937 rng(cs.w + cs.k);
    std::uniform_int_distribution<int> q8(-127, 127);
    std::uniform_real_distribution<float> ub(-1.f, 1.f);
    const int64_t hw = static_cast<int64_t>(cs.h) * cs.w, pixels = cs.n * hw;
    // Integers as the values (the INT8 conv's; fp16 gets them / 16), so that the sums are exact.
    Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}), w(DType::kFloat32, {cs.k, cs.c, 3, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(q8(rng));
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(q8(rng) / 16);
    std::vector<float> bias(cs.k), alpha(cs.k);
    for (int k = 0; k < cs.k; ++k) bias[k] = ub(rng), alpha[k] = 1e-4f * (2.f + ub(rng));
    std::vector<int8_t> res(pixels * cs.k);  // NHWC residual: int8, or for fp16 its value * res_scale
    for (auto& r : res) r = static_cast<int8_t>(q8(rng));
    const float res_scale = 0.03f, out_scale = 0.05f;
    std::vector<int64_t> acc(pixels * cs.k, 0);  // NHWC
    for (int n = 0; n < cs.n; ++n)
      for (int y = 0; y < cs.h; ++y)
        for (int xx = 0; xx < cs.w; ++xx)
          for (int k = 0; k < cs.k; ++k) {
            int64_t sum = 0;
            for (int r = 0; r < 3; ++r)
              for (int t = 0; t < 3; ++t) {
                const int iy = y - 1 + r, ix = xx - 1 + t;
                if (iy < 0 || iy >= cs.h || ix < 0 || ix >= cs.w) continue;
                for (int c = 0; c < cs.c; ++c) {
                  sum += static_cast<int64_t>(x.data<float>()[((n * cs.c + c) * cs.h + iy) * cs.w + ix]) *
                         static_cast<int64_t>(w.data<float>()[((k * cs.c + c) * 3 + r) * 3 + t]);
                }
              }
            acc[((n * cs.h + y) * cs.w + xx) * cs.k + k] = sum;
          }
    for (const bool i8 : {false, true}) {
      SCOPED_TRACE(i8 ? "INT8" : "fp16");
      const int kp = i8 ? 320 : 288;
      cuda::DeviceBuffer dx, dw, db, da, dr, dy;
      if (i8) {
        const auto q = [](float v) { return static_cast<int8_t>(v); };
        ASSERT_TRUE(dx.upload(test::to_nhwc<int8_t>(cs, 32, x.data<float>(), q)).is_ok());
        ASSERT_TRUE(dw.upload(test::to_krsc<int8_t>(cs, 32, kp, w.data<float>(), q)).is_ok());
        ASSERT_TRUE(dr.upload(res).is_ok() && da.upload(alpha).is_ok());
      } else {  // x / 16 and w / 16: exact in fp16, their products' sums (acc / 256) in fp32
        const auto h = [](float v) { return float_to_half(v / 16.f); };
        std::vector<uint16_t> rh(res.size());
        for (size_t i = 0; i < res.size(); ++i) rh[i] = float_to_half(res[i] * res_scale);
        ASSERT_TRUE(dx.upload(test::to_nhwc<uint16_t>(cs, 32, x.data<float>(), h)).is_ok());
        ASSERT_TRUE(dw.upload(test::to_krsc<uint16_t>(cs, 32, kp, w.data<float>(), h)).is_ok());
        ASSERT_TRUE(dr.upload(rh).is_ok());
      }
      ASSERT_TRUE(db.upload(bias).is_ok() && dy.alloc(pixels * cs.k * 2).is_ok());
      cuda::ConvParams p = test::conv_params(cs, 32, kp, cs.h, cs.w);
      p.act = cuda::Act::kSilu;
      p.out_ld = p.res_ld = cs.k;
      p.out_scale = out_scale;
      p.res_scale = res_scale;
      cuda::ConvArgs a;
      a.x = dx.get();
      a.w = dw.get();
      a.bias = static_cast<const float*>(db.get());
      a.alpha = i8 ? static_cast<const float*>(da.get()) : nullptr;
      if (i8) {
        a.residual_i8 = static_cast<const int8_t*>(dr.get());
      } else {
        a.residual = static_cast<const __half*>(dr.get());
      }
      a.y = dy.get();
      // The output in the kernel's own precision, and in the other (a layer at a precision boundary of a mixed
      // plan: an fp16 conv feeding INT8 ones, or the reverse).
      for (const bool out_i8 : {i8, !i8}) {
        SCOPED_TRACE(out_i8 ? "int8 output" : "fp16 output");
        p.out_format = out_i8 ? cuda::OutFormat::kNhwcI8 : cuda::OutFormat::kNhwcF16;
        int cfg = -1;
        std::vector<int> variants;  // the INT8 kernel's copies with other register caps (halo3x3_i8_c32_b5, _b6)
        for (int c = 0; c < cuda::conv_igemm_configs(); ++c) {
          const std::string name = cuda::conv_igemm_config_name(c);
          if (cuda::conv_igemm_config_int8(c) != i8 || !cuda::conv_igemm_config_fits(c, p) ||
              name.rfind("halo3x3_", 0) != 0) {
            continue;
          }
          if (name.find("_b") != std::string::npos) {
            variants.push_back(c);
          } else {
            cfg = c;
          }
        }
        ASSERT_GE(cfg, 0) << "no halo3x3 configuration fits";
        EXPECT_EQ(variants.size(), i8 ? 2u : 0u);
        const auto run = [&](const cuda::ConvParams& q, const cuda::ConvArgs& qa, int config = -1) {
          EXPECT_EQ(cudaMemset(dy.get(), 0x55, dy.size()), cudaSuccess);
          EXPECT_TRUE(cuda::launch_conv_igemm(q, qa, config < 0 ? cfg : config, nullptr).is_ok());
          std::vector<unsigned char> out(dy.size());
          EXPECT_EQ(cudaMemcpy(out.data(), dy.get(), out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          return out;
        };
        const std::vector<unsigned char> got = run(p, a);
        if (i8 && out_i8) {  // the lean copy (accumulators without I2F): the same bytes, with the residual and without
          cuda::ConvParams ps = p;
          ps.small_acc = true;
          EXPECT_TRUE(cuda::conv_igemm_config_lean(cfg, ps, a));
          EXPECT_EQ(run(ps, a), got) << "the lean kernel's output";
          cuda::ConvArgs plain = a;
          plain.residual_i8 = nullptr;
          EXPECT_EQ(run(ps, plain), run(p, plain)) << "the lean kernel's output without a residual";
          for (const int v : variants) {  // the same code under another register cap: the same bytes
            EXPECT_EQ(run(ps, a, v), got) << cuda::conv_igemm_config_name(v);
            EXPECT_EQ(run(ps, plain, v), run(p, plain)) << cuda::conv_igemm_config_name(v) << " without a residual";
          }
        }
        const size_t used = pixels * cs.k * (out_i8 ? 1 : 2);
        EXPECT_EQ(std::count(got.begin() + used, got.end(), 0x55), static_cast<std::ptrdiff_t>(got.size() - used))
            << "written past the output";
        double err = 0;
        int64_t same = 0, within = 0;
        for (int64_t i = 0; i < pixels * cs.k; ++i) {
          const int k = static_cast<int>(i % cs.k);
          const float v = i8 ? silu(static_cast<float>(acc[i]) * alpha[k] + bias[k]) + res[i] * res_scale
                             : silu(static_cast<float>(acc[i]) / 256.f + bias[k]) +
                                   half_to_float(float_to_half(res[i] * res_scale));
          if (out_i8) {
            const int want = ops::quantize_value(v, out_scale, 0, -128, 127), q = static_cast<int8_t>(got[i]);
            same += q == want;
            within += std::abs(q - want) <= 1;
          } else {
            uint16_t h;
            std::memcpy(&h, got.data() + 2 * i, 2);
            err = std::max(err, std::fabs(double{half_to_float(h)} - v) / (std::fabs(v) + 1.0));
          }
        }
        if (out_i8) {
          EXPECT_EQ(within, pixels * cs.k) << "beyond 1 LSB";
          EXPECT_GE(same, pixels * cs.k * 99 / 100) << "fewer than 99% identical";
        } else {
          EXPECT_LE(err, 2e-3) << "max relative |diff|";
        }
      }
    }
  }
}

// The warp-streaming INT8 kernels over activations (conv_warp_halo_s2_kernel, conv_warp_pw_kernel) on one shape, as
// inside a network: SiLU into an int8 NHWC output wider than the layer's (8 channels before it, 8 after: nothing may
// be written outside its channels), the input pixels in_ld channels apart (a slice of a wider tensor), against a plain
// loop over the same integers. Both copies run: the lean one (small accumulators, the quad epilogue) and the full one
// (I2F, igemm_epilogue), each within 1 LSB of the reference and 99% identical to it.
void expect_warp_conv_silu(const char* config, const test::ConvCase& cs, int in_ld) {
  const int oh = (cs.h + 2 * cs.pad - cs.r) / cs.stride + 1, ow = (cs.w + 2 * cs.pad - cs.s) / cs.stride + 1;
  SCOPED_TRACE(std::string(config) + " " + std::to_string(cs.n) + "x" + std::to_string(cs.h) + "x" +
               std::to_string(cs.w) + "x" + std::to_string(cs.c) + " -> " + std::to_string(cs.k));
  std::mt19937 rng(cs.h + cs.k);
  std::uniform_int_distribution<int> q8(-127, 127), w8(-20, 20);
  std::uniform_real_distribution<float> ub(-1.f, 1.f);
  const int64_t pixels = static_cast<int64_t>(cs.n) * oh * ow;
  const int row = cs.r * cs.s * cs.c, kp = (row + 63) / 64 * 64;
  std::vector<int8_t> x(static_cast<size_t>(cs.n) * cs.h * cs.w * in_ld), w(static_cast<size_t>(cs.k) * kp, 0);
  for (auto& v : x) v = static_cast<int8_t>(q8(rng));
  for (int k = 0; k < cs.k; ++k)
    for (int i = 0; i < row; ++i) w[k * kp + i] = static_cast<int8_t>(w8(rng));  // [K][R][S][C], rows of kp
  std::vector<float> bias(cs.k), alpha(cs.k);
  for (int k = 0; k < cs.k; ++k) bias[k] = ub(rng), alpha[k] = 2e-4f * (2.f + ub(rng));
  const int out_ld = cs.k + 16, out_coff = 8;
  const float out_scale = 0.05f;
  cuda::DeviceBuffer dx, dw, db, da, dy;
  ASSERT_TRUE(dx.upload(x).is_ok() && dw.upload(w).is_ok() && db.upload(bias).is_ok() && da.upload(alpha).is_ok() &&
              dy.alloc(pixels * out_ld).is_ok());
  cuda::ConvParams p = test::conv_params(cs, cs.c, kp, oh, ow);
  p.in_ld = in_ld;
  p.act = cuda::Act::kSilu;
  p.out_format = cuda::OutFormat::kNhwcI8;
  p.out_ld = out_ld;
  p.out_coff = out_coff;
  p.out_scale = out_scale;
  cuda::ConvArgs a;
  a.x = dx.get();
  a.w = dw.get();
  a.bias = static_cast<const float*>(db.get());
  a.alpha = static_cast<const float*>(da.get());
  a.y = dy.get();
  int cfg = -1;
  for (int c = 0; c < cuda::conv_igemm_configs(); ++c) {
    if (cuda::conv_igemm_config_name(c) == config) cfg = c;
  }
  ASSERT_GE(cfg, 0);
  ASSERT_TRUE(cuda::conv_igemm_config_fits(cfg, p));
  const auto run = [&](bool small) {
    p.small_acc = small;  // the weights allow it: 128 * 288 * 20 < 2^22
    EXPECT_EQ(cuda::conv_igemm_config_lean(cfg, p, a), small);
    EXPECT_EQ(cudaMemset(dy.get(), 0x55, dy.size()), cudaSuccess);
    EXPECT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
    std::vector<int8_t> out(dy.size());
    EXPECT_EQ(cudaMemcpy(out.data(), dy.get(), out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  };
  const std::vector<int8_t> lean = run(true), full = run(false);
  int64_t within = 0, same = 0, untouched = 0;
  for (int n = 0; n < cs.n; ++n)
    for (int y = 0; y < oh; ++y)
      for (int xx = 0; xx < ow; ++xx) {
        const int64_t m = (static_cast<int64_t>(n) * oh + y) * ow + xx;
        for (int c = 0; c < out_ld; ++c) {
          const bool outside = c < out_coff || c >= out_coff + cs.k;
          untouched += outside && lean[m * out_ld + c] == 0x55 && full[m * out_ld + c] == 0x55;
        }
        for (int k = 0; k < cs.k; ++k) {
          int64_t sum = 0;
          for (int r = 0; r < cs.r; ++r)
            for (int t = 0; t < cs.s; ++t) {
              const int iy = y * cs.stride - cs.pad + r, ix = xx * cs.stride - cs.pad + t;
              if (iy < 0 || iy >= cs.h || ix < 0 || ix >= cs.w) continue;
              const int8_t* px = &x[((static_cast<size_t>(n) * cs.h + iy) * cs.w + ix) * in_ld];
              const int8_t* wr = &w[k * kp + (r * cs.s + t) * cs.c];
              for (int c = 0; c < cs.c; ++c) sum += px[c] * wr[c];
            }
          const int want =
              ops::quantize_value(silu(static_cast<float>(sum) * alpha[k] + bias[k]), out_scale, 0, -128, 127);
          const int ql = lean[m * out_ld + out_coff + k], qf = full[m * out_ld + out_coff + k];
          within += std::abs(ql - want) <= 1 && std::abs(qf - want) <= 1;
          same += (ql == want) + (qf == want);
        }
      }
  EXPECT_EQ(within, pixels * cs.k) << "beyond 1 LSB of the reference";
  EXPECT_GE(same, 2 * pixels * cs.k * 99 / 100) << "fewer than 99% identical";
  EXPECT_EQ(untouched, pixels * (out_ld - cs.k)) << "written outside the layer's channels";
}

// halo3x3s2_i8_c32 (YOLOv5's second layer, 3x3 stride 2 over 32 channels). The ConvInt8 suite runs it on small
// shapes (strips of one row); here the first image is tall enough that each warp sweeps strips of several rows (the
// ring's slots reused), and odd sizes put the last windows' bottom row and right column outside the image.
TEST(ConvWarpKernels, HaloS2SiluMatchesReference) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  expect_warp_conv_silu("halo3x3s2_i8_c32", test::ConvCase{8, 32, 799, 256, 16, 3, 3, 2, 1}, 32);
  expect_warp_conv_silu("halo3x3s2_i8_c32", test::ConvCase{3, 32, 200, 127, 64, 3, 3, 2, 1}, 48);
}

// The pointwise ones (pw_i8_*): enough pixels that each warp streams a run of several tiles past the ring's 4 slots
// (one wave of warps: 2,112 on an H100 or H200, a run of 11 tiles in the first case), runs whose last tile is
// partial, and an input slice of a wider tensor.
TEST(ConvWarpKernels, PointwiseSiluMatchesReference) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  expect_warp_conv_silu("pw_i8_c32_n32", test::ConvCase{16, 32, 160, 160, 32, 1, 1, 1, 0}, 64);
  expect_warp_conv_silu("pw_i8_c32_n32", test::ConvCase{3, 32, 37, 41, 24, 1, 1, 1, 0}, 32);
  expect_warp_conv_silu("pw_i8_c64_n64", test::ConvCase{16, 64, 206, 206, 48, 1, 1, 1, 0}, 128);
  expect_warp_conv_silu("pw_i8_c64_n64", test::ConvCase{3, 64, 37, 41, 64, 1, 1, 1, 0}, 64);
  expect_warp_conv_silu("pw_i8_c64_n128", test::ConvCase{2, 64, 30, 50, 128, 1, 1, 1, 0}, 128);
  expect_warp_conv_silu("pw_i8_c128_n128", test::ConvCase{4, 128, 80, 80, 96, 1, 1, 1, 0}, 128);
}

}  // namespace
}  // namespace qd
