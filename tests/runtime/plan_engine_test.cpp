// CPU plans: an engine loaded from a plan gives bit-identical outputs to the engine built from the ONNX file with
// the same options, and needs neither the model nor the calibration cache any more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "onnx/onnx_builder.h"
#include "plan/plan_file.h"
#include "runtime/engine.h"
#include "runtime/plan_sections.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

std::string model_path(const std::string& name) { return test::source_dir() + "/models/" + name; }

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class PlanEngine : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("plan_engine"); }

  // x[N,3,8,8] -> Conv -> Relu -> y: a model with a dynamic batch.
  std::string dynamic_model() {
    using namespace test::onnxb;
    onnx::ModelProto m = conv_relu_model();
    auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(0)->set_dim_param("N");
    return write_model(dir_, m, "dynamic.onnx");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Builds MODEL with `opt`, saves a plan, loads it, and compares descriptions, I/O and outputs on `inputs`.
  std::unique_ptr<Engine> check_same(const std::string& model, const BuildOptions& opt,
                                     const std::vector<Shape>& input_shapes) {
    auto built = build_engine(model, opt);
    EXPECT_TRUE(built) << built.status().to_string();
    if (!built) return nullptr;
    const std::string plan = dir_ + "/m.plan";
    Status st = (*built)->save(plan);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(is_plan_file(plan));
    auto loaded = load_engine(plan);
    EXPECT_TRUE(loaded) << loaded.status().to_string();
    if (!loaded) return nullptr;
    Engine& a = **built;
    Engine& b = **loaded;
    EXPECT_EQ(a.describe(), b.describe());
    EXPECT_EQ(a.inputs().size(), b.inputs().size());
    for (size_t i = 0; i < a.inputs().size() && i < b.inputs().size(); ++i) {
      EXPECT_EQ(a.inputs()[i].name, b.inputs()[i].name);
      EXPECT_EQ(a.inputs()[i].shape, b.inputs()[i].shape);
    }
    for (size_t i = 0; i < a.outputs().size() && i < b.outputs().size(); ++i) {
      EXPECT_EQ(a.outputs()[i].shape, b.outputs()[i].shape);
    }
    for (size_t k = 0; k < input_shapes.size(); ++k) {
      SCOPED_TRACE("input " + shape_str(input_shapes[k]));
      const std::map<std::string, Tensor> feeds = {
          {a.inputs()[0].name, test::random_f32(input_shapes[k], 5 + static_cast<uint32_t>(k), 0.f, 1.f)}};
      auto ya = a.run(feeds);
      auto yb = b.run(feeds);
      EXPECT_TRUE(ya && yb) << ya.status().to_string() << yb.status().to_string();
      if (!ya || !yb) continue;
      EXPECT_EQ(ya->size(), yb->size());
      for (size_t i = 0; i < ya->size() && i < yb->size(); ++i) EXPECT_TRUE(same_bytes((*ya)[i], (*yb)[i])) << i;
    }
    auto saved = read_plan(plan);
    EXPECT_TRUE(saved);
    if (saved) header_ = saved->header;
    return std::move(*loaded);
  }

  // A min-max calibration cache for model_bn from one random batch.
  std::string model_bn_cache() {
    const std::string path = dir_ + "/model_bn.cache";
    EXPECT_TRUE(test::write_minmax_cache(model_path("model_bn.onnx"), "input",
                                         test::random_f32({1, 3, 32, 32}, 1, 0.f, 1.f), path)
                    .is_ok());
    return path;
  }

  std::string dir_;
  PlanHeader header_;
};

