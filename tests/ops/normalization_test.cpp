// BatchNormalization, InstanceNormalization (and PyTorch's GroupNorm export pattern), LayerNormalization,
// MeanVarianceNormalization, LRN: values, optional outputs, and errors for bad parameters.
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"
#include "test_util.h"

namespace qd {
namespace {

using test::run_op;
using test::tensor_f32;
using test::values;

void expect_code(const Expected<std::vector<Tensor>>& r, StatusCode code, const std::string& fragment) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find(fragment), std::string::npos) << r.status().to_string();
}

// ---- BatchNormalization ----

std::vector<Tensor> bn_inputs(const Tensor& x) {
  return {x, tensor_f32({2}, {1, 2}), tensor_f32({2}, {0, 10}), tensor_f32({2}, {1, -1}), tensor_f32({2}, {4, 0.25f})};
}

TEST(BatchNormalization, Inference) {
  AttrMap eps;
  eps.set("epsilon", 0.0f);
  // c0: (x - 1) / 2 * 1 + 0; c1: (x + 1) / 0.5 * 2 + 10.
  auto y = run_op(OpType::BatchNormalization, eps, bn_inputs(tensor_f32({1, 2, 2}, {1, 3, -1, 0})), 1, 15);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 1, 10, 14}));
  // Rank 2 ([N, C]) works too.
  y = run_op(OpType::BatchNormalization, eps, bn_inputs(tensor_f32({2, 2}, {1, -1, 3, 0})), 1, 15);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{0, 10, 1, 14}));
}

TEST(BatchNormalization, PerActivationOpset7) {
  AttrMap a;
  a.set("spatial", int64_t{0});
  a.set("epsilon", 0.0f);
  const Tensor ones = tensor_f32({1, 2}, {1, 1});
  const Tensor zeros = tensor_f32({1, 2}, {0, 0});
  auto y = run_op(OpType::BatchNormalization, a,
                  {tensor_f32({1, 1, 2}, {5, 6}), ones, zeros, tensor_f32({1, 2}, {1, 2}), ones}, 1, 7);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{4, 4}));
}

TEST(BatchNormalizationErrors, TrainingAndShapes) {
  const Tensor x = tensor_f32({1, 2, 2}, {1, 3, -1, 0});
  AttrMap train;
  train.set("training_mode", int64_t{1});
  expect_code(run_op(OpType::BatchNormalization, train, bn_inputs(x), 1, 15), StatusCode::kUnsupported, "training_mode=1");
  expect_code(run_op(OpType::BatchNormalization, {}, bn_inputs(x), 5, 9), StatusCode::kUnsupported, "training mode");
  std::vector<Tensor> bad = bn_inputs(x);
  bad[3] = tensor_f32({3}, {0, 0, 0});
  expect_code(run_op(OpType::BatchNormalization, {}, bad, 1, 15), StatusCode::kInvalidArgument, "input_mean must have shape [2]");
  AttrMap neg;
  neg.set("epsilon", -1.0f);
  expect_code(run_op(OpType::BatchNormalization, neg, bn_inputs(x), 1, 15), StatusCode::kInvalidArgument, "epsilon");
  expect_code(run_op(OpType::BatchNormalization, {}, bn_inputs(tensor_f32({2}, {1, 2})), 1, 15),
              StatusCode::kInvalidArgument, "rank >= 2");
}

// ---- InstanceNormalization and the GroupNorm export pattern ----

TEST(InstanceNormalization, PerPlaneStatistics) {
  AttrMap eps;
  eps.set("epsilon", 0.0f);
  auto y = run_op(OpType::InstanceNormalization, eps,
                  {tensor_f32({1, 2, 2}, {1, 3, 5, 7}), tensor_f32({2}, {2, 1}), tensor_f32({2}, {0, 7})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-2, 2, 6, 8}));  // both planes: mean +- 1
}

// GroupNorm(G) of x [N, C, H, W] computed directly, for comparison.
std::vector<float> group_norm_direct(const Tensor& x, int64_t groups, const std::vector<float>& gamma,
                                     const std::vector<float>& beta, double eps) {
  const Shape& s = x.shape();
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3], per = c / groups * hw;
  std::vector<float> out(static_cast<size_t>(x.numel()));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* p = x.data<float>() + (b * groups + g) * per;
      double m = 0, v = 0;
      for (int64_t i = 0; i < per; ++i) m += p[i];
      m /= per;
      for (int64_t i = 0; i < per; ++i) v += (p[i] - m) * (p[i] - m);
      v /= per;
      for (int64_t i = 0; i < per; ++i) {
        const int64_t ch = g * (c / groups) + i / hw;
        out[(b * groups + g) * per + i] = static_cast<float>((p[i] - m) / std::sqrt(v + eps) * gamma[ch] + beta[ch]);
      }
    }
  }
  return out;
}

