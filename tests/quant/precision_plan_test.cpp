#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/int8.h"
#include "quant/int8_options.h"
#include "quant/precision_plan.h"
#include "test_util.h"

namespace qd {

namespace {

// x -> Conv(3x3, 8->16) -> Relu -> Conv(1x1, 16->4) -> y, and beside it f = Flatten(y) -> Gemm(B [16, 5]) -> z.
Graph small_graph() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w1 = g.add_value("w1"), c1 = g.add_value("c1"), r1 = g.add_value("r1"),
            w2 = g.add_value("w2"), y = g.add_value("y"), f = g.add_value("f"), b = g.add_value("b"),
            z = g.add_value("z");
  g.inputs = {x};
  g.values[x].dtype = DType::kFloat32;
  g.values[x].shape = {1, 8, 2, 2};
  g.values[x].has_shape = true;
  g.constants[w1] = test::random_f32({16, 8, 3, 3}, 1);
  g.constants[w2] = test::random_f32({4, 16, 1, 1}, 2);
  g.constants[b] = test::random_f32({16, 5}, 3);
  AttrMap pad;
  pad.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.nodes.push_back(Node{"conv1", OpType::Conv, 13, pad, {x, w1}, {c1}});
  g.nodes.push_back(Node{"relu", OpType::Relu, 13, {}, {c1}, {r1}});
  g.nodes.push_back(Node{"conv2", OpType::Conv, 13, {}, {r1, w2}, {y}});
  g.nodes.push_back(Node{"flatten", OpType::Flatten, 13, {}, {y}, {f}});
  g.nodes.push_back(Node{"gemm", OpType::Gemm, 13, {}, {f, b}, {z}});
  g.outputs = {z};
  g.relink();
  PrepareOptions p;
  EXPECT_TRUE(prepare_graph(g, p).is_ok());
  return g;
}

Int8Options all_scales() {
  Int8Options o;
  o.act_scales = {{"x", 0.01f}, {"r1", 0.02f}, {"f", 0.03f}};
  return o;
}

const NodePrecision& of(const Graph& g, const PrecisionPlan& plan, const std::string& node) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == node) return plan.nodes[i];
  }
  static const NodePrecision none{Precision::kFp32, PrecisionReason::kNoInt8Compute};
  ADD_FAILURE() << "no node " << node;
  return none;
}

PrecisionPlan plan_of(const Graph& g, const Int8Options& o, Precision float_precision = Precision::kFp32) {
  auto p = compute_precision(g, o, float_precision);
  EXPECT_TRUE(p) << p.status().to_string();
  return p ? *p : PrecisionPlan{};
}

std::set<std::string> int8_set(const Graph& g, const PrecisionPlan& plan) {
  std::set<std::string> s;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (plan.is_int8(i)) s.insert(g.nodes[i].name);
  }
  return s;
}

// The Conv/Gemm nodes the exact rewrite replaced by integer products ("<node>/int8#k", ConvInteger/MatMulInteger).
std::set<std::string> rewritten_int8(const Graph& lowered) {
  std::set<std::string> s;
  for (const Node& n : lowered.nodes) {
    if (n.op != OpType::ConvInteger && n.op != OpType::MatMulInteger) continue;
    s.insert(n.name.substr(0, n.name.rfind("/int8#")));
  }
  return s;
}

}  // namespace

TEST(PrecisionPlan, QuantizedWhereInputAndWeightsHaveScales) {
  const Graph g = small_graph();
  const PrecisionPlan plan = plan_of(g, all_scales());
  ASSERT_EQ(plan.nodes.size(), g.nodes.size());
  for (const char* n : {"conv1", "conv2", "gemm"}) {
    EXPECT_EQ(of(g, plan, n).precision, Precision::kInt8) << n;
    EXPECT_EQ(of(g, plan, n).reason, PrecisionReason::kQuantized) << n;
    EXPECT_EQ(precision_words(of(g, plan, n)), "int8");
  }
  // Ops without an INT8 compute of their own run at the float precision of the target the plan is for.
  EXPECT_EQ(of(g, plan, "relu").reason, PrecisionReason::kNoInt8Compute);
  EXPECT_EQ(of(g, plan, "relu").precision, Precision::kFp32);
  EXPECT_EQ(precision_words(of(g, plan, "relu")), "fp32");
  const PrecisionPlan gpu = plan_of(g, all_scales(), Precision::kFp16);
  EXPECT_EQ(of(g, gpu, "relu").precision, Precision::kFp16);
  EXPECT_EQ(int8_set(g, gpu), int8_set(g, plan));
  // Per tensor: the data inputs of the INT8 nodes, symmetric.
  ASSERT_EQ(plan.tensors.size(), 3u);
  const TensorQuant& qx = plan.tensors.at(g.find_value("x"));
  EXPECT_FLOAT_EQ(qx.scale, 0.01f);
  EXPECT_EQ(qx.zero_point, 0);
  EXPECT_FALSE(qx.asymmetric);
  EXPECT_FLOAT_EQ(plan.tensors.at(g.find_value("f")).scale, 0.03f);
  EXPECT_EQ(plan.tensors.count(g.find_value("c1")), 0u);  // read by Relu only
}

