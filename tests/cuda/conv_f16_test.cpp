// Every fp16 tile configuration of the fused tensor-core convolution (the builder times them and keeps one per layer,
// so the whole-model tests see only the winners) against the reference backend's fp32 Conv: fp16-exact inputs and
// weights, fp32 accumulation, the NCHW fp32 output within 1e-4 of the output range and the NHWC fp16 output within
// fp16 rounding of it; split-K too where the configuration allows it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cuda/device.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/conv.h"
#include "core/half.h"
#include "ops/op.h"
#include "cuda/conv_case.h"
#include "cuda/gpu_test.h"
#include "test_util.h"

namespace qd {
namespace {

using Case = test::ConvCase;

class ConvF16 : public ::testing::TestWithParam<Case> {};

TEST_P(ConvF16, EveryConfigurationMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const Case cs = GetParam();
  std::mt19937 rng(cs.c * 17 + cs.k);
  std::uniform_real_distribution<float> ux(-1.f, 1.f);
  const float ws = 1.f / std::sqrt(static_cast<float>(cs.c * cs.r * cs.s));
  std::uniform_real_distribution<float> uw(-ws, ws);
  auto fp16 = [](float v) { return half_to_float(float_to_half(v)); };
  Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}), w(DType::kFloat32, {cs.k, cs.c, cs.r, cs.s}),
      b(DType::kFloat32, {cs.k});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = fp16(ux(rng));
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = fp16(uw(rng));
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = ux(rng);

  Node node{"conv", OpType::Conv, 13, {}, {0, 1, 2}, {3}};
  node.attrs.set("kernel_shape", std::vector<int64_t>{cs.r, cs.s});
  node.attrs.set("strides", std::vector<int64_t>{cs.stride, cs.stride});
  node.attrs.set("pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad});
  InferCtx ctx(node, {DType::kFloat32, DType::kFloat32, DType::kFloat32}, {x.shape(), w.shape(), b.shape()},
               {&x, &w, &b});
  ASSERT_TRUE(infer_node(ctx).is_ok());
  auto ref = run_node(ctx, {&x, &w, &b});
  ASSERT_TRUE(ref) << ref.status().to_string();
  const Tensor& want = (*ref)[0];
  const int oh = static_cast<int>(want.shape()[2]), ow = static_cast<int>(want.shape()[3]);
  double range = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) range = std::max(range, std::fabs(static_cast<double>(want.data<float>()[i])));

  // Device layouts: NHWC fp16 input with channels padded to 8, weights [K][R][S][Cp] with rows padded to 32.
  const int cp = (cs.c + 7) / 8 * 8, kp = (cs.r * cs.s * cp + 31) / 32 * 32;
  auto to_half = [](float v) { return float_to_half(v); };
  const std::vector<uint16_t> x_nhwc = test::to_nhwc<uint16_t>(cs, cp, x.data<float>(), to_half);
  const std::vector<uint16_t> w_pack = test::to_krsc<uint16_t>(cs, cp, kp, w.data<float>(), to_half);
  cuda::DeviceBuffer dx, dw, db, dy;
  ASSERT_TRUE(dx.upload(x_nhwc).is_ok() && dw.upload(w_pack).is_ok() &&
              db.upload(b.data<float>(), b.nbytes()).is_ok());
  const int64_t m_total = static_cast<int64_t>(cs.n) * oh * ow;
  ASSERT_TRUE(dy.alloc(m_total * cs.k * 4).is_ok());