TEST(InstanceNormalization, GroupNormExportPattern) {
  // PyTorch exports nn.GroupNorm(2, 4) as Reshape [N, G, -1] -> InstanceNormalization(ones, zeros) -> Reshape back
  // -> Mul(gamma [C,1,1]) -> Add(beta [C,1,1]).
  const Tensor x = test::random_f32({2, 4, 3, 3}, 11, -3, 3);
  const std::vector<float> gamma = {1.5f, -1.f, 0.5f, 2.f}, beta = {0.f, 1.f, -2.f, 0.25f};
  const std::vector<float> want = group_norm_direct(x, 2, gamma, beta, 1e-5);

  // The InstanceNormalization step alone, on the reshaped view.
  AttrMap eps;
  eps.set("epsilon", 1e-5f);
  auto in = run_op(OpType::InstanceNormalization, eps, {x.reshaped({2, 2, 18}), tensor_f32({2}, {1, 1}), tensor_f32({2}, {0, 0})});
  ASSERT_TRUE(in) << in.status().to_string();

  // The whole exported pattern as a graph, when the data-movement ops (Reshape) are available.
  const auto reshape = op_from_name("Reshape");
  if (!reshape) GTEST_SKIP() << "Reshape is not implemented yet; the InstanceNormalization step was checked alone";
  Graph g;
  g.opset = 17;
  auto value = [&](const std::string& name) { return g.add_value(name); };
  const int vx = value("x");
  g.values[vx].dtype = DType::kFloat32;
  g.values[vx].shape = x.shape();
  g.values[vx].has_shape = true;
  g.inputs.push_back(vx);
  auto constant = [&](const std::string& name, Tensor t) {
    const int v = value(name);
    g.constants[v] = std::move(t);
    return v;
  };
  const int s1 = constant("shape1", Tensor::from_i64({2, 2, -1}));
  const int s0 = constant("shape0", Tensor::from_i64({2, 4, 3, 3}));
  const int sc = constant("ones", tensor_f32({2}, {1, 1}));
  const int bi = constant("zeros", tensor_f32({2}, {0, 0}));
  const int ga = constant("gamma", tensor_f32({4, 1, 1}, gamma));
  const int be = constant("beta", tensor_f32({4, 1, 1}, beta));
  auto node = [&](OpType op, std::vector<int> ins, const std::string& out, AttrMap attrs = {}) {
    Node n;
    n.name = out + "_node";
    n.op = op;
    n.opset = 17;
    n.attrs = std::move(attrs);
    n.inputs = std::move(ins);
    n.outputs = {value(out)};
    g.nodes.push_back(std::move(n));
    return g.nodes.back().outputs[0];
  };
  const int r1 = node(*reshape, {vx, s1}, "r1");
  const int inn = node(OpType::InstanceNormalization, {r1, sc, bi}, "in", eps);
  const int r2 = node(*reshape, {inn, s0}, "r2");
  const int mu = node(OpType::Mul, {r2, ga}, "mul");
  const int y = node(OpType::Add, {mu, be}, "y");
  g.outputs = {y};
  g.relink();
  ASSERT_TRUE(g.verify().is_ok());
  PrepareOptions opt;
  Status st = prepare_graph(g, opt);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  auto out = run_reference(g, {{"x", x}});
  ASSERT_TRUE(out) << out.status().to_string();
  ASSERT_EQ((*out)[0].shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR((*out)[0].data<float>()[i], want[i], 1e-4) << i;
}

TEST(InstanceNormalizationErrors, ParamShapes) {
  const Tensor x = tensor_f32({1, 2, 2}, {1, 2, 3, 4});
  expect_code(run_op(OpType::InstanceNormalization, {}, {x, tensor_f32({3}, {1, 1, 1}), tensor_f32({2}, {0, 0})}),
              StatusCode::kInvalidArgument, "scale must have shape [2]");
  AttrMap nan_eps;
  nan_eps.set("epsilon", NAN);
  expect_code(run_op(OpType::InstanceNormalization, nan_eps, {x, tensor_f32({2}, {1, 1}), tensor_f32({2}, {0, 0})}),
              StatusCode::kInvalidArgument, "epsilon");
}

// ---- LayerNormalization ----

TEST(LayerNormalization, OptionalOutputsAndNoBias) {
  AttrMap a;
  a.set("axis", int64_t{1});
  a.set("epsilon", 0.0f);
  const Tensor x = tensor_f32({2, 2, 2}, {1, 1, 3, 3, 0, 0, 4, 4});
  auto y = run_op(OpType::LayerNormalization, a, {x, tensor_f32({2, 2}, {1, 1, 1, 2})}, 3);
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_EQ(values((*y)[0]), (std::vector<double>{-1, -1, 1, 2, -1, -1, 1, 2}));
  EXPECT_EQ((*y)[1].shape(), (Shape{2, 1, 1}));
  EXPECT_EQ((*y)[1].dtype(), DType::kFloat32);
  EXPECT_EQ(values((*y)[1]), (std::vector<double>{2, 2}));
  EXPECT_EQ(values((*y)[2]), (std::vector<double>{1, 0.5}));
}

TEST(LayerNormalizationErrors, AxisAndScale) {
  const Tensor x = tensor_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  AttrMap a;
  a.set("axis", int64_t{2});
  expect_code(run_op(OpType::LayerNormalization, a, {x, tensor_f32({3}, {1, 1, 1})}), StatusCode::kInvalidArgument, "");
  expect_code(run_op(OpType::LayerNormalization, {}, {x, tensor_f32({2}, {1, 1})}), StatusCode::kInvalidArgument,
              "does not broadcast");
  AttrMap st;
  st.set("stash_type", int64_t{10});
  expect_code(run_op(OpType::LayerNormalization, st, {x, tensor_f32({3}, {1, 1, 1})}), StatusCode::kUnsupported, "stash_type");
}

// ---- MeanVarianceNormalization ----

TEST(MeanVarianceNormalization, DefaultAndExplicitAxes) {
  const Tensor x = test::random_f32({2, 3, 2, 2}, 5, -2, 2);
  auto y = run_op(OpType::MeanVarianceNormalization, {}, {x});
  ASSERT_TRUE(y) << y.status().to_string();
  // Per channel over N, H, W: mean 0, std 1.
  for (int64_t c = 0; c < 3; ++c) {
    double m = 0, v = 0;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 4; ++i) m += (*y)[0].data<float>()[(b * 3 + c) * 4 + i];
    }
    m /= 8;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 4; ++i) v += std::pow((*y)[0].data<float>()[(b * 3 + c) * 4 + i] - m, 2);
    }
    EXPECT_NEAR(m, 0, 1e-6);
    EXPECT_NEAR(v / 8, 1, 1e-5);
  }
  expect_code(run_op(OpType::MeanVarianceNormalization, {}, {tensor_f32({2, 2}, {1, 2, 3, 4})}),
              StatusCode::kInvalidArgument, "default axes");
  AttrMap dup;
  dup.set("axes", std::vector<int64_t>{1, -1});
  expect_code(run_op(OpType::MeanVarianceNormalization, dup, {tensor_f32({2, 2}, {1, 2, 3, 4})}),
              StatusCode::kInvalidArgument, "twice");
}