// A batch split's key (what CudaEngine records in the plan and the timing cache) reads back as the batch, its inputs
// and the split; other kernel choices and keys of another form are not splits.
TEST(BatchSplits, KeyReadsBack) {
  const std::string key = batch_split_key(32, {{"images", Shape{32, 3, 640, 640}}, {"mask", Shape{32, 1}}});
  EXPECT_EQ(key, "split:n32:images=32x3x640x640;mask=32x1;");
  const auto splits = batch_splits({{key, kSplitLanesInStep},
                                    {batch_split_key(2, {{"x", Shape{2, 3}}}), kSplitWhole},
                                    {"conv:n32:c64", "wgmma_i8_128x64_s4"},
                                    {"split:n:x=2;", kSplitLanes},
                                    {"split:n99999999999999999999:x=1;", kSplitLanes},
                                    {"split:n-4:x=1;", kSplitLanes}});
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].batch, 2);
  EXPECT_EQ(splits[0].inputs, "x=2x3");
  EXPECT_EQ(splits[0].split, kSplitWhole);
  EXPECT_EQ(splits[1].batch, 32);
  EXPECT_EQ(splits[1].inputs, "images=32x3x640x640, mask=32x1");
  EXPECT_EQ(splits[1].split, kSplitLanesInStep);
  EXPECT_STREQ(split_words(kSplitLanes), "two halves on two streams");
  EXPECT_EQ(split_words("lanes4"), nullptr);
}

TEST_F(PlanEngine, Fp32DynamicBatch) {
  BuildOptions opt;
  auto e = check_same(dynamic_model(), opt, {{1, 3, 8, 8}, {3, 3, 8, 8}});
  ASSERT_TRUE(e);
  EXPECT_EQ(header_.target, "cpu");
  EXPECT_EQ(header_.precision, "fp32");
  EXPECT_EQ(header_.sm, 0u);
  EXPECT_EQ(header_.qdeploy_version, QD_VERSION);
  ASSERT_EQ(header_.profile.size(), 1u);
  EXPECT_EQ(header_.profile[0].opt, (Shape{-1, 3, 8, 8}));
  check_same(model_path("model_bn.onnx"), opt, {{1, 3, 32, 32}});
}

TEST_F(PlanEngine, Int8ExactAndFakeWithoutTheCacheFile) {
  const std::string cache = model_bn_cache();
  for (const char* mode : {"exact", "fake", "bitexact"}) {  // bitexact: on the CPU the same as exact
    SCOPED_TRACE(mode);
    BuildOptions opt;
    opt.precision = Precision::kInt8;
    opt.int8_mode = mode;
    opt.calib_cache = cache;
    opt.fp32_layers = {"/linear/.*"};  // a regex: the plan stores the names it matched
    auto built = build_engine(model_path("model_bn.onnx"), opt);
    ASSERT_TRUE(built) << built.status().to_string();
    EXPECT_NE((*built)->describe().find("int8"), std::string::npos);
    check_same(model_path("model_bn.onnx"), opt, {{1, 3, 32, 32}});
    auto plan = read_plan(dir_ + "/m.plan");
    ASSERT_TRUE(plan);
    EXPECT_NE(plan->find("int8"), nullptr);
    auto layers = decode_plan_layers(plan->find("layers")->data);
    ASSERT_TRUE(layers);
    int int8 = 0;
    for (const auto& l : *layers) {
      int8 += l.precision == "int8";
      if (l.name == "/linear/Gemm") {
        EXPECT_EQ(l.precision, "float (asked)");
      }
    }
    EXPECT_EQ(int8, 4);
    EXPECT_NE(plan->find("int8")->data.find("/linear/Gemm"), std::string::npos);
    EXPECT_EQ(plan->find("int8")->data.find("/linear/.*"), std::string::npos);
  }
  // The plan holds the scales: it loads without the cache file.
  fs::remove(cache);
  auto loaded = load_engine(dir_ + "/m.plan");
  ASSERT_TRUE(loaded) << loaded.status().to_string();
  EXPECT_TRUE((*loaded)->run({{"input", test::random_f32({1, 3, 32, 32}, 2)}}));
}

