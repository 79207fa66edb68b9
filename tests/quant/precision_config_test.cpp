#include <gtest/gtest.h>

#include "quant/int8.h"
#include "quant/precision_config.h"
#include "core/file_io.h"
#include "test_util.h"

namespace qd {

namespace {

// x -> conv (weight w [3, 2, 1, 1]) -> y -> sig -> z
Graph small_graph() {
  Graph g;
  g.opset = 13;
  const int x = g.add_value("x"), w = g.add_value("w"), y = g.add_value("y"), z = g.add_value("z");
  g.inputs = {x};
  g.constants[w] = test::random_f32({3, 2, 1, 1}, 1);
  g.nodes.push_back(Node{"conv", OpType::Conv, 13, {}, {x, w}, {y}});
  g.nodes.push_back(Node{"sig", OpType::Sigmoid, 13, {}, {y}, {z}});
  g.outputs = {z};
  g.relink();
  return g;
}

std::string error_of(const std::string& json) {
  auto c = parse_precision_config(json, "cfg.json");
  if (c) {
    Status s = check_precision_config(*c, small_graph(), "cfg.json");
    return s.is_ok() ? std::string("(ok)") : s.to_string();
  }
  return c.status().to_string();
}

}  // namespace

TEST(PrecisionConfig, ParsesWhatQat2PtqWritesAndRoundTrips) {
  PrecisionConfig c;
  c.int8_tensor_scales = {{"x", 0.1f}, {"y", 1.f / 127.f}};
  c.fp16_nodes = {"sig"};
  c.fp32_nodes = {"conv"};
  c.weight_scales["w"] = {0.01f, 0.02f, 0.03f};
  const std::string text = format_precision_config(c);
  auto back = parse_precision_config(text, "cfg.json");
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->int8_tensor_scales, c.int8_tensor_scales);  // bit-exact floats, file order
  EXPECT_EQ(back->fp16_nodes, c.fp16_nodes);
  EXPECT_EQ(back->fp32_nodes, c.fp32_nodes);
  EXPECT_EQ(back->weight_scales, c.weight_scales);
  EXPECT_TRUE(check_precision_config(*back, small_graph(), "cfg.json").is_ok());
  // Every key is optional.
  auto empty = parse_precision_config("{}", "cfg.json");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->int8_tensor_scales.empty());
}

TEST(PrecisionConfig, ErrorsGiveTheFileAndJsonPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"int8_tensor_scales": {"x": 0.1,})", "cfg.json: not valid JSON"},
      {"[1]", "$: expected an object"},
      {R"({"fp16_node": []})", "$.fp16_node: unknown key"},
      {R"({"int8_tensor_scales": {"x": -1}})", R"($.int8_tensor_scales["x"]: scale -1 is not finite and positive)"},
      {R"({"int8_tensor_scales": {"x": 1e300}})", "not finite and positive"},
      // Beyond a double: nlohmann reports it with out_of_range, not parse_error (it used to escape, abort).
      {R"({"int8_tensor_scales": {"x": 1e999}})", "cfg.json: not valid JSON: [json.exception.out_of_range.406] number overflow"},
      {R"({"int8_tensor_scales": {"x": "0.1"}})", "expected a number, got string"},
      {R"({"int8_tensor_scales": []})", "$.int8_tensor_scales: expected an object"},
      {R"({"fp16_nodes": ["sig", 3]})", "$.fp16_nodes[1]: expected a node name"},
      {R"({"weight_scales": {"w": [0.1, 0]}})", R"($.weight_scales["w"][1])"},
      // Names the model does not have.
      {R"({"int8_tensor_scales": {"nope": 0.1}})",
       R"(cfg.json: $.int8_tensor_scales["nope"]: the model has no tensor named 'nope')"},
      {R"({"fp32_nodes": ["sig", "nope"]})", "$.fp32_nodes[1]: the model has no node named 'nope'"},
      {R"({"weight_scales": {"x": [0.1]}})", "no constant (weight) named 'x'"},
      {R"({"weight_scales": {"w": [0.1, 0.2]}})", "2 scales for a weight of shape"},
  };
  for (const auto& [json, phrase] : cases) {
    const std::string err = error_of(json);
    EXPECT_NE(err.find(phrase), std::string::npos) << json << "\n  gave: " << err;
  }
}

TEST(PrecisionConfig, ApplyOverridesScalesAndAddsFloatNodes) {
  const std::string path = test::temp_dir("precision_config") + "/cfg.json";
  ASSERT_TRUE(write_file_atomic(path, R"({"int8_tensor_scales": {"x": 0.5, "y": 0.25}, "fp16_nodes": ["sig"],
                                          "fp32_nodes": ["conv"]})").is_ok());
  Int8Options opt;
  opt.act_scales["x"] = 0.1f;  // from a calibration cache
  ASSERT_TRUE(apply_precision_config(path, small_graph(), &opt).is_ok());
  EXPECT_EQ(opt.act_scales.at("x"), 0.5f);
  EXPECT_EQ(opt.act_scales.at("y"), 0.25f);
  // Node names are exact, not regexes: each matches itself only.
  EXPECT_TRUE(matches_any("conv", opt.float_nodes));
  EXPECT_TRUE(matches_any("sig", opt.float_nodes));
  EXPECT_FALSE(matches_any("conv2", opt.float_nodes));
  Int8Options bad;
  ASSERT_TRUE(write_file_atomic(path, R"({"fp16_nodes": ["sig."]})").is_ok());
  EXPECT_FALSE(apply_precision_config(path, small_graph(), &bad).is_ok());
}

}  // namespace qd