TEST(PrecisionPlan, AsymmetricZeroPoint) {
  const Graph g = small_graph();
  Int8Options o = all_scales();
  o.act_zero_points["r1"] = 128;
  const PrecisionPlan plan = plan_of(g, o);
  const TensorQuant& q = plan.tensors.at(g.find_value("r1"));
  EXPECT_TRUE(q.asymmetric);
  EXPECT_EQ(q.zero_point, 128);
  EXPECT_FALSE(plan.tensors.at(g.find_value("x")).asymmetric);
}

TEST(PrecisionPlan, AskedByNameRegexOrResolvedName) {
  const Graph g = small_graph();
  Int8Options o = all_scales();
  o.float_nodes = {"conv[2]"};     // a regex
  o.float_node_names = {"gemm"};  // exact, as a plan stores them
  const PrecisionPlan plan = plan_of(g, o);
  EXPECT_EQ(of(g, plan, "conv1").reason, PrecisionReason::kQuantized);
  EXPECT_EQ(of(g, plan, "conv2").reason, PrecisionReason::kAsked);
  EXPECT_EQ(of(g, plan, "conv2").precision, Precision::kFp32);
  EXPECT_EQ(of(g, plan, "gemm").reason, PrecisionReason::kAsked);
  EXPECT_EQ(precision_words(of(g, plan, "gemm")), "float (asked)");
  EXPECT_EQ(plan.tensors.size(), 1u);  // x only: r1 and f feed float nodes
  // Asked wins over a missing scale (the rules' order).
  o.act_scales.erase("r1");
  EXPECT_EQ(of(g, plan_of(g, o), "conv2").reason, PrecisionReason::kAsked);
}

TEST(PrecisionPlan, NoScale) {
  const Graph g = small_graph();
  Int8Options o = all_scales();
  o.act_scales.erase("r1");
  const PrecisionPlan plan = plan_of(g, o, Precision::kFp16);
  EXPECT_EQ(of(g, plan, "conv2").reason, PrecisionReason::kNoScale);
  EXPECT_EQ(of(g, plan, "conv2").precision, Precision::kFp16);
  EXPECT_EQ(precision_words(of(g, plan, "conv2")), "float (no scale)");
  EXPECT_EQ(int8_set(g, plan), (std::set<std::string>{"conv1", "gemm"}));
}

TEST(PrecisionPlan, NoWeightScaleWhereOthersHaveThem) {
  const Graph g = small_graph();
  Int8Options o = all_scales();
  o.weight_scales["w1"] = std::vector<float>(16, 0.01f);
  const PrecisionPlan plan = plan_of(g, o);
  EXPECT_EQ(of(g, plan, "conv1").reason, PrecisionReason::kQuantized);
  EXPECT_EQ(of(g, plan, "conv2").reason, PrecisionReason::kNoWeightScale);
  EXPECT_EQ(of(g, plan, "gemm").reason, PrecisionReason::kNoWeightScale);
  EXPECT_EQ(precision_words(of(g, plan, "gemm")), "float (no weight scale)");
}

