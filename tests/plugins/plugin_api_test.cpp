// The plugin API inside qdeploy: declaration checks, the attribute schema, registration rules, the importer's
// mapping of (domain, op_type), plans (codec and the "plugins" section).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "dcnv4_model.h"
#include "onnx/importer.h"
#include "ops/plugin_registry.h"
#include "passes/passes.h"
#include "plan/graph_codec.h"
#include "plan/plugin_list.h"
#include "qdeploy/plugin.h"
#include "test_util.h"

namespace qd {
namespace {

qdeploy::Status echo_infer(const qdeploy::Attrs&, const std::vector<qdeploy::Dims>& in, std::vector<qdeploy::Dims>* out) {
  *out = {in[0]};
  return qdeploy::Status::ok();
}

// y = x * scale + bias (bias an optional FLOATS attribute per last-dim element).
qdeploy::Status echo_ref(const qdeploy::Attrs& a, const std::vector<qdeploy::TensorView>& in,
                         const std::vector<qdeploy::TensorView>& out) {
  const float s = a.get_float("scale");
  for (int64_t i = 0; i < in[0].numel(); ++i) out[0].as<float>()[i] = in[0].as<const float>()[i] * s;
  return qdeploy::Status::ok();
}

// A small valid declaration, renamed per test so that the process-wide registry sees each once.
qdeploy::OpDef scale_op(const std::string& name) {
  qdeploy::OpDef d;
  d.domain = "test.plugins";
  d.name = name;
  d.inputs = {{"x", {qdeploy::DataType::kFloat32, qdeploy::DataType::kFloat16}, false, ""}};
  d.outputs = {{"y", {qdeploy::DataType::kFloat32}, false, ""}};
  d.output_dtype_from = {0};
  d.attrs = {qdeploy::AttrSpec::real("scale", 2.f, -10, 10, "factor"),
             qdeploy::AttrSpec::integer("mode", 0, 0, 2, "unused")};
  qdeploy::AttrSpec tag;
  tag.name = "tag";
  tag.type = qdeploy::AttrType::kString;
  tag.required = true;
  d.attrs.push_back(tag);
  d.infer_shapes = &echo_infer;
  d.reference = &echo_ref;
  qdeploy::TestCase t;
  t.name = "small";
  t.attrs = {{"tag", qdeploy::AttrVal(std::string("x"))}};
  t.inputs = {{2, 3}};
  d.tests = {t};
  return d;
}

TEST(PluginApi, DeclarationChecksSayWhatIsWrong) {
  EXPECT_TRUE(check_op_def(scale_op("Ok")).is_ok());
  struct Case {
    std::function<void(qdeploy::OpDef&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& d) { d.reference = nullptr; }, "no reference kernel"},
      {[](auto& d) { d.infer_shapes = nullptr; }, "no shape inference"},
      {[](auto& d) { d.domain = "ai.onnx"; }, "domain"},
      {[](auto& d) { d.domain = "bad domain"; }, "domain"},
      {[](auto& d) { d.name = "a::b"; }, "name"},
      {[](auto& d) { d.version = 0; }, "version"},
      {[](auto& d) { d.api_version = 99; }, "plugin API version 99"},
      {[](auto& d) { d.attrs[0].default_float = 11.f; }, "outside the allowed range"},
      {[](auto& d) { d.attrs.push_back(d.attrs[0]); }, "declared twice"},
      {[](auto& d) { d.tests.clear(); }, "no test cases"},
      {[](auto& d) { d.tests[0].attrs.clear(); }, "required attribute 'tag'"},
      {[](auto& d) { d.outputs.clear(); }, "no outputs"},
      {[](auto& d) { d.inputs[0].dtypes.clear(); }, "allows no dtype"},
      {[](auto& d) { d.output_dtype_from = {3}; }, "names no input"},
      {[](auto& d) { d.cuda_kernels.push_back({"k"}); }, "lacks supports()"},
  };
  for (const auto& c : cases) {
    qdeploy::OpDef d = scale_op("Bad");
    c.edit(d);
    const Status st = check_op_def(d);
    ASSERT_FALSE(st.is_ok()) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_FALSE(register_plugin_op(d, "program")) << c.message;
  }
}

TEST(PluginApi, AttributesAreCheckedAgainstTheSchema) {
  const qdeploy::OpDef d = scale_op("Attrs");
  AttrMap m;
  m.set("tag", std::string("t"));
  auto ok = resolve_plugin_attrs(d, m);
  ASSERT_TRUE(ok) << ok.status().to_string();
  EXPECT_EQ(ok->get_float("scale"), 2.f);  // defaults filled in
  EXPECT_EQ(ok->get_int("mode"), 0);
  EXPECT_EQ(ok->get_string("tag"), "t");
  EXPECT_EQ(to_attr_map(*ok).all().size(), 3u);

  m.set("scale", int64_t{3});  // an INT for a FLOAT attribute is converted
  EXPECT_EQ(resolve_plugin_attrs(d, m)->get_float("scale"), 3.f);

  auto expect_error = [&](AttrMap a, const std::string& text) {
    auto r = resolve_plugin_attrs(d, a);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
  };
  AttrMap unknown = m;
  unknown.set("kernel", int64_t{3});
  expect_error(unknown, "attribute 'kernel' is not declared by test.plugins::Attrs@1 (it declares: scale, mode, tag)");
  AttrMap range = m;
  range.set("mode", int64_t{3});
  expect_error(range, "attribute 'mode' = 3 is outside the allowed range [0, 2]");
  AttrMap type = m;
  type.set("mode", 1.5f);
  expect_error(type, "attribute 'mode' is FLOAT; the op declares it INT");
  AttrMap nan = m;
  nan.set("scale", std::nanf(""));
  expect_error(nan, "outside the allowed range");
  expect_error(AttrMap(), "required attribute 'tag' (STRING) is missing");
}

TEST(PluginApi, RegistrationRules) {
  auto id = register_plugin_op(scale_op("Twice"), "program");
  ASSERT_TRUE(id) << id.status().to_string();
  EXPECT_TRUE(is_plugin_op(*id));
  EXPECT_STREQ(op_name(*id), "Twice");
  EXPECT_EQ(plan_op_name(*id), "test.plugins::Twice@1");
  EXPECT_EQ(op_schema(*id).min_inputs, 1);
  EXPECT_EQ(op_traits(*id).int8, Int8Rule::kFloat);  // a float island in INT8 builds
  auto again = register_plugin_op(scale_op("Twice"), "/lib/libtwice.so");
  ASSERT_FALSE(again);
  EXPECT_NE(again.status().message().find("registered twice (by program and by /lib/libtwice.so)"), std::string::npos);

  // A library may replace a built-in op: same id, the library's definition.
  auto builtin = register_plugin_op(scale_op("Replaced"), "built in");
  ASSERT_TRUE(builtin);
  auto lib = register_plugin_op(scale_op("Replaced"), "/lib/libnewer.so");
  ASSERT_TRUE(lib) << lib.status().to_string();
  EXPECT_EQ(*lib, *builtin);
  EXPECT_EQ(plugin_op(*builtin)->source, "/lib/libnewer.so");
  EXPECT_FALSE(register_plugin_op(scale_op("Replaced"), "/lib/another.so"));

  // Versions: the highest not above the model's opset for the domain.
  qdeploy::OpDef v2 = scale_op("Twice");
  v2.version = 2;
  ASSERT_TRUE(register_plugin_op(v2, "program"));
  EXPECT_EQ(find_plugin_op("test.plugins", "Twice", 1)->def.version, 1);
  EXPECT_EQ(find_plugin_op("test.plugins", "Twice", 5)->def.version, 2);
  EXPECT_EQ(find_plugin_op("test.plugins", "Twice", 0)->def.version, 2);
  EXPECT_EQ(find_plugin_op("test.plugins", "Nope", 0), nullptr);
}

TEST(PluginApi, ReferenceSeesFloat16AsFloat32) {
  auto id = register_plugin_op(scale_op("Half"), "program");
  ASSERT_TRUE(id);
  Graph g;
  const int x = g.add_value("x"), y = g.add_value("y");
  g.values[x].dtype = DType::kFloat16;
  g.values[x].shape = {4};
  g.values[x].has_shape = true;
  g.inputs = {x};
  g.outputs = {y};
  Node n;
  n.name = "half";
  n.op = *id;
  n.attrs.set("tag", std::string("t"));
  n.attrs.set("scale", 0.5f);
  n.inputs = {x};
  n.outputs = {y};
  g.nodes.push_back(n);
  g.relink();
  InferCtx ctx = infer_ctx_for(g, g.nodes[0]);
  ASSERT_TRUE(infer_node(ctx).is_ok());
  EXPECT_EQ(ctx.out_dtype(0), DType::kFloat16);  // output_dtype_from: input 0
  Tensor in = *Tensor::make(DType::kFloat16, {4});
  const uint16_t halves[4] = {0x3c00, 0x4000, 0xc000, 0x0000};  // 1, 2, -2, 0
  std::memcpy(in.raw(), halves, sizeof halves);
  auto out = run_node(ctx, {&in});
  ASSERT_TRUE(out) << out.status().to_string();
  const auto* h = static_cast<const uint16_t*>((*out)[0].raw());
  EXPECT_EQ(h[0], 0x3800);  // 0.5
  EXPECT_EQ(h[1], 0x3c00);  // 1
  EXPECT_EQ(h[2], 0xbc00);  // -1
  EXPECT_EQ(h[3], 0x0000);

  // A dtype the op does not allow is refused by inference, naming the input.
  g.values[x].dtype = DType::kInt32;
  InferCtx bad = infer_ctx_for(g, g.nodes[0]);
  const Status st = infer_node(bad);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("node 'half' (Half): input 0 (x) is int32; Half takes float32, float16"),
            std::string::npos)
      << st.to_string();
}

