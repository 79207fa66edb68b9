#include <gtest/gtest.h>

#include "quant/qdq.h"
#include "test_util.h"

namespace qd {

namespace {
// x -> Q/DQ(s_x, zero point zp: int8, or uint8 with zp_dq for the DQ's) -> Conv(w -> Q/DQ(per channel, axis 0)) -> y
Graph qdq_graph(float s_x, float s_x_dq, int zp, DType zp_type = DType::kInt8, int zp_dq = -1) {
  Graph g;
  g.opset = 13;
  auto v = [&](const char* n) { return g.add_value(n); };
  const int x = v("x"), sx = v("sx"), sx2 = v("sx2"), z = v("z"), z2 = v("z2"), xq = v("xq"), xdq = v("xdq"), w = v("w"),
            sw = v("sw"), zw = v("zw"), wq = v("wq"), wdq = v("wdq"), y = v("y");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 2, 4, 4};
  g.values[x].has_shape = true;
  g.constants[sx] = Tensor::scalar_f32(s_x);
  g.constants[sx2] = Tensor::scalar_f32(s_x_dq);
  Tensor zt(zp_type, {}), zt2(zp_type, {});  // two buffers: a Tensor copy shares its data
  zt.set_f64(0, zp);
  zt2.set_f64(0, zp_dq < 0 ? zp : zp_dq);
  g.constants[z] = zt;
  g.constants[z2] = zt2;
  g.constants[w] = test::random_f32({3, 2, 1, 1}, 3);
  g.constants[sw] = Tensor::from_f32({3}, {0.01f, 0.02f, 0.03f});
  g.constants[zw] = Tensor(DType::kInt8, {3});  // zeros: symmetric int8 (without a zero point ONNX means uint8)
  AttrMap axis0;
  axis0.set("axis", int64_t{0});
  g.nodes.push_back(Node{"qx", OpType::QuantizeLinear, 13, {}, {x, sx, z}, {xq}});
  g.nodes.push_back(Node{"dqx", OpType::DequantizeLinear, 13, {}, {xq, sx2, z2}, {xdq}});
  g.nodes.push_back(Node{"qw", OpType::QuantizeLinear, 13, axis0, {w, sw, zw}, {wq}});
  g.nodes.push_back(Node{"dqw", OpType::DequantizeLinear, 13, axis0, {wq, sw, zw}, {wdq}});
  g.nodes.push_back(Node{"conv", OpType::Conv, 13, {}, {xdq, wdq}, {y}});
  g.outputs = {y};
  g.relink();
  return g;
}

// qdq_graph's, with the Q and DQ named (nullptr: none) stripped of their zero points, the Q given output_dtype (not 0).
Graph without_zero_points(const char* q, const char* dq, int64_t output_dtype = 0) {
  Graph g = qdq_graph(0.1f, 0.1f, 0);
  for (Node& n : g.nodes) {
    if ((q && n.name == q) || (dq && n.name == dq)) n.inputs.resize(2);
    if (q && n.name == q && output_dtype) n.attrs.set("output_dtype", output_dtype);
  }
  g.relink();
  return g;
}
}  // namespace

TEST(Qdq, StripsPairsAndKeepsScales) {
  Graph g = qdq_graph(0.1f, 0.1f, 0);
  ASSERT_TRUE(has_qdq(g));
  auto s = strip_qdq(g);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(s->pairs, 2);
  EXPECT_FLOAT_EQ(s->act_scales.at("x"), 0.1f);
  EXPECT_EQ(s->weight_scales.at("w"), (std::vector<float>{0.01f, 0.02f, 0.03f}));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, OpType::Conv);
  EXPECT_EQ(g.values[g.nodes[0].inputs[0]].name, "x");
  EXPECT_EQ(g.values[g.nodes[0].inputs[1]].name, "w");
  EXPECT_FALSE(has_qdq(g));
}

TEST(Qdq, KeepsUint8ZeroPointsOfActivations) {
  Graph g = qdq_graph(0.1f, 0.1f, 21, DType::kUInt8);
  auto s = strip_qdq(g);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_FLOAT_EQ(s->act_scales.at("x"), 0.1f);
  EXPECT_EQ(s->act_zero_points, (std::map<std::string, int>{{"x", 21}}));
  Graph sym = qdq_graph(0.1f, 0.1f, 0);
  EXPECT_TRUE(strip_qdq(sym)->act_zero_points.empty());
  Graph differ = qdq_graph(0.1f, 0.1f, 21, DType::kUInt8, 22);  // the DQ's zero point is another
  auto r = strip_qdq(differ);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("zero points"), std::string::npos) << r.status().to_string();
}

