// The INT8 tensor-core convolution against the reference backend's INT8 arithmetic: int32 accumulation as the
// reference's ConvInteger computes it, then y = acc * (s_x * s_w[k]) + bias[k] in fp32 (Mul, then Add), optionally
// requantized with round-half-even. Every INT8 tile configuration, several shapes; reports the share of elements
// within +-1 LSB (the contract) and of exact matches.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

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

using Case = test::ConvCase;

class ConvInt8 : public ::testing::TestWithParam<Case> {};

TEST_P(ConvInt8, MatchesReferenceInt8) {
  SKIP_WITHOUT_GPU();
  const Case cs = GetParam();
  std::mt19937 rng(cs.c * 131 + cs.k);
  std::uniform_int_distribution<int> qd8(-128, 127), qw8(-127, 127);
  // Quantized input and weights, as the reference's QuantizeLinear would give them.
  Tensor xq(DType::kInt8, {cs.n, cs.c, cs.h, cs.w}), wq(DType::kInt8, {cs.k, cs.c, cs.r, cs.s});
  for (int64_t i = 0; i < xq.numel(); ++i) xq.data<int8_t>()[i] = static_cast<int8_t>(qd8(rng));
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(qw8(rng));
  const float sx = 0.0213f;
  std::vector<float> alpha(cs.k), bias(cs.k);
  std::uniform_real_distribution<float> u(0.5f, 2.f), ub(-1.f, 1.f);
  for (int k = 0; k < cs.k; ++k) {
    alpha[k] = sx * (u(rng) / 127.f);  // s_x * s_w[k], one float multiply as the builder does
    bias[k] = ub(rng);
  }

  // Reference: ConvInteger (int32 accumulation) from the reference backend.
  Node node{"conv", OpType::ConvInteger, 10, {}, {0, 1}, {2}};
  node.attrs.set("kernel_shape", std::vector<int64_t>{cs.r, cs.s});
  node.attrs.set("strides", std::vector<int64_t>{cs.stride, cs.stride});
  node.attrs.set("pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad});
  InferCtx ctx(node, {DType::kInt8, DType::kInt8}, {xq.shape(), wq.shape()}, {&xq, &wq});
  ASSERT_TRUE(infer_node(ctx).is_ok());
  auto ref = run_node(ctx, {&xq, &wq});
  ASSERT_TRUE(ref) << ref.status().to_string();
  const Tensor& acc = (*ref)[0];
  const int oh = static_cast<int>(acc.shape()[2]), ow = static_cast<int>(acc.shape()[3]);

  // Device layouts: NHWC input with channels padded to 16, weights [K][R][S][Cp] with rows padded to 64.
  const int cp = (cs.c + 15) / 16 * 16, kp = (cs.r * cs.s * cp + 63) / 64 * 64;
  auto same = [](int8_t v) { return v; };
  const std::vector<int8_t> x_nhwc = test::to_nhwc<int8_t>(cs, cp, xq.data<int8_t>(), same);
  const std::vector<int8_t> w_pack = test::to_krsc<int8_t>(cs, cp, kp, wq.data<int8_t>(), same);
  cuda::DeviceBuffer dx, dw, da, db, dy;
  ASSERT_TRUE(dx.upload(x_nhwc).is_ok() && dw.upload(w_pack).is_ok() && da.upload(alpha).is_ok() &&
              db.upload(bias).is_ok());
  const int64_t m_total = static_cast<int64_t>(cs.n) * oh * ow;
  ASSERT_TRUE(dy.alloc(m_total * cs.k * 4).is_ok());

  cuda::ConvParams p = test::conv_params(cs, cp, kp, oh, ow);
  cuda::ConvArgs a;
  a.x = dx.get();
  a.w = dw.get();
  a.alpha = static_cast<const float*>(da.get());
  a.bias = static_cast<const float*>(db.get());
  a.y = dy.get();
  const float sy = 0.05f;
  // f(k, i, j, y) for every output: its channel k, NCHW index i and NHWC index j, and y = acc * alpha + bias as the
  // builder computes it.
  auto for_each_output = [&](auto f) {
    for (int n = 0; n < cs.n; ++n)
      for (int k = 0; k < cs.k; ++k)
        for (int pix = 0; pix < oh * ow; ++pix) {
          const int64_t i = (static_cast<int64_t>(n) * cs.k + k) * oh * ow + pix;
          const int64_t j = (static_cast<int64_t>(n) * oh * ow + pix) * cs.k + k;
          f(k, i, j, static_cast<float>(acc.data<int32_t>()[i]) * alpha[k] + bias[k]);
        }
  };
  // Counts the int8 NHWC outputs yq within 1 LSB of, and equal to, the reference's: act(y, j) quantized with sy, act
  // computed as the reference does (SiLU: silu_ref below).
  auto compare_int8 = [&](const std::vector<int8_t>& yq, auto act, int64_t* within, int64_t* same) {
    for_each_output([&](int, int64_t, int64_t j, float y) {
      const int want = ops::quantize_value(act(y, j), sy, 0, -128, 127);
      *within += std::abs(yq[j] - want) <= 1;
      *same += yq[j] == want;
    });
  };
  // The reference's SiLU of every output (its Sigmoid in double, then the Mul in float), by NHWC index: computed
  // once, for the variants below that every configuration runs.
  std::vector<float> silu_ref(m_total * cs.k);
  for_each_output([&](int, int64_t, int64_t j, float y) {
    silu_ref[j] = y * static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(y))));
  });
  ASSERT_TRUE(cuda::conv_igemm_init().is_ok());
  int tested = 0, clusters_tested = 0, small_tested = 0, lean_tested = 0, heads_tested = 0, staged_tested = 0;
  for (int cfg = 0; cfg < cuda::conv_igemm_configs(); ++cfg) {
    p.splits = 1;
    if (!cuda::conv_igemm_config_int8(cfg) || !cuda::conv_igemm_config_fits(cfg, p)) continue;
    ++tested;
    // fp32 NCHW output: the same float operations as the reference's Mul and Add, so bit-exact; with split-K too
    // (int32 partial sums add up to the same accumulator), through a workspace or inside a cluster.
    for (const auto& [splits, cluster] : std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {3, false},
                                                                          {2, true}, {3, true}}) {
      p.out_format = cuda::OutFormat::kNchwF32;
      p.splits = splits;
      p.split_in_cluster = cluster;
      if (!cuda::conv_igemm_config_fits(cfg, p)) continue;  // special-purpose ones (the stem's) fit few shapes
      cuda::DeviceBuffer ws;
      if (cuda::conv_igemm_workspace(p) > 0) {
        ASSERT_TRUE(ws.alloc(cuda::conv_igemm_workspace(p)).is_ok());
      }
      a.workspace = static_cast<float*>(ws.get());
      ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
      std::vector<float> yf(m_total * cs.k);
      ASSERT_EQ(cudaMemcpy(yf.data(), dy.get(), yf.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      int64_t exact = 0;
      for_each_output([&](int, int64_t i, int64_t, float y) { exact += yf[i] == y; });
      EXPECT_EQ(exact, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " split-K " << splits
                                    << (cluster ? " in a cluster" : "") << ": fp32 output not bit-exact";
      clusters_tested += cluster;
    }
    p.splits = 1;
    p.split_in_cluster = false;
    a.workspace = nullptr;
    // A detection head's epilogue: Sigmoid into fp32 NCHW (through shared memory where the tile stages, in the
    // configuration's lean head copy: conv_igemm_config_lean), within the fast sigmoid's error of the exact one.
    p.act = cuda::Act::kSigmoid;
    ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
    {
      std::vector<float> ys(m_total * cs.k);
      ASSERT_EQ(cudaMemcpy(ys.data(), dy.get(), ys.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      double worst = 0;
      for_each_output([&](int, int64_t i, int64_t, float y) {
        worst = std::max(worst, std::fabs(ys[i] - 1.0 / (1.0 + std::exp(-static_cast<double>(y)))));
      });
      EXPECT_LE(worst, 2e-6) << cuda::conv_igemm_config_name(cfg) << ": Sigmoid NCHW output";
      heads_tested += cuda::conv_igemm_config_lean(cfg, p, a);
    }
    p.act = cuda::Act::kNone;
    // int8 NHWC output, requantized with scale sy: within +-1 LSB everywhere (exact unless a tie rounds otherwise),
    // with the dequantized copy q * sy in fp16 beside it (what the tensor's non-INT8 readers take).
    p.out_format = cuda::OutFormat::kNhwcI8;
    p.out_ld = p.out2_ld = cs.k;
    p.out_scale = sy;
    cuda::DeviceBuffer dy2;
    ASSERT_TRUE(dy2.alloc(m_total * cs.k * 2).is_ok());
    a.y2 = dy2.get();
    p.out2_format = cuda::Out2Format::kF16;
    p.out2_of_q = true;
    ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
    a.y2 = nullptr;
    p.out2_of_q = false;
    std::vector<int8_t> yq(m_total * cs.k);
    std::vector<uint16_t> ydq(m_total * cs.k);
    ASSERT_EQ(cudaMemcpy(yq.data(), dy.get(), yq.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ydq.data(), dy2.get(), ydq.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t dq_ok = 0;
    for (size_t i = 0; i < yq.size(); ++i) dq_ok += ydq[i] == float_to_half(static_cast<float>(yq[i]) * sy);
    EXPECT_EQ(dq_ok, static_cast<int64_t>(yq.size())) << "the dequantized copy is q * scale in fp16";
    int64_t within = 0, same = 0;
    compare_int8(yq, [](float y, int64_t) { return y; }, &within, &same);
    std::cout << cuda::conv_igemm_config_name(cfg) << " " << cs.c << "->" << cs.k << " " << cs.r << "x" << cs.s
              << ": int8 output exact " << 100.0 * same / acc.numel() << "%, within 1 LSB "
              << 100.0 * within / acc.numel() << "%\n";
    EXPECT_EQ(within, acc.numel());

    // SiLU with an int8 output, bit-exact mode: identical to the reference's (its Sigmoid in double, then the Mul, then
    // the quantization) where the epilogue recomputes the values near a rounding tie (ConvParams::exact_silu: the staged
    // epilogue, split-K's); within +-1 LSB in the register epilogue (tiles too large to stage, K % 8 != 0).
    p.act = cuda::Act::kSilu;
    p.exact_silu = true;
    for (const auto& [splits, cluster] : std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {2, true}}) {
      p.splits = splits;
      p.split_in_cluster = cluster;
      if (!cuda::conv_igemm_config_fits(cfg, p)) continue;
      cuda::DeviceBuffer ws;
      if (cuda::conv_igemm_workspace(p) > 0) {
        ASSERT_TRUE(ws.alloc(cuda::conv_igemm_workspace(p)).is_ok());
      }
      a.workspace = static_cast<float*>(ws.get());
      ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
      ASSERT_EQ(cudaMemcpy(yq.data(), dy.get(), yq.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      int64_t silu_within = 0, silu_same = 0;
      compare_int8(yq, [&](float, int64_t j) { return silu_ref[j]; }, &silu_within, &silu_same);
      // A cluster's split ends in the block's own epilogue; a workspace's in conv_splitk_epilogue.
      const bool exact_path = (splits > 1 && !cluster) || (cuda::conv_igemm_config_staged(cfg) && cs.k % 8 == 0);
      std::cout << "  SiLU, split-K " << splits << ": " << acc.numel() - silu_same << " of " << acc.numel()
                << " differ\n";
      if (exact_path) {
        EXPECT_EQ(silu_same, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " SiLU, split-K " << splits;
      } else {
        EXPECT_EQ(silu_within, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " SiLU, split-K " << splits;
      }
    }
    p.act = cuda::Act::kNone;
    p.exact_silu = false;
    p.splits = 1;
    p.split_in_cluster = false;
    a.workspace = nullptr;

    // An int8 residual, read as q_r * s_r in fp32, and a second output with its own format: (1) an fp32 NCHW output,
    // bit-exact, and an int8 second output quantized with its own scale from the value (a tensor that two Concats
    // with different scales read), within +-1 LSB; (2) an int8 NHWC output (two channels per store when K is even)
    // and the value in fp16 as the second output, which must be the fp32 value rounded to fp16.
    const float sr = 0.02f, sy2 = 0.0371f;
    std::vector<int8_t> rq(m_total * cs.k);  // NHWC, cs.k channels per pixel
    for (size_t i = 0; i < rq.size(); ++i) rq[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
    cuda::DeviceBuffer dr, dy2b;
    ASSERT_TRUE(dr.upload(rq).is_ok() && dy2b.alloc(rq.size() * 2).is_ok());
    p.res_ld = cs.k;
    p.res_scale = sr;
    a.residual_i8 = static_cast<const int8_t*>(dr.get());
    a.y2 = dy2b.get();
    for (const bool nhwc_i8 : {false, true}) {
      p.out_format = nhwc_i8 ? cuda::OutFormat::kNhwcI8 : cuda::OutFormat::kNchwF32;
      p.out2_format = nhwc_i8 ? cuda::Out2Format::kF16 : cuda::Out2Format::kI8;
      p.out2_scale = sy2;
      ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
      std::vector<float> yf(m_total * cs.k);
      std::vector<int8_t> yq8(m_total * cs.k);
      std::vector<uint16_t> y2(m_total * cs.k);  // int8 in its low bytes' worth, or fp16
      ASSERT_EQ(cudaMemcpy(nhwc_i8 ? static_cast<void*>(yq8.data()) : yf.data(), dy.get(),
                           nhwc_i8 ? yq8.size() : yf.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(y2.data(), dy2b.get(), nhwc_i8 ? y2.size() * 2 : y2.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      const auto* y2q = reinterpret_cast<const int8_t*>(y2.data());
      int64_t exact = 0, within = 0;
      for_each_output([&](int, int64_t i, int64_t j, float y) {
        const float v = y + static_cast<float>(rq[j]) * sr;
        if (nhwc_i8) {
          exact += y2[j] == float_to_half(v);
          within += std::abs(yq8[j] - ops::quantize_value(v, sy, 0, -128, 127)) <= 1;
        } else {
          exact += yf[i] == v;
          within += std::abs(y2q[j] - ops::quantize_value(v, sy2, 0, -128, 127)) <= 1;
        }
      });
      EXPECT_EQ(exact, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " int8 residual, "
                                    << (nhwc_i8 ? "fp16 second output" : "fp32 output") << " not exact";
      EXPECT_EQ(within, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " int8 residual, "
                                     << (nhwc_i8 ? "int8 output" : "int8 second output");
    }
    a.residual_i8 = nullptr;
    a.y2 = nullptr;
    p.out2_format = cuda::Out2Format::kF16;

    // The quad-transposed register epilogue (int8 NHWC outputs without a second output, outside the bit-exact mode,
    // K a multiple of 8): the integers of the epilogue it replaces (ConvParams::no_quad_epilogue), the staged one's
    // exactly (the same reciprocal rounding), the register one's within 1 LSB (an exact division), and within 1 LSB
    // of the reference's. Five variants: plain; SiLU and an int8 residual; an fp16 residual; SiLU and two output
    // scales (merged sibling convs, ConvParams::out_split); SiLU with a scale so small that its minimum saturates at
    // -128 (YOLOv5s' random-weight benchmark has such scales). Where the weights allow (int8_acc_bound), the
    // accumulators converted without I2F (ConvParams::small_acc): the same integers as with it; with SiLU that is the
    // usual INT8 layer, which runs the configuration's lean kernel (conv_igemm_config_lean) against the full one's
    // quad epilogue with I2F; without the quad epilogue, SiLU takes the staged one's copy where the tile stages.
    std::vector<uint16_t> rh(rq.size());
    for (size_t i = 0; i < rh.size(); ++i) rh[i] = float_to_half(static_cast<float>(static_cast<int>(i * 53 % 97) - 48) / 16);
    cuda::DeviceBuffer drh;
    ASSERT_TRUE(drh.upload(rh).is_ok());
    p.out_format = cuda::OutFormat::kNhwcI8;
    const float sy_hi = 0.0917f;
    const int split = cs.k / 2 / 8 * 8;
    const bool small = cuda::int8_acc_bound(wq.data<int8_t>(), cs.k, cs.c * cs.r * cs.s) < cuda::kSmallAccLimit;
    small_tested += small;
    for (int variant = 0; variant < 5; ++variant) {
      if (variant == 3 && split == 0) continue;
      p.act = variant % 2 || variant == 4 ? cuda::Act::kSilu : cuda::Act::kNone;
      p.out_scale = variant == 4 ? 0.001f : sy;
      a.residual_i8 = variant == 1 ? static_cast<const int8_t*>(dr.get()) : nullptr;
      a.residual = variant == 2 ? static_cast<const __half*>(drh.get()) : nullptr;
      p.out_split = variant == 3 ? split : INT_MAX;
      p.out_scale_hi = sy_hi;
      if (!cuda::conv_igemm_config_fits(cfg, p)) continue;  // the halo ones take one output scale
      std::vector<int8_t> got[3];  // quad epilogue, the other, and (small) the quad one with I2F
      for (int run = 0; run < (small ? 3 : 2); ++run) {
        p.no_quad_epilogue = run == 1;
        p.small_acc = small && run < 2;
        (run == 1 ? staged_tested : lean_tested) += cuda::conv_igemm_config_lean(cfg, p, a);
        EXPECT_FALSE(run == 2 && cuda::conv_igemm_config_lean(cfg, p, a)) << "I2F run took the lean kernel";
        ASSERT_TRUE(cuda::launch_conv_igemm(p, a, cfg, nullptr).is_ok());
        got[run].resize(m_total * cs.k);
        ASSERT_EQ(cudaMemcpy(got[run].data(), dy.get(), got[run].size(), cudaMemcpyDeviceToHost), cudaSuccess);
      }
      p.no_quad_epilogue = false;
      p.small_acc = false;
      if (small) {
        EXPECT_EQ(got[0], got[2]) << cuda::conv_igemm_config_name(cfg) << " variant " << variant
                                  << ": the accumulators' conversion without I2F changed the output";
      }
      int64_t apart = 0, within = 0;
      for_each_output([&](int k, int64_t, int64_t j, float v) {
        if (p.act == cuda::Act::kSilu) v = silu_ref[j];
        if (variant == 1) v += static_cast<float>(rq[j]) * sr;
        if (variant == 2) v += half_to_float(rh[j]);
        const int want = ops::quantize_value(v, k < p.out_split ? p.out_scale : sy_hi, 0, -128, 127);
        within += std::abs(got[0][j] - want) <= 1;
        apart += cuda::conv_igemm_config_staged(cfg) ? got[0][j] != got[1][j] : std::abs(got[0][j] - got[1][j]) > 1;
      });
      EXPECT_EQ(apart, 0) << cuda::conv_igemm_config_name(cfg) << " variant " << variant
                          << ": the quad epilogue's integers differ from the other epilogue's";
      EXPECT_EQ(within, acc.numel()) << cuda::conv_igemm_config_name(cfg) << " variant " << variant
                                     << ": beyond 1 LSB of the reference";
    }
    p.act = cuda::Act::kNone;
    p.out_split = INT_MAX;
    p.out_scale = sy;
    a.residual_i8 = nullptr;
    a.residual = nullptr;
  }
  EXPECT_GT(tested, 0);
  // The shapes with up to 432 weights per output take the conversion without I2F; from 576 on (63.5 on average,
  // times 128) they pass 2^22.
  EXPECT_EQ(small_tested > 0, cs.c * cs.r * cs.s <= 432) << "int8_acc_bound " << cs.c << "x" << cs.r << "x" << cs.s;
  if (small_tested > 0 && cs.k % 8 == 0) {  // the quad epilogue's K
    EXPECT_GT(lean_tested, 0) << "no configuration ran its lean kernel";
  }
  if (cuda::conv_igemm_wgmma() && static_cast<int64_t>(oh) * ow % 8 == 0) {
    EXPECT_GT(heads_tested, 0) << "no configuration ran its lean head copy";
    if (lean_tested > 0) {
      EXPECT_GT(staged_tested, 0) << "no configuration ran its staged epilogue's copy";
    }
  }
  if (cuda::conv_igemm_wgmma()) {
    EXPECT_GT(clusters_tested, 0) << "no configuration split K in a cluster";
  }
}

// int8_acc_bound: 128 times the largest sum of |w| over an output channel's weights (the sign of each and the order
// within the row do not matter), which decides ConvParams::small_acc.
TEST(ConvInt8AccBound, LargestRowSumTimes128) {
  const std::vector<int8_t> w = {1, -2, 3, 0,  //
                                 -127, 127, -127, 0,
                                 5, 5, -5, -5};
  EXPECT_EQ(cuda::int8_acc_bound(w.data(), 3, 4), 128 * 381);
  EXPECT_EQ(cuda::int8_acc_bound(w.data(), 1, 4), 128 * 6);
  EXPECT_EQ(cuda::int8_acc_bound(w.data(), 0, 4), 0);
  // The limit, 2^22 = 128 * 32768: 258 weights of magnitude 127 (32766) stay under it, 259 do not.
  const std::vector<int8_t> full(258, -127), over(259, 127);
  EXPECT_LT(cuda::int8_acc_bound(full.data(), 1, 258), cuda::kSmallAccLimit);
  EXPECT_GE(cuda::int8_acc_bound(over.data(), 1, 259), cuda::kSmallAccLimit);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvInt8,
                         ::testing::Values(Case{1, 16, 12, 12, 32, 3, 3, 1, 1}, Case{2, 3, 17, 13, 32, 6, 6, 2, 2},
                                           Case{1, 64, 20, 20, 128, 1, 1, 1, 0}, Case{2, 48, 9, 11, 40, 3, 3, 2, 1},
                                           Case{1, 256, 10, 10, 255, 1, 1, 1, 0},
                                           // the space-to-depth stem's shape: stem_halo_i8 runs too
                                           Case{2, 12, 6, 128, 32, 3, 3, 1, 1}, Case{1, 16, 3, 64, 16, 3, 3, 1, 1},
                                           // enough of it that each stem block sweeps several rows
                                           Case{16, 12, 64, 256, 32, 3, 3, 1, 1},
                                           // enough M tiles that blocks run several each (grids of one wave)
                                           Case{8, 16, 112, 112, 32, 3, 3, 1, 1},
                                           // pointwise (no divisions in the row addressing), over 32 M tiles of
                                           // 32 rows per SM: several per block in every configuration
                                           Case{16, 64, 96, 96, 64, 1, 1, 1, 0},
                                           // 18 K tiles, a partial M tile
                                           Case{1, 128, 10, 10, 128, 3, 3, 1, 1},
                                           // thin 3x3 layers: halo3x3_i8_c32 runs too (several strips of rows)
                                           Case{4, 32, 40, 64, 32, 3, 3, 1, 1}, Case{1, 32, 5, 96, 24, 3, 3, 1, 1},
                                           // YOLOv5's second layer: halo3x3s2_i8_c32 runs too (odd sizes: the last
                                           // windows' bottom row and right column outside the image)
                                           Case{2, 32, 33, 63, 40, 3, 3, 2, 1},
                                           // pointwise ones that pw_i8_* run too (partial last tiles)
                                           Case{2, 64, 24, 40, 48, 1, 1, 1, 0}, Case{3, 128, 11, 13, 96, 1, 1, 1, 0},
                                           Case{2, 32, 21, 30, 24, 1, 1, 1, 0},
                                           // the TMA kernels' (channels whole K tiles of 64 or 128): strided and
                                           // not square, so that the im2col map's corners and strides are checked
                                           Case{2, 64, 9, 13, 64, 3, 3, 2, 1}, Case{3, 128, 7, 11, 64, 3, 3, 1, 1},
                                           // and one whose weights are few enough for small accumulators, so that
                                           // the TMA kernels' lean copies run (128-byte K tiles too)
                                           Case{4, 128, 18, 26, 128, 1, 1, 2, 0}));

}  // namespace
}  // namespace qd