// ---- LRN ----

TEST(LRN, AcrossChannels) {
  AttrMap a;
  a.set("size", int64_t{3});
  a.set("alpha", 3.0f);
  a.set("beta", 1.0f);
  a.set("bias", 1.0f);
  // Channel 1 sums x^2 over channels 0..2 = 1 + 4 + 9 = 14: y = 2 / (1 + 3 / 3 * 14) = 2 / 15.
  auto y = run_op(OpType::LRN, a, {tensor_f32({1, 3, 1}, {1, 2, 3})});
  ASSERT_TRUE(y) << y.status().to_string();
  EXPECT_NEAR((*y)[0].get_f64(1), 2.0 / 15, 1e-6);
  EXPECT_NEAR((*y)[0].get_f64(0), 1.0 / 6, 1e-6);   // channels 0..1: 1 + 4
  EXPECT_NEAR((*y)[0].get_f64(2), 3.0 / 14, 1e-6);  // channels 1..2: 4 + 9
  a.set("size", int64_t{0});
  expect_code(run_op(OpType::LRN, a, {tensor_f32({1, 3, 1}, {1, 2, 3})}), StatusCode::kInvalidArgument, "size must be positive");
  expect_code(run_op(OpType::LRN, {}, {tensor_f32({1, 3, 1}, {1, 2, 3})}), StatusCode::kInvalidArgument, "size attribute");
}

TEST(NormalizationConformance, OldOpsetNodeTests) {
  QD_EXPECT_NODE_TEST("node/test_instancenorm_epsilon");
  QD_EXPECT_NODE_TEST("node/test_instancenorm_example");
  for (const char* t : {"test_BatchNorm1d_3d_input_eval", "test_BatchNorm2d_eval", "test_BatchNorm2d_momentum_eval",
                        "test_BatchNorm3d_eval", "test_BatchNorm3d_momentum_eval"}) {
    QD_EXPECT_NODE_TEST(std::string("pytorch-converted/") + t);
  }
}

}  // namespace
}  // namespace qd