class DcnImport : public ::testing::Test {
 protected:
  void SetUp() override { qdeploy::register_builtin_plugins(); }
  Expected<Graph> import(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }
};

TEST_F(DcnImport, MapsDomainAndOpTypeToThePluginWithDefaultsFilledIn) {
  auto g = import(test::dcnv4_model(1, 4, 4, 4, 16, 112));
  ASSERT_TRUE(g) << g.status().to_string();
  ASSERT_EQ(g->nodes.size(), 1u);
  const Node& n = g->nodes[0];
  ASSERT_TRUE(is_plugin_op(n.op));
  EXPECT_EQ(plan_op_name(n.op), "ai.qdeploy::DCNv4@1");
  EXPECT_EQ(n.attrs.all().size(), 13u);
  EXPECT_EQ(*n.attrs.get_int("kernel_h"), 3);
  EXPECT_EQ(*n.attrs.get_int("im2col_step"), 256);
  EXPECT_EQ(*n.attrs.get_float("offset_scale"), 1.f);
  PrepareOptions opt;
  ASSERT_TRUE(prepare_graph(*g, opt).is_ok());
  EXPECT_EQ(g->values[g->outputs[0]].shape, (Shape{1, 4, 4, 64}));
}

TEST_F(DcnImport, ErrorsNameTheNodeAndThePlugin) {
  auto bad = import(test::dcnv4_model(1, 4, 4, 4, 16, 112, {{"kernel_h", 0}}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().to_string(),
            "node 'dcn' (ai.qdeploy::DCNv4@1, plugin built in): m.onnx: attribute 'kernel_h' = 0 is outside the "
            "allowed range [1, 15]");
  auto unknown = import(test::dcnv4_model(1, 4, 4, 4, 16, 112, {{"kernel", 3}}));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().to_string().find("attribute 'kernel' is not declared by ai.qdeploy::DCNv4@1"),
            std::string::npos);

  onnx::ModelProto other = test::dcnv4_model(1, 4, 4, 4, 16, 112);
  other.mutable_graph()->mutable_node(0)->set_op_type("DCNv9");
  auto missing = import(other);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("'dcn' (ai.qdeploy::DCNv9, opset 1) [no registered plugin declares this "
                                            "op of the domain: load the library that does with --plugin LIB.so]"),
            std::string::npos)
      << missing.status().message();
  other.mutable_graph()->mutable_node(0)->set_domain("com.example");
  auto foreign = import(other);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.status().message().find("load the plugin library that declares it with --plugin LIB.so"),
            std::string::npos);

  // Shape errors from the plugin's inference carry the node's name.
  auto g = import(test::dcnv4_model(1, 4, 4, 4, 16, 64));
  ASSERT_TRUE(g);
  PrepareOptions opt;
  const Status st = prepare_graph(*g, opt);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("node 'dcn' (DCNv4): offset_mask has 64 channels; group 4 with 9 sampling points "
                                "needs 108 (the official op pads it to 112)"),
            std::string::npos)
      << st.to_string();
}