TEST(PrecisionPlan, NotQuantizable) {
  Graph g = small_graph();
  // Gemm with transA, or alpha != 1: no INT8 form; so is a Conv whose weights are not a constant.
  for (Node& n : g.nodes) {
    if (n.name == "gemm") n.attrs.set("alpha", 2.f);
  }
  Int8Options o = all_scales();
  o.float_nodes = {"gemm"};  // not quantizable comes first
  PrecisionPlan plan = plan_of(g, o);
  EXPECT_EQ(of(g, plan, "gemm").reason, PrecisionReason::kNotQuantizable);
  EXPECT_EQ(precision_words(of(g, plan, "gemm")), "float (not quantizable)");
  for (Node& n : g.nodes) {
    if (n.name == "gemm") {
      n.attrs.set("alpha", 1.f);
      n.attrs.set("transA", int64_t{1});
    }
  }
  plan = plan_of(g, all_scales());
  EXPECT_EQ(of(g, plan, "gemm").reason, PrecisionReason::kNotQuantizable);
  g.constants.erase(g.find_value("w2"));
  g.inputs.push_back(g.find_value("w2"));
  g.values[g.find_value("w2")].dtype = DType::kFloat32;
  plan = plan_of(g, all_scales());
  EXPECT_EQ(of(g, plan, "conv2").reason, PrecisionReason::kNotQuantizable);
  EXPECT_EQ(of(g, plan, "conv1").reason, PrecisionReason::kQuantized);
}

