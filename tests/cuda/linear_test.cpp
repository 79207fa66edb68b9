// Linear layers (MatMul with constant weights, Gemm) in fp16 plans run as 1x1 fp16 tensor-core convs over their
// input's rows, their bias Add in the epilogue; the others stay on the generic fp32 kernel.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "backends/cuda/cuda_engine.h"
#include "cuda/gpu_test.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "runtime/engine.h"
#include "test_util.h"

namespace qd {
namespace {

// x [2, 7, 5, 64] feeds a MatMul + bias Add (the bias as [1, 40]), a MatMul without bias whose result a Relu reads,
// and, through a Slice to 30 columns (rows that are no 16-byte multiple), a MatMul that stays generic; a Gemm
// (transB) with its bias over x reshaped to [70, 64] reads the same fp16 rows, and an Add of a constant follows it.
Graph linear_graph() {
  test::GraphBuilder b;
  const int x = b.input("x", {2, 7, 5, 64});
  const int y1 = b.node(OpType::MatMul, "fc1", {x, b.constant("w1", test::random_f32({64, 40}, 1, -0.2f, 0.2f))});
  const int z1 = b.node(OpType::Add, "fc1_bias", {b.constant("b1", test::random_f32({1, 40}, 2)), y1});
  const int y2 = b.node(OpType::MatMul, "fc2", {x, b.constant("w2", test::random_f32({64, 24}, 3, -0.2f, 0.2f))});
  const int r2 = b.node(OpType::Relu, "relu2", {y2});
  const int xs = b.node(OpType::Slice, "cut",
                        {x, b.constant("st", Tensor::from_i64({0})), b.constant("en", Tensor::from_i64({30})),
                         b.constant("ax", Tensor::from_i64({3}))});
  const int y3 = b.node(OpType::MatMul, "fc3", {xs, b.constant("w3", test::random_f32({30, 16}, 4, -0.2f, 0.2f))});
  const int flat = b.node(OpType::Reshape, "rows", {x, b.constant("sh", Tensor::from_i64({70, 64}))});
  AttrMap tb;
  tb.set("transB", int64_t{1});
  const int y4 = b.node(OpType::Gemm, "fc4",
                        {flat, b.constant("w4", test::random_f32({48, 64}, 5, -0.2f, 0.2f)),
                         b.constant("b4", test::random_f32({48}, 6))},
                        tb);
  // An Add after a Gemm with a bias stays apart: the Gemm's own bias is its epilogue's.
  const int z4 = b.node(OpType::Add, "fc4_add", {y4, b.constant("b5", test::random_f32({48}, 7))});
  b.g.outputs = {z1, r2, y3, z4};
  b.g.relink();
  return b.g;
}

TEST(CudaLinear, Fp16LinearsRunOnTensorCoresWithTheirBias) {
  SKIP_WITHOUT_GPU();
  const Graph g = linear_graph();
  std::map<std::string, Tensor> in{{"x", test::random_f32({2, 7, 5, 64}, 9, -1.f, 1.f)}};
  Graph ref_g = g;
  ASSERT_TRUE(prepare_graph(ref_g, {{{"x", in.at("x").shape()}}}).is_ok());
  auto ref = run_reference(ref_g, in);
  ASSERT_TRUE(ref) << ref.status().to_string();
  for (const char* precision : {"fp32", "fp16"}) {
    BuildOptions opt;
    opt.timing_cache = test::shared_timing_cache();
    opt.device = "cuda";
    opt.precision = *parse_precision(precision);
    auto engine = test::cuda_engine_of(g, opt);
    ASSERT_TRUE(engine);
    auto layers = engine->layer_info({{"x", in.at("x").shape()}});
    ASSERT_TRUE(layers);
    std::map<std::string, std::string> kind;
    int rows = 0;
    for (const auto& l : *layers) {
      kind[l.name] = l.kind + ":" + l.precision;
      rows += l.name == "x:to_f16_rows";
    }
    const bool fp16 = std::string(precision) == "fp16";
    if (fp16) {
      EXPECT_EQ(kind["fc1+fc1_bias"], "matmul:fp16");
      EXPECT_EQ(kind.count("fc1_bias"), 0u) << "the bias is the epilogue's";
      EXPECT_EQ(kind["fc2"], "matmul:fp16");
      EXPECT_EQ(kind["fc4"], "gemm:fp16") << "the Add after a Gemm with a bias is not fused";
      EXPECT_EQ(rows, 1) << "the rows of x are converted once, for fc1 and fc2";
      EXPECT_EQ(kind["fc3"].rfind("MatMul:", 0), 0u) << kind["fc3"] << ": rows of 30 values stay generic";
    } else {
      EXPECT_EQ(kind["fc1"].rfind("MatMul:", 0), 0u) << kind["fc1"];
      EXPECT_EQ(rows, 0);
    }
    auto out = engine->run(in);
    ASSERT_TRUE(out) << out.status().to_string();
    ASSERT_EQ(out->size(), ref->size());
    for (size_t i = 0; i < ref->size(); ++i) {
      ASSERT_EQ((*out)[i].shape(), (*ref)[i].shape());
      const double snr = test::snr_db((*ref)[i], (*out)[i]);
      std::cout << precision << " output " << i << ": SNR " << snr << " dB, max |diff| "
                << test::max_abs_diff((*ref)[i], (*out)[i]) << "\n";
      EXPECT_GE(snr, fp16 && i != 2 ? 55.0 : 100.0) << "output " << i;
    }
  }
}

// A channels-last block as ConvNeXt and InternImage stack them, on x [2, 6, 5, 64]: h = x W0 (fp32 out, an Add
// reads it); s = relu(x) + h; LayerNorm(s) read by two linear layers, one through a Reshape; fc1 + bias + GELU;
// fc2 + bias; out = s + fc2 (the residual stream, read on by a Relu) normalized again for a Relu (fp32 readers).
Graph block_graph() {
  test::GraphBuilder b;
  const int x = b.input("x", {2, 6, 5, 64});
  const int h = b.node(OpType::MatMul, "proj", {x, b.constant("w0", test::random_f32({64, 64}, 11, -0.2f, 0.2f))});
  const int r = b.node(OpType::Relu, "relu", {x});
  const int s = b.node(OpType::Add, "res1", {r, h});
  const int ln = b.node(OpType::LayerNormalization, "norm",
                        {s, b.constant("g", test::random_f32({64}, 12, 0.5f, 1.5f)),
                         b.constant("be", test::random_f32({64}, 13))});
  const int y1 = b.node(OpType::MatMul, "fc1", {ln, b.constant("w1", test::random_f32({64, 128}, 14, -0.2f, 0.2f))});
  const int z1 = b.node(OpType::Add, "fc1_bias", {y1, b.constant("b1", test::random_f32({128}, 15))});
  const int gl = b.node(OpType::Gelu, "gelu", {z1});
  const int y2 = b.node(OpType::MatMul, "fc2", {gl, b.constant("w2", test::random_f32({128, 64}, 16, -0.2f, 0.2f))});
  const int z2 = b.node(OpType::Add, "fc2_bias", {y2, b.constant("b2", test::random_f32({64}, 17))});
  const int flat = b.node(OpType::Reshape, "tokens", {ln, b.constant("sh", Tensor::from_i64({2, 30, 64}))});
  const int y3 = b.node(OpType::MatMul, "fc3", {flat, b.constant("w3", test::random_f32({64, 16}, 18, -0.2f, 0.2f))});
  const int out = b.node(OpType::Add, "res2", {s, z2});
  AttrMap ax;
  ax.set("axis", int64_t{-1});
  const int ln2 = b.node(OpType::LayerNormalization, "norm2", {out, b.constant("g2", test::random_f32({64}, 19))}, ax);
  const int r2 = b.node(OpType::Relu, "relu2", {ln2});
  const int next = b.node(OpType::Relu, "next", {out});
  b.g.outputs = {next, y3, r2};
  b.g.relink();
  return b.g;
}

// In fp16 plans the block's activations between its linear layers are fp16 rows: LayerNorm with the residual Add
// before it is one layer writing fp16 rows (the linear layers read them, through the Reshape too), fc1's GELU is its
// epilogue and its fp16 rows are what fc2 reads; only x is converted. Outputs against the reference.
TEST(CudaLinear, ChannelsLastBlocksKeepFp16RowsBetweenLinears) {
  SKIP_WITHOUT_GPU();
  const Graph g = block_graph();
  std::map<std::string, Tensor> in{{"x", test::random_f32({2, 6, 5, 64}, 20, -1.f, 1.f)}};
  Graph ref_g = g;
  ASSERT_TRUE(prepare_graph(ref_g, {{{"x", in.at("x").shape()}}}).is_ok());
  auto ref = run_reference(ref_g, in);
  ASSERT_TRUE(ref) << ref.status().to_string();
  BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  opt.device = "cuda";
  opt.precision = Precision::kFp16;
  auto engine = test::cuda_engine_of(g, opt);
  ASSERT_TRUE(engine);
  auto layers = engine->layer_info({{"x", in.at("x").shape()}});
  ASSERT_TRUE(layers);
  std::map<std::string, std::string> kind;
  int conversions = 0;
  for (const auto& l : *layers) {
    kind[l.name] = l.kernel + ":" + l.precision + ":" + l.out_format;
    conversions += l.kind == "reformat";
  }
  EXPECT_EQ(kind["res1+norm"], "add_layer_norm_rows:fp16:nhwc64:fp16");
  EXPECT_EQ(kind["fc1+fc1_bias+gelu"].rfind("nhwc128:fp16"), kind["fc1+fc1_bias+gelu"].size() - 12)
      << kind["fc1+fc1_bias+gelu"];
  EXPECT_EQ(kind.count("gelu"), 0u);
  EXPECT_EQ(kind["res2+norm2"], "add_layer_norm_rows:fp32:nchw:float32") << "a Relu reads it: fp32";
  EXPECT_EQ(conversions, 1) << "only x is converted to fp16 rows";
  auto out = engine->run(in);
  ASSERT_TRUE(out) << out.status().to_string();
  ASSERT_EQ(out->size(), ref->size());
  for (size_t i = 0; i < ref->size(); ++i) {
    const double snr = test::snr_db((*ref)[i], (*out)[i]);
    std::cout << "block output " << i << ": SNR " << snr << " dB, max |diff| "
              << test::max_abs_diff((*ref)[i], (*out)[i]) << "\n";
    EXPECT_GE(snr, 45.0) << "output " << i;
  }
}

// INT8 plans run the Linear layers (MatMul by [C, K] weights over channels-last rows) as 1x1 INT8 convs reading
// the rows' int8 copy, as the reference's exact INT8 mode quantizes them: the shipped ConvNeXt classifier with its
// cache, against the reference INT8 run (LayerNorm, GELU and the layer scale between them run in fp16 on the GPU).
TEST(CudaLinear, Int8LinearsMatchTheReferenceInt8) {
  SKIP_WITHOUT_GPU();
  const std::string model = test::source_dir() + "/models/convnext_fmnist.onnx";
  std::map<std::string, Tensor> in{{"input", test::random_f32({8, 3, 32, 32}, 5, 0.f, 1.f)}};
  BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  opt.precision = Precision::kInt8;
  opt.calib_cache = test::source_dir() + "/models/convnext_fmnist.cache";
  auto cpu = build_engine(model, opt);
  ASSERT_TRUE(cpu) << cpu.status().to_string();
  opt.device = "cuda";
  auto gpu = build_engine(model, opt);
  ASSERT_TRUE(gpu) << gpu.status().to_string();
  auto layers = dynamic_cast<cuda::CudaEngine&>(**gpu).layer_info({{"input", {8, 3, 32, 32}}});
  ASSERT_TRUE(layers);
  int int8_matmuls = 0;
  for (const auto& l : *layers) int8_matmuls += l.kind == "matmul" && l.precision == "int8";
  EXPECT_EQ(int8_matmuls, 8);
  auto a = (*cpu)->run(in), b = (*gpu)->run(in);
  ASSERT_TRUE(a && b) << b.status().to_string();
  const double snr = test::snr_db((*a)[0], (*b)[0]);
  std::cout << "convnext_fmnist int8: cuda vs reference INT8 logits SNR " << snr << " dB, max abs diff "
            << test::max_abs_diff((*a)[0], (*b)[0]) << "\n";
  EXPECT_GT(snr, 30.0);
}

// ConvNeXt's blocks (the shipped classifier: depthwise conv -> Transpose -> LayerNorm -> linear, GELU, linear ->
// Transpose -> layer scale -> residual Add) in an fp16 plan: the Transposes are views of the NHWC fp16 tensors, the
// LayerNorm reads the depthwise conv's output as fp16 rows, and the block's second linear layer takes the layer scale
// and the residual Add into its weights and epilogue, writing the NHWC fp16 tensor the next depthwise conv reads. No
// generic layer runs inside the stages; logits against the reference.
TEST(CudaLinear, ConvNextBlocksRunOnViewsAndEpilogues) {
  SKIP_WITHOUT_GPU();
  const std::string model = test::source_dir() + "/models/convnext_fmnist.onnx";
  std::map<std::string, Tensor> in{{"input", test::random_f32({8, 3, 32, 32}, 6, 0.f, 1.f)}};
  BuildOptions opt;
  auto cpu = build_engine(model, opt);
  ASSERT_TRUE(cpu) << cpu.status().to_string();
  opt.device = "cuda";
  opt.precision = Precision::kFp16;
  auto gpu = build_engine(model, opt);
  ASSERT_TRUE(gpu) << gpu.status().to_string();
  auto layers = dynamic_cast<cuda::CudaEngine&>(**gpu).layer_info({{"input", {8, 3, 32, 32}}});
  ASSERT_TRUE(layers);
  int block_ends = 0, row_norms_f16_in = 0, reformats = 0;
  for (const auto& l : *layers) {
    const bool in_stage = l.name.find("/features/") != std::string::npos;
    EXPECT_FALSE(in_stage && (l.kind == "Transpose" || l.kind == "Mul" || l.kind == "Add" || l.kind == "eltwise_chain"))
        << l.name << " (" << l.kind << ", " << l.kernel << ") runs as a layer";
    reformats += in_stage && l.kind == "reformat";
    if (l.kind == "matmul" && l.name.find("/Mul+") != std::string::npos && l.name.size() > 4 &&
        l.name.compare(l.name.size() - 4, 4, "/Add") == 0) {
      ++block_ends;
      EXPECT_EQ(l.out_format.rfind("nhwc", 0), 0u) << l.name << ": " << l.out_format;
    }
    row_norms_f16_in += l.kind == "LayerNormalization" && l.in_format.rfind("nhwc", 0) == 0;
  }
  EXPECT_EQ(block_ends, 4) << "one per block";
  EXPECT_EQ(row_norms_f16_in, 7) << "every LayerNorm inside the stages (stem, blocks, downsampling) reads fp16 rows";
  EXPECT_EQ(reformats, 1) << "only the last stage's output, for the global pooling";
  auto a = (*cpu)->run(in), b = (*gpu)->run(in);
  ASSERT_TRUE(a && b) << b.status().to_string();
  const double snr = test::snr_db((*a)[0], (*b)[0]);
  std::cout << "convnext_fmnist fp16: cuda vs reference logits SNR " << snr << " dB, max abs diff "
            << test::max_abs_diff((*a)[0], (*b)[0]) << "\n";
  EXPECT_GT(snr, 40.0);
}

}  // namespace
}  // namespace qd
