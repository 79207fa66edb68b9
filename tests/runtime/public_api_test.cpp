// The public API (include/qdeploy/): typed build options, engines and contexts on the CPU (the GPU-only calls answer
// kUnsupported), plans, KernelPolicy as text and in the plan, and the detector's steps against its detect().
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "plan/plan_file.h"
#include "qdeploy/qdeploy.h"
#include "runtime/plan_sections.h"
#include "runtime/public_types.h"
#include "test_util.h"

namespace qd {
namespace {

TEST(KernelPolicy, DefaultsAreEmptyAndWordsRoundTrip) {
  qdeploy::KernelPolicy p;
  EXPECT_EQ(p.to_string(), "");
  EXPECT_TRUE(p.is_default());
  p.pdl = false;
  p.side_stream = false;
  p.warp_halo_s2 = false;
  p.batch_split = qdeploy::BatchSplit::kLanesInStep;
  p.only_config = "tma_i8,128x128";  // a comma inside: only-config comes last and takes the rest
  const std::string text = p.to_string();
  EXPECT_EQ(text, "no-warp-halo-s2,no-pdl,no-side-stream,split=lanes2_step,only-config=tma_i8,128x128");
  auto q = qdeploy::KernelPolicy::parse(text);
  ASSERT_TRUE(q) << q.status().message();
  EXPECT_TRUE(*q == p);
  EXPECT_FALSE(q->pdl);
  EXPECT_TRUE(q->wgmma);
  EXPECT_TRUE(qdeploy::KernelPolicy::parse("")->is_default());
  auto bad = qdeploy::KernelPolicy::parse("no-pdl,no-such-thing");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), qdeploy::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown word 'no-such-thing'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("no-graph-refine"), std::string::npos);  // lists the known words
  EXPECT_FALSE(qdeploy::KernelPolicy::parse("split=lanes4"));
}

TEST(KernelPolicy, RecordedInTheBuildOptionsSection) {
  BuildOptions opt;
  opt.device = "cuda";
  opt.precision = Precision::kFp16;
  opt.kernel_policy.graph_refine = false;
  opt.kernel_policy.batch_split = qdeploy::BatchSplit::kWhole;
  auto back = decode_build_options(encode_build_options(opt));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->kernel_policy.to_string(), "no-graph-refine,split=whole");
  BuildOptions plain;
  EXPECT_TRUE(decode_build_options(encode_build_options(plain))->kernel_policy.is_default());
}

TEST(PlanFormat, APlanOfThePreviousFormatIsRefusedWithRebuild) {
  PlanFile plan;
  plan.header.target = "cpu";
  plan.header.precision = "fp32";
  plan.add("io", "");
  auto bytes = encode_plan(plan);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  std::string old = *bytes;
  const uint32_t prev = kPlanFormatVersion - 1;
  std::memcpy(&old[8], &prev, 4);
  auto decoded = decode_plan(reinterpret_cast<const uint8_t*>(old.data()), old.size());
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.status().message(), "plan format v" + std::to_string(prev) + ", this qdeploy reads v" +
                                            std::to_string(kPlanFormatVersion) +
                                            ": rebuild the plan with `qdeploy build`");
}

class PublicApi : public ::testing::Test {
 protected:
  const std::string model = test::source_dir() + "/models/model_bn.onnx";
  qdeploy::HostTensor input() const {
    const Tensor x = test::random_f32({1, 3, 32, 32}, 3);
    return to_public(x);
  }
};