  cuda::ConvParams p = test::conv_params(cs, cp, kp, oh, ow);
  cuda::ConvArgs a;
  a.x = dx.get();
  a.w = dw.get();
  a.bias = static_cast<const float*>(db.get());
  a.y = dy.get();
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  int tested = 0;
  for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) {
    p.splits = 1;
    if (cuda::conv_igemm_config_int8(cfg) || !cuda::conv_igemm_config_fits(cfg, p)) continue;
    ++tested;
    const std::string name = cuda::conv_igemm_config_name(cfg);
    // Split-K through a workspace and inside a cluster.
    for (const auto& [splits, cluster] : std::vector<std::pair<int, bool>>{{1, false}, {3, false}, {3, true}}) {
      p.out_format = cuda::OutFormat::kNchwF32;
      p.splits = splits;
      p.split_in_cluster = cluster;
      if (!cuda::conv_igemm_config_fits(cfg, p)) continue;  // special-purpose ones (the stem's) fit few shapes
      cuda::DeviceBuffer wsb;
      if (cuda::conv_igemm_workspace(p) > 0) {
        ASSERT_TRUE(wsb.alloc(cuda::conv_igemm_workspace(p)).is_ok());
      }
      a.workspace = static_cast<float*>(wsb.get());
      ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok()) << name;
      std::vector<float> y(m_total * cs.k);
      ASSERT_EQ(cudaMemcpy(y.data(), dy.get(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      double err = 0;
      for (int64_t i = 0; i < want.numel(); ++i) err = std::max(err, std::fabs(double{y[i]} - want.data<float>()[i]));
      EXPECT_LE(err, 1e-4 * range) << name << " split-K " << splits << (cluster ? " in a cluster" : "")
                                   << ": max |diff| " << err;
    }
    p.splits = 1;
    p.split_in_cluster = false;
    a.workspace = nullptr;
    // NHWC fp16 output (the half2 stores of the epilogue).
    p.out_format = cuda::OutFormat::kNhwcF16;
    p.out_ld = cs.k;
    ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok()) << name;
    std::vector<uint16_t> yh(m_total * cs.k);
    ASSERT_EQ(cudaMemcpy(yh.data(), dy.get(), yh.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    double err = 0;
    for (int n = 0; n < cs.n; ++n)
      for (int k = 0; k < cs.k; ++k)
        for (int pix = 0; pix < oh * ow; ++pix) {
          const double got = half_to_float(yh[(static_cast<int64_t>(n) * oh * ow + pix) * cs.k + k]);
          err = std::max(err, std::fabs(got - want.data<float>()[(static_cast<int64_t>(n) * cs.k + k) * oh * ow + pix]));
        }
    EXPECT_LE(err, 1e-3 * range) << name << " NHWC fp16: max |diff| " << err;
  }
  EXPECT_GE(tested, 10);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvF16,
                         ::testing::Values(Case{1, 24, 17, 13, 40, 3, 3, 2, 1}, Case{2, 64, 20, 20, 72, 1, 1, 1, 0},
                                           Case{1, 3, 18, 22, 32, 6, 6, 2, 2},
                                           // the space-to-depth stem's shape: stem_halo_f16 runs too
                                           Case{2, 12, 6, 128, 32, 3, 3, 1, 1}, Case{1, 16, 3, 64, 16, 3, 3, 1, 1},
                                           // enough of it that each stem block sweeps several rows
                                           Case{16, 12, 64, 256, 32, 3, 3, 1, 1},
                                           // enough M tiles that blocks run several each (grids of one wave)
                                           Case{8, 16, 112, 112, 32, 3, 3, 1, 1},
                                           // pointwise (no divisions in the row addressing), over 32 M tiles of
                                           // 32 rows per SM: several per block in every configuration
                                           Case{16, 64, 96, 96, 64, 1, 1, 1, 0},
                                           // 36 K tiles (the pipelines wrap around their stages many times), 256
                                           // output channels (one 256-wide N tile), a partial M tile
                                           Case{1, 128, 10, 10, 256, 3, 3, 1, 1},
                                           // thin 3x3 layers: halo3x3_f16_c32 runs too (several strips of rows)
                                           Case{4, 32, 40, 64, 32, 3, 3, 1, 1}, Case{1, 32, 5, 96, 24, 3, 3, 1, 1}));

// On Hopper the binary built for sm_90a runs the wgmma configurations: the tests above cover them only if they are
// offered, so a probe that fails (a build without 90a, a driver that loads the sm_90 code) fails here.
TEST(ConvIgemm, WgmmaOnHopper) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  int dev = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), cudaSuccess);
  if (major != 9 || minor != 0) GTEST_SKIP() << "not an sm_90 device";
  EXPECT_TRUE(cuda::conv_igemm_wgmma());
}

}  // namespace
}  // namespace qd