TEST(Qdq, RejectsAsymmetricAndMismatchedScales) {
  Graph a = qdq_graph(0.1f, 0.1f, 3);
  auto ra = strip_qdq(a);
  ASSERT_FALSE(ra);
  EXPECT_NE(ra.status().message().find("zero point"), std::string::npos) << ra.status().to_string();
  Graph b = qdq_graph(0.1f, 0.2f, 0);
  auto rb = strip_qdq(b);
  ASSERT_FALSE(rb);
  EXPECT_NE(rb.status().message().find("different scales"), std::string::npos) << rb.status().to_string();
  Graph c = qdq_graph(-0.1f, -0.1f, 0);
  EXPECT_FALSE(strip_qdq(c));
}

// Without a zero point, ONNX's QuantizeLinear quantizes to uint8 (zero point 0), not int8: such an activation is
// asymmetric uint8, such a weight is refused (qdeploy's weights are symmetric int8); opset 21's output_dtype can
// make it int8. The DequantizeLinear of the pair takes the type of the Q's output.
TEST(Qdq, MissingZeroPointMeansUint8AsOnnxSays) {
  Graph g = without_zero_points("qx", "dqx");
  auto s = strip_qdq(g);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(s->act_zero_points, (std::map<std::string, int>{{"x", 0}}));
  EXPECT_NE(asymmetric_summary(s->act_zero_points).find("without a zero point"), std::string::npos)
      << asymmetric_summary(s->act_zero_points);  // what the symmetric-only builds (GPU, qat2ptq) say

  Graph mixed = without_zero_points(nullptr, "dqx");  // an int8 zero point on the Q alone: the DQ's input is int8 too
  auto m = strip_qdq(mixed);
  ASSERT_TRUE(m) << m.status().to_string();
  EXPECT_TRUE(m->act_zero_points.empty());

  Graph i8 = without_zero_points("qx", "dqx", 3);  // output_dtype TensorProto INT8
  auto r8 = strip_qdq(i8);
  ASSERT_TRUE(r8) << r8.status().to_string();
  EXPECT_TRUE(r8->act_zero_points.empty());

  Graph w = without_zero_points("qw", "dqw");
  auto rw = strip_qdq(w);
  ASSERT_FALSE(rw);
  EXPECT_NE(rw.status().to_string().find("uint8 weights"), std::string::npos) << rw.status().to_string();
  EXPECT_NE(rw.status().to_string().find("qw"), std::string::npos) << rw.status().to_string();
}

// ONNX Runtime's QDQ format stores weights as int8 constants behind a DequantizeLinear (no Q): the DQ folds into the
// float weight, whose scales become its weight scales; uint8 data is left to run as an op.
TEST(Qdq, FoldsDequantizeLinearOfStoredInt8Weights) {
  auto graph = [](DType dt) {
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x"), sx = g.add_value("sx"), xq = g.add_value("xq"), xdq = g.add_value("xdq"),
              w = g.add_value("w_int8"), sw = g.add_value("sw"), wdq = g.add_value("w"), y = g.add_value("y");
    g.inputs = {x};
    g.constants[sx] = Tensor::scalar_f32(0.1f);
    Tensor wt(dt, {2, 1, 1, 1});
    wt.set_f64(0, 100);
    wt.set_f64(1, 7);
    g.constants[w] = wt;
    g.constants[sw] = Tensor::from_f32({2}, {0.01f, 0.5f});
    AttrMap axis0;
    axis0.set("axis", int64_t{0});
    g.nodes.push_back(Node{"qx", OpType::QuantizeLinear, 13, {}, {x, sx}, {xq}});
    g.nodes.push_back(Node{"dqx", OpType::DequantizeLinear, 13, {}, {xq, sx}, {xdq}});
    g.nodes.push_back(Node{"dqw", OpType::DequantizeLinear, 13, axis0, {w, sw}, {wdq}});
    g.nodes.push_back(Node{"conv", OpType::Conv, 13, {}, {xdq, wdq}, {y}});
    g.outputs = {y};
    g.relink();
    return g;
  };
  Graph g = graph(DType::kInt8);
  auto s = strip_qdq(g);
  ASSERT_TRUE(s) << s.status().to_string();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Tensor* w = g.constant(g.nodes[0].inputs[1]);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype(), DType::kFloat32);
  EXPECT_FLOAT_EQ(w->data<float>()[0], 100 * 0.01f);
  EXPECT_FLOAT_EQ(w->data<float>()[1], 7 * 0.5f);
  EXPECT_EQ(s->weight_scales.at("w"), (std::vector<float>{0.01f, 0.5f}));
  EXPECT_FALSE(has_qdq(g));

  Graph u = graph(DType::kUInt8);
  ASSERT_TRUE(strip_qdq(u));
  EXPECT_TRUE(has_qdq(u));  // the uint8 weight's DQ still runs
}