TEST_F(PlanEngine, DetectorInt8FakeWithShippedCache) {
  BuildOptions opt;
  opt.precision = Precision::kInt8;
  opt.int8_mode = "fake";
  opt.calib_cache = model_path("yolov5n_fmnist_det.cache");
  check_same(model_path("yolov5n_fmnist_det.onnx"), opt, {{1, 3, 640, 640}});
  EXPECT_EQ(header_.precision, "int8");
}

TEST_F(PlanEngine, QatModel) {
  BuildOptions opt;
  opt.precision = Precision::kInt8;
  opt.int8_mode = "fake";
  check_same(model_path("yolov5n_fmnist_det_qat.onnx"), opt, {{1, 3, 640, 640}});
}

// A QAT model with an asymmetric (uint8) activation pair before a padded conv (as qdeploy.qat --asymmetric-activations
// exports): the INT8 engines compute what the Q/DQ model run literally in fp32 computes, borders included, up to float
// rounding, and the plan keeps the zero point.
TEST_F(PlanEngine, AsymmetricQatModel) {
  using namespace test::onnxb;
  onnx::ModelProto m = empty_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {1, 3, 8, 8});
  *g->add_initializer() = tensor_f32("s", {}, {2.28f / 255});
  onnx::TensorProto zp;
  zp.set_name("zp");
  zp.set_data_type(onnx::TensorProto::UINT8);
  zp.set_raw_data(std::string(1, static_cast<char>(31)));
  *g->add_initializer() = zp;
  *g->add_initializer() = tensor_f32("w", {4, 3, 3, 3}, ramp(4 * 3 * 3 * 3));
  *g->add_initializer() = tensor_f32("sw", {4}, {1e-3f, 2e-3f, 1e-3f, 7e-4f});  // |w| <= 0.08: no clipping
  onnx::TensorProto zw;
  zw.set_name("zw");
  zw.set_data_type(onnx::TensorProto::INT8);
  zw.add_dims(4);
  zw.set_raw_data(std::string(4, '\0'));
  *g->add_initializer() = zw;
  *g->add_initializer() = tensor_f32("b", {4}, {0.1f, -0.1f, 0.2f, 0.f});
  add_node(g, "QuantizeLinear", {"x", "s", "zp"}, {"xq"}, "q");
  add_node(g, "DequantizeLinear", {"xq", "s", "zp"}, {"xdq"}, "dq");
  attr_int(add_node(g, "QuantizeLinear", {"w", "sw", "zw"}, {"wq"}, "qw"), "axis", 0);
  attr_int(add_node(g, "DequantizeLinear", {"wq", "sw", "zw"}, {"wdq"}, "dqw"), "axis", 0);
  attr_ints(add_node(g, "Conv", {"xdq", "wdq", "b"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  add_output(g, "y");
  const std::string model = write_model(dir_, m, "asym.onnx");
  const Tensor x = test::random_f32({1, 3, 8, 8}, 3, -0.28f, 2.f);
  auto literal = build_engine(model, BuildOptions{});  // fp32: the Q/DQ nodes run as ops
  ASSERT_TRUE(literal) << literal.status().to_string();
  const Tensor want = (*(*literal)->run({{"x", x}}))[0];
  for (const char* mode : {"exact", "fake"}) {
    SCOPED_TRACE(mode);
    BuildOptions opt;
    opt.precision = Precision::kInt8;
    opt.int8_mode = mode;
    auto e = check_same(model, opt, {{1, 3, 8, 8}});
    ASSERT_TRUE(e);
    EXPECT_NE(e->describe().find("1 activations asymmetric (uint8)"), std::string::npos) << e->describe();
    auto y = e->run({{"x", x}});
    ASSERT_TRUE(y) << y.status().to_string();
    EXPECT_LT(test::max_abs_diff((*y)[0], want), 1e-5);
    auto plan = read_plan(dir_ + "/m.plan");
    ASSERT_TRUE(plan);
    auto int8 = decode_int8_options(plan->find("int8")->data);
    ASSERT_TRUE(int8) << int8.status().to_string();
    EXPECT_EQ(int8->act_zero_points, (std::map<std::string, int>{{"x", 31}}));
  }
}

TEST_F(PlanEngine, ShapeProfile) {
  BuildOptions opt;
  opt.min_shapes["x"] = {1, 3, 8, 8};
  opt.opt_shapes["x"] = {2, 3, 8, 8};
  opt.max_shapes["x"] = {4, 3, 8, 8};
  const std::string model = dynamic_model();
  auto e = check_same(model, opt, {{1, 3, 8, 8}, {4, 3, 8, 8}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->inputs()[0].shape, (Shape{-1, 3, 8, 8}));
  ASSERT_EQ(header_.profile.size(), 1u);
  EXPECT_EQ(header_.profile[0].max, (Shape{4, 3, 8, 8}));
  auto outside = e->run({{"x", test::random_f32({5, 3, 8, 8}, 1)}});
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.status().message().find("outside the engine's shape profile"), std::string::npos)
      << outside.status().message();

  BuildOptions bad = opt;
  bad.max_shapes["x"] = {1, 3, 8, 8};  // opt > max
  auto b = build_engine(model, bad);
  ASSERT_FALSE(b);
  EXPECT_NE(b.status().message().find("min <= opt <= max"), std::string::npos);
  BuildOptions unknown;
  unknown.min_shapes["nope"] = unknown.opt_shapes["nope"] = unknown.max_shapes["nope"] = {1};
  EXPECT_FALSE(build_engine(model, unknown));
}

TEST_F(PlanEngine, NotAPlanAndCudaPlans) {
  EXPECT_FALSE(is_plan_file(model_path("model_bn.onnx")));
  EXPECT_FALSE(is_plan_file(dir_ + "/absent"));
  EXPECT_FALSE(is_plan_file(dir_));
  auto onnx = load_engine(model_path("model_bn.onnx"));
  ASSERT_FALSE(onnx);
  EXPECT_NE(onnx.status().message().find("not a qdeploy plan"), std::string::npos);

  PlanFile cuda;
  cuda.header.target = "cuda";
  cuda.header.sm = 90;
  cuda.add("kernels", "...");
  ASSERT_TRUE(write_plan(dir_ + "/cuda.plan", cuda).is_ok());
  auto e = load_engine(dir_ + "/cuda.plan");
  ASSERT_FALSE(e);  // no CUDA backend here, or a GPU engine that finds no valid kernels section
  EXPECT_NE(e.status().code(), StatusCode::kInternal) << e.status().to_string();
}

TEST_F(PlanEngine, DamagedSectionsAreErrors) {
  BuildOptions opt;
  auto built = build_engine(model_path("model_bn.onnx"), opt);
  ASSERT_TRUE(built);
  ASSERT_TRUE((*built)->save(dir_ + "/m.plan").is_ok());
  auto plan = read_plan(dir_ + "/m.plan");
  ASSERT_TRUE(plan);
  // A plan whose sections disagree with the header (a resealed edit): clean errors.
  PlanFile p = *plan;
  p.header.precision = "int8";
  ASSERT_TRUE(write_plan(dir_ + "/p1.plan", p).is_ok());
  auto e1 = load_engine(dir_ + "/p1.plan");
  ASSERT_FALSE(e1);
  EXPECT_NE(e1.status().message().find("disagree"), std::string::npos) << e1.status().message();
  p = *plan;
  for (auto& s : p.sections) {
    if (s.name == "graph") s.data.resize(s.data.size() / 2);
  }
  ASSERT_TRUE(write_plan(dir_ + "/p2.plan", p).is_ok());
  auto e2 = load_engine(dir_ + "/p2.plan");
  ASSERT_FALSE(e2);
  EXPECT_NE(e2.status().message().find("truncated"), std::string::npos) << e2.status().message();
  p = *plan;
  p.sections.erase(p.sections.begin());
  for (auto it = p.sections.begin(); it != p.sections.end();) it = it->name == "graph" ? p.sections.erase(it) : it + 1;
  ASSERT_TRUE(write_plan(dir_ + "/p3.plan", p).is_ok());
  EXPECT_FALSE(load_engine(dir_ + "/p3.plan"));
}

TEST(PlanSections, Int8OptionsAndBuildOptions) {
  Int8Options o;
  o.mode = Int8Mode::kFake;
  o.act_scales = {{"x", 0.5f}, {"y", 1e-3f}};
  o.weight_scales = {{"w", {0.1f, 0.2f}}};
  o.float_node_names = {"head", "/linear/Gemm"};
  auto back = decode_int8_options(encode_int8_options(o));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->mode, Int8Mode::kFake);
  EXPECT_EQ(back->act_scales, o.act_scales);
  EXPECT_EQ(back->weight_scales, o.weight_scales);
  EXPECT_EQ(back->float_node_names, o.float_node_names);
  EXPECT_TRUE(back->float_nodes.empty());
  EXPECT_TRUE(back->act_zero_points.empty());
  o.mode = Int8Mode::kExactDla;  // DLA rounding survives the plan
  back = decode_int8_options(encode_int8_options(o));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->mode, Int8Mode::kExactDla);
  o.mode = Int8Mode::kFake;
  o.act_zero_points = {{"y", 37}};  // asymmetric activations keep their zero points
  back = decode_int8_options(encode_int8_options(o));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->act_zero_points, o.act_zero_points);
  o.act_zero_points = {{"nope", 1}};
  back = decode_int8_options(encode_int8_options(o));
  ASSERT_FALSE(back);
  EXPECT_NE(back.status().message().find("has no scale"), std::string::npos) << back.status().to_string();
  o.act_zero_points.clear();
  for (float bad : {0.f, -1.f, NAN, INFINITY}) {
    o.act_scales["x"] = bad;
    auto b = decode_int8_options(encode_int8_options(o));
    ASSERT_FALSE(b);
    EXPECT_NE(b.status().message().find("invalid scale"), std::string::npos);
  }

  BuildOptions opt;
  opt.precision = Precision::kInt8;
  opt.int8_mode = "fake";
  opt.shapes["x"] = {1, 3, 8, 8};
  opt.fp32_layers = {"a.*"};
  opt.min_shapes["y"] = {1};
  opt.opt_shapes["y"] = {2};
  opt.max_shapes["y"] = {3};
  auto ob = decode_build_options(encode_build_options(opt));
  ASSERT_TRUE(ob) << ob.status().to_string();
  EXPECT_EQ(ob->shapes, opt.shapes);
  EXPECT_EQ(ob->fp32_layers, opt.fp32_layers);
  EXPECT_EQ(ob->max_shapes, opt.max_shapes);
  opt.device = "cuda";
  opt.input_formats = {"int8:nhwc"};
  opt.output_formats = {"fp16"};
  ob = decode_build_options(encode_build_options(opt));
  ASSERT_TRUE(ob) << ob.status().to_string();
  EXPECT_EQ(ob->input_formats, opt.input_formats);
  EXPECT_EQ(ob->output_formats, opt.output_formats);
  opt.input_formats = {"int8:hwc4"};
  EXPECT_FALSE(decode_build_options(encode_build_options(opt)));
  opt.device = "cpu";
  opt.input_formats = {"int8:nhwc"};
  EXPECT_FALSE(decode_build_options(encode_build_options(opt))) << "a CPU plan with an I/O format";
  opt.input_formats.clear();
  opt.output_formats.clear();
  opt.int8_mode = "sloppy";
  EXPECT_FALSE(decode_build_options(encode_build_options(opt)));
  opt.int8_mode = "fake";
  opt.max_shapes["y"] = {1};
  EXPECT_FALSE(decode_build_options(encode_build_options(opt)));
}

}  // namespace
}  // namespace qd