TEST(PrecisionPlan, BadScalesAreErrors) {
  const Graph g = small_graph();
  for (float bad : {-1.f, 0.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Int8Options o = all_scales();
    o.act_scales["r1"] = bad;
    auto p = compute_precision(g, o);
    ASSERT_FALSE(p) << bad;
    EXPECT_NE(p.status().message().find("'r1' has an invalid scale"), std::string::npos) << p.status().message();
  }
  Int8Options o = all_scales();
  o.weight_scales["w1"] = std::vector<float>(15, 0.01f);  // 16 output channels
  auto p = compute_precision(g, o);
  ASSERT_FALSE(p);
  EXPECT_NE(p.status().message().find("weight 'w1' has 16 channels but 15 scales"), std::string::npos);
  // A bad scale where no INT8 node reads it is not used, so not an error.
  o = all_scales();
  o.act_scales["c1"] = -1.f;
  EXPECT_TRUE(compute_precision(g, o));
}

// lower_int8 rewrites exactly the plan's INT8 nodes, and its report is the plan's.
TEST(PrecisionPlan, LowerInt8FollowsThePlan) {
  Graph g = small_graph();
  Int8Options o = all_scales();
  o.act_scales.erase("f");
  const PrecisionPlan plan = plan_of(g, o);
  auto rep = lower_int8(g, o, plan);
  ASSERT_TRUE(rep) << rep.status().to_string();
  EXPECT_EQ(rewritten_int8(g), (std::set<std::string>{"conv1", "conv2"}));
  EXPECT_EQ(rep->int8_nodes, (std::vector<std::string>{"conv1", "conv2"}));
  EXPECT_EQ(rep->no_scale_nodes, std::vector<std::string>{"gemm"});
  ASSERT_EQ(rep->layers.size(), 3u);
  EXPECT_EQ(rep->layers[2].precision.reason, PrecisionReason::kNoScale);
  EXPECT_EQ(rep->layers[2].op, "Gemm");
  // A plan of another graph is refused rather than misread.
  Graph other = small_graph();
  other.nodes.pop_back();
  EXPECT_FALSE(lower_int8(other, o, plan));
}

namespace {

// The shipped models with the calibration setups the tests use: the plan's INT8 set is what the exact rewrite
// quantizes, and the counts per reason are those lower_int8 reported before it read a plan (`qdeploy inspect
// --precision int8` of the same setups).
struct ModelSetup {
  std::string name, model;
  Int8Sources src;
  Shape input;
  size_t int8, asked, no_scale;
};

// The shipped cache with every fourth scale from the third on left out (some convs then have no input scale).
std::string partial_yolo_cache() {
  const std::string path = test::temp_dir("plan_partial_cache") + "/partial.cache";
  std::ifstream in(test::source_dir() + "/models/yolov5n_fmnist_det.cache");
  std::ostringstream out;
  std::string line;
  std::getline(in, line);
  out << line << "\n";
  for (int i = 0; std::getline(in, line); ++i) {
    if (i % 4 != 2) out << line << "\n";
  }
  std::ofstream(path) << out.str();
  return path;
}

std::vector<ModelSetup> setups() {
  const std::string m = test::source_dir() + "/models/";
  std::vector<ModelSetup> s;
  Int8Sources yolo;
  yolo.calib_cache = m + "yolov5n_fmnist_det.cache";
  s.push_back({"yolov5n_cache", m + "yolov5n_fmnist_det.onnx", yolo, {1, 3, 640, 640}, 60, 0, 0});
  Int8Sources asked = yolo;
  asked.float_layers = {"/model.24/.*", "/model.0/conv/Conv"};
  s.push_back({"yolov5n_cache_float_layers", m + "yolov5n_fmnist_det.onnx", asked, {1, 3, 640, 640}, 56, 4, 0});
  Int8Sources partial;
  partial.calib_cache = partial_yolo_cache();
  partial.float_layers = {"/model.2.*"};
  s.push_back({"yolov5n_partial_cache", m + "yolov5n_fmnist_det.onnx", partial, {1, 3, 640, 640}, 33, 19, 8});
  s.push_back({"yolov5n_qat", m + "yolov5n_fmnist_det_qat.onnx", Int8Sources{}, {1, 3, 640, 640}, 60, 0, 0});
  for (const char* cls : {"model_bn", "model_gn"}) {
    Int8Sources c;
    c.calib_cache = test::temp_dir(std::string("plan_") + cls) + "/" + cls + ".cache";
    EXPECT_TRUE(test::write_minmax_cache(m + cls + ".onnx", "input", test::random_f32({1, 3, 32, 32}, 5, 0.f, 1.f),
                                         c.calib_cache)
                    .is_ok());
    s.push_back({cls, m + cls + ".onnx", c, {1, 3, 32, 32}, 5, 0, 0});
  }
  return s;
}

}  // namespace

TEST(PrecisionPlan, ShippedModelsMatchTheRewrite) {
  for (const ModelSetup& s : setups()) {
    SCOPED_TRACE(s.name);
    auto g = import_onnx_file(s.model);
    ASSERT_TRUE(g) << g.status().to_string();
    auto opt = load_int8_options(*g, s.src);
    ASSERT_TRUE(opt) << opt.status().to_string();
    PrepareOptions p;
    p.input_shapes[g->values[g->inputs[0]].name] = s.input;
    ASSERT_TRUE(prepare_graph(*g, p).is_ok());
    const PrecisionPlan plan = plan_of(*g, *opt);
    size_t asked = 0, no_scale = 0;
    for (const NodePrecision& n : plan.nodes) {
      asked += n.reason == PrecisionReason::kAsked;
      no_scale += n.reason == PrecisionReason::kNoScale || n.reason == PrecisionReason::kNoWeightScale;
    }
    const std::set<std::string> chosen = int8_set(*g, plan);
    EXPECT_EQ(chosen.size(), s.int8);
    EXPECT_EQ(asked, s.asked);
    EXPECT_EQ(no_scale, s.no_scale);
    Graph lowered = *g;
    auto rep = lower_int8(lowered, *opt);
    ASSERT_TRUE(rep) << rep.status().to_string();
    EXPECT_EQ(rewritten_int8(lowered), chosen);
    EXPECT_EQ(std::set<std::string>(rep->int8_nodes.begin(), rep->int8_nodes.end()), chosen);
  }
}

// A QAT model whose Q/DQ leaves some weights without scales: exactly those convs stay float, for that reason.
TEST(PrecisionPlan, ShippedQatModelWithoutSomeWeightScales) {
  auto g = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det_qat.onnx");
  ASSERT_TRUE(g) << g.status().to_string();
  auto opt = load_int8_options(*g, Int8Sources{});
  ASSERT_TRUE(opt) << opt.status().to_string();
  PrepareOptions p;
  p.input_shapes["images"] = {1, 3, 640, 640};
  ASSERT_TRUE(prepare_graph(*g, p).is_ok());
  std::set<std::string> dropped;
  int k = 0;
  for (auto it = opt->weight_scales.begin(); it != opt->weight_scales.end();) {
    if (k++ % 5 == 0) {
      dropped.insert(it->first);
      it = opt->weight_scales.erase(it);
    } else {
      ++it;
    }
  }
  const PrecisionPlan plan = plan_of(*g, *opt);
  size_t convs = 0;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const Node& n = g->nodes[i];
    if (n.op != OpType::Conv) continue;
    ++convs;
    const bool without = dropped.count(g->values[n.inputs[1]].name) != 0;
    EXPECT_EQ(plan.nodes[i].reason, without ? PrecisionReason::kNoWeightScale : PrecisionReason::kQuantized)
        << n.name;
  }
  EXPECT_EQ(convs, 60u);
  EXPECT_EQ(int8_set(*g, plan).size(), 60 - dropped.size());
}

}  // namespace qd