// Weight scales lie along the axis of the reading node's output channels: axis 1 of a MatMul's (or a Gemm's) B
// [C, K], for Q/DQ pairs and for stored int8 weights; a scalar constant keeps its one scale.
TEST(Qdq, WeightScalesAlongTheReadersOutputChannels) {
  auto graph = [](bool stored, int64_t axis) {
    Graph g;
    g.opset = 13;
    const int x = g.add_value("x"), sx = g.add_value("sx"), xq = g.add_value("xq"), xdq = g.add_value("xdq"),
              w = g.add_value(stored ? "w_int8" : "w_float"), sw = g.add_value("sw"), zw = g.add_value("zw"),
              wq = g.add_value("wq"), wdq = g.add_value("w"), y = g.add_value("y"), c = g.add_value("c"),
              sc = g.add_value("sc"), cq = g.add_value("cq"), cdq = g.add_value("cdq"), z = g.add_value("z");
    g.inputs = {x};
    g.constants[sx] = Tensor::scalar_f32(0.1f);
    Tensor wt(stored ? DType::kInt8 : DType::kFloat32, {3, 2});
    for (int64_t i = 0; i < 6; ++i) wt.set_f64(i, stored ? 10 * (i + 1) : 0.1 * (i + 1));
    g.constants[w] = wt;
    g.constants[sw] = Tensor::from_f32({2}, {0.01f, 0.5f});
    g.constants[zw] = Tensor(DType::kInt8, {2});
    g.constants[c] = Tensor::scalar_f32(2.f);
    g.constants[sc] = Tensor::scalar_f32(0.02f);
    AttrMap ax;
    ax.set("axis", axis);
    g.nodes.push_back(Node{"qx", OpType::QuantizeLinear, 13, {}, {x, sx}, {xq}});
    g.nodes.push_back(Node{"dqx", OpType::DequantizeLinear, 13, {}, {xq, sx}, {xdq}});
    if (stored) {
      g.nodes.push_back(Node{"dqw", OpType::DequantizeLinear, 13, ax, {w, sw, zw}, {wdq}});
    } else {
      g.nodes.push_back(Node{"qw", OpType::QuantizeLinear, 13, ax, {w, sw, zw}, {wq}});
      g.nodes.push_back(Node{"dqw", OpType::DequantizeLinear, 13, ax, {wq, sw, zw}, {wdq}});
    }
    g.nodes.push_back(Node{"matmul", OpType::MatMul, 13, {}, {xdq, wdq}, {y}});
    g.nodes.push_back(Node{"qc", OpType::QuantizeLinear, 13, {}, {c, sc, zw}, {cq}});
    g.nodes.push_back(Node{"dqc", OpType::DequantizeLinear, 13, {}, {cq, sc, zw}, {cdq}});
    g.nodes.push_back(Node{"scale", OpType::Mul, 13, {}, {y, cdq}, {z}});
    g.outputs = {z};
    g.relink();
    return g;
  };
  Graph g = graph(false, 1);
  auto s = strip_qdq(g);
  ASSERT_TRUE(s) << s.status().to_string();
  EXPECT_EQ(s->weight_scales.at("w_float"), (std::vector<float>{0.01f, 0.5f}));
  EXPECT_EQ(s->weight_scales.at("c"), std::vector<float>{0.02f});
  Graph wrong = graph(false, 0);
  auto e = strip_qdq(wrong);
  ASSERT_FALSE(e);
  EXPECT_NE(e.status().message().find("axis 1 for the node that reads it"), std::string::npos) << e.status().message();
  Graph st = graph(true, 1);
  ASSERT_TRUE(strip_qdq(st));
  const Tensor* w = nullptr;
  for (const Node& n : st.nodes) {
    if (n.op == OpType::MatMul) w = st.constant(n.inputs[1]);
  }
  ASSERT_NE(w, nullptr);
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(w->data<float>()[i], 10 * (i + 1) * (i % 2 ? 0.5f : 0.01f)) << i;
}

}  // namespace qd