TEST_F(PublicApi, CpuEngineRunsThroughAContext) {
  qdeploy::BuildOptions opt;  // the CPU, fp32
  auto engine = qdeploy::build(model, opt);
  ASSERT_TRUE(engine) << engine.status().message();
  EXPECT_EQ(engine->device(), qdeploy::Device::kCpu);
  EXPECT_EQ(engine->device_name(), "cpu");
  ASSERT_EQ(engine->inputs().size(), 1u);
  const std::string in = engine->inputs()[0].name;
  EXPECT_EQ(engine->inputs()[0].dtype, qdeploy::DataType::kFloat32);
  auto direct = engine->run({{in, input()}});
  ASSERT_TRUE(direct) << direct.status().message();

  auto ctx = engine->create_context();
  ASSERT_TRUE(ctx) << ctx.status().message();
  qdeploy::ExecutionContext& c = **ctx;
  ASSERT_TRUE(c.set_input_shapes({{in, {1, 3, 32, 32}}}));
  ASSERT_TRUE(c.upload({{in, input()}}, nullptr));
  ASSERT_TRUE(c.enqueue(nullptr));
  auto out = c.download(nullptr);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(out->size(), direct->size());
  ASSERT_EQ((*out)[0].nbytes(), (*direct)[0].nbytes());
  EXPECT_EQ(std::memcmp((*out)[0].data(), (*direct)[0].data(), (*out)[0].nbytes()), 0);
  EXPECT_EQ(c.outputs()[0].shape, (*out)[0].shape());
  EXPECT_EQ(c.batch_split(), "whole");

  // What only a GPU engine has: kUnsupported, saying what to use.
  void* a_stream = reinterpret_cast<void*>(1);  // never dereferenced: the CPU context refuses streams
  for (const qdeploy::Status& s : {c.bind(in, nullptr), c.use_cuda_graph(true), c.enqueue(a_stream)}) {
    EXPECT_EQ(s.code(), qdeploy::StatusCode::kUnsupported);
    EXPECT_NE(s.message().find("needs a CUDA engine"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(c.use_cuda_graph(false));
  EXPECT_EQ(c.device_buffer(in), nullptr);
  EXPECT_EQ(c.profile(2, nullptr).status().code(), qdeploy::StatusCode::kUnsupported);
  EXPECT_EQ(c.memory_report().status().code(), qdeploy::StatusCode::kUnsupported);
  EXPECT_EQ(engine->layer_info({{in, {1, 3, 32, 32}}}).status().code(), qdeploy::StatusCode::kUnsupported);
  EXPECT_EQ(engine->memory_report({{in, {1, 3, 32, 32}}}).status().code(), qdeploy::StatusCode::kUnsupported);
  // A bad shape is the library's error, as the public status.
  const qdeploy::Status bad = c.set_input_shapes({{in, {1, 3, 31, 32}}});
  EXPECT_FALSE(bad);
}

TEST_F(PublicApi, PlansKeepTheTypedOptions) {
  qdeploy::BuildOptions opt;
  opt.int8_mode = qdeploy::Int8Mode::kFake;  // recorded as given (it matters for INT8 builds)
  opt.tactic_sources = {qdeploy::TacticSource::kQdeploy};
  opt.shapes = {{"input", {1, 3, 32, 32}}};
  auto engine = qdeploy::build(model, opt);
  ASSERT_TRUE(engine) << engine.status().message();
  const std::string path = test::temp_dir("public_api") + "/m.plan";
  ASSERT_TRUE(engine->save(path));
  EXPECT_TRUE(qdeploy::is_plan(path));
  EXPECT_FALSE(qdeploy::is_plan(model));
  auto loaded = qdeploy::load(path);
  ASSERT_TRUE(loaded) << loaded.status().message();
  const qdeploy::BuildOptions o = loaded->options();
  EXPECT_EQ(o.precision, qdeploy::Precision::kFp32);
  EXPECT_EQ(o.int8_mode, qdeploy::Int8Mode::kFake);
  EXPECT_EQ(o.tactic_sources, std::vector<qdeploy::TacticSource>{qdeploy::TacticSource::kQdeploy});
  EXPECT_EQ(o.device, qdeploy::Device::kCpu);
  EXPECT_EQ(loaded->build_shapes().at("input"), (qdeploy::Dims{1, 3, 32, 32}));
  auto a = engine->run({{"input", input()}});
  auto b = loaded->run({{"input", input()}});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(std::memcmp((*a)[0].data(), (*b)[0].data(), (*a)[0].nbytes()), 0);

  auto missing = qdeploy::load(path + ".none");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find(".none"), std::string::npos) << missing.status().message();
}

TEST(PublicTypes, OptionsConvertBothWays) {
  qdeploy::BuildOptions o;
  o.device = qdeploy::Device::kCuda;
  o.precision = qdeploy::Precision::kFp16;
  o.tactic_sources = {qdeploy::TacticSource::kCudnn};
  o.input_formats = {{qdeploy::DataType::kInt8, qdeploy::Layout::kNHWC}};
  o.output_formats = {{qdeploy::DataType::kFloat16, qdeploy::Layout::kNCHW}};
  o.kernel_policy.tma = false;
  const BuildOptions b = from_public(o);
  EXPECT_EQ(b.device, "cuda");
  EXPECT_EQ(b.precision, Precision::kFp16);
  EXPECT_EQ(b.tactic_sources, std::vector<std::string>{"cudnn"});
  EXPECT_EQ(b.input_formats, std::vector<std::string>{"int8:nhwc"});
  EXPECT_EQ(b.output_formats, std::vector<std::string>{"fp16:nchw"});
  EXPECT_TRUE(check_build_options(b).is_ok());
  auto back = to_public(b);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->input_formats[0].layout, qdeploy::Layout::kNHWC);
  EXPECT_EQ(back->output_formats[0].dtype, qdeploy::DataType::kFloat16);
  EXPECT_FALSE(back->kernel_policy.tma);
  // A build of it without a GPU (or without the CUDA backend) is a clear error, not a crash.
  if (!qdeploy::has_cuda()) {
    auto e = qdeploy::build(test::source_dir() + "/models/model_bn.onnx", o);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.status().code(), qdeploy::StatusCode::kUnsupported);
  }
}