TEST_F(DcnImport, PlansStoreThePluginOpByQualifiedNameAndListIt) {
  auto g = import(test::dcnv4_model(1, 4, 4, 4, 16, 112, {{"stride_h", 2}}));
  ASSERT_TRUE(g);
  auto bytes = encode_graph(*g);
  ASSERT_TRUE(bytes);
  EXPECT_NE(bytes->find("ai.qdeploy::DCNv4@1"), std::string::npos);
  auto back = decode_graph(*bytes);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->nodes[0].op, g->nodes[0].op);
  EXPECT_EQ(*back->nodes[0].attrs.get_int("stride_h"), 2);

  std::string renamed = *bytes;
  renamed.replace(renamed.find("DCNv4@1"), 7, "DCNv7@1");
  auto missing = decode_graph(renamed);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(missing.status().message().find("plugin op ai.qdeploy::DCNv7@1, which is not registered"), std::string::npos);

  EXPECT_EQ(encode_plugin_list(*g), "ai.qdeploy::DCNv4@1\tbuilt in\n");
  PlanFile plan;
  plan.add("plugins", encode_plugin_list(*g));
  EXPECT_TRUE(check_plugin_list(plan).is_ok());
  PlanFile other;
  other.add("plugins", "ai.example::Warp@3\t/opt/libwarp.so\n");
  const Status st = check_plugin_list(other);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(),
            "the plan uses plugin ops that are not registered:\n  ai.example::Warp@3 (the plan was built with --plugin "
            "/opt/libwarp.so)\nload the plugin libraries that declare them with --plugin LIB.so");
  PlanFile broken;
  broken.add("plugins", "no tab");
  EXPECT_FALSE(check_plugin_list(broken).is_ok());
}

}  // namespace
}  // namespace qd