TEST(PublicDetector, StepsGiveWhatDetectGives) {
  auto engine = qdeploy::build(test::source_dir() + "/models/yolov5n_fmnist_det.onnx", {});
  ASSERT_TRUE(engine) << engine.status().message();
  auto det = qdeploy::Detector::create(*engine);
  ASSERT_TRUE(det) << det.status().message();
  EXPECT_EQ(det->num_classes(), 10);
  auto image = qdeploy::read_image(test::source_dir() + "/models/samples/000001.jpg");
  ASSERT_TRUE(image) << image.status().message();
  auto all = det->detect({&*image});
  ASSERT_TRUE(all) << all.status().message();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_FALSE((*all)[0].empty());
  auto batch = det->letterbox({&*image});
  ASSERT_TRUE(batch) << batch.status().message();
  EXPECT_EQ(batch->tensor.shape(), (qdeploy::Dims{1, 3, det->input_height(), det->input_width()}));
  auto out = engine->run({{engine->inputs()[0].name, batch->tensor}});
  ASSERT_TRUE(out) << out.status().message();
  auto steps = det->decode(*out, *batch);
  ASSERT_TRUE(steps) << steps.status().message();
  ASSERT_EQ((*steps)[0].size(), (*all)[0].size());
  for (size_t i = 0; i < (*all)[0].size(); ++i) {
    EXPECT_EQ((*steps)[0][i].class_id, (*all)[0][i].class_id);
    EXPECT_EQ((*steps)[0][i].x1, (*all)[0][i].x1);
    EXPECT_EQ((*steps)[0][i].score, (*all)[0][i].score);
  }
  EXPECT_EQ(qdeploy::class_name((*all)[0][0].class_id, 10).find("class"), std::string::npos);  // Fashion-MNIST's
  qdeploy::Image broken;
  broken.width = 4;
  broken.height = 4;
  EXPECT_EQ(det->detect({&broken}).status().code(), qdeploy::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace qd
