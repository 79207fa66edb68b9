// The CUDA target's and the CPU reference's answers (plan/target.h) on one-node graphs, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/cuda_target.h"
#include "ops/op.h"
#include "ops/op_traits.h"
#include "passes/passes.h"
#include "runtime/cpu_target.h"
#include "test_util.h"

namespace qd {
namespace {

// x (input) [and x2] -> op(x, constants...) -> y, shapes inferred.
Graph one_node(OpType op, AttrMap attrs, Shape in, std::vector<Tensor> constants = {}, bool two_inputs = false) {
  Graph g;
  g.opset = 13;
  std::vector<int> ins;
  for (int k = 0; k < (two_inputs ? 2 : 1); ++k) {
    const int x = g.add_value("x" + std::to_string(k));
    g.values[x].dtype = DType::kFloat32;
    g.values[x].shape = in;
    g.values[x].has_shape = true;
    g.inputs.push_back(x);
    ins.push_back(x);
  }
  for (size_t i = 0; i < constants.size(); ++i) ins.push_back(g.add_constant("c" + std::to_string(i), constants[i]));
  const int y = g.add_value("y");
  g.nodes.push_back(Node{"n", op, 13, attrs, ins, {y}});
  g.outputs = {y};
  g.relink();
  EXPECT_TRUE(prepare_graph(g, {}).is_ok()) << op_name(op);
  return g;
}

Support ask(const Target& t, const Graph& g, TensorPrecision in, TensorPrecision out = TensorPrecision::kFp32) {
  NodeFormats f = uniform_formats(g, g.nodes[0], out);
  std::fill(f.inputs.begin(), f.inputs.end(), in);
  return t.supports(g, g.nodes[0], f);
}

constexpr auto kF32 = TensorPrecision::kFp32;
constexpr auto kF16 = TensorPrecision::kFp16;
constexpr auto kI8 = TensorPrecision::kInt8;

TEST(CudaTarget, ConvsByPrecisionAndGroups) {
  const cuda::CudaTarget t;
  const Graph conv = one_node(OpType::Conv, {}, {1, 16, 8, 8}, {Tensor(DType::kFloat32, {32, 16, 3, 3})});
  EXPECT_TRUE(ask(t, conv, kF32).yes);
  EXPECT_TRUE(ask(t, conv, kF16, kF16).yes);
  const Support i8 = ask(t, conv, kI8);
  EXPECT_TRUE(i8.yes);
  EXPECT_NE(i8.reason.find("INT8 tensor-core"), std::string::npos) << i8.reason;
  AttrMap grouped;
  grouped.set("group", int64_t{4});
  const Graph gconv = one_node(OpType::Conv, grouped, {1, 16, 8, 8}, {Tensor(DType::kFloat32, {16, 4, 3, 3})});
  EXPECT_TRUE(ask(t, gconv, kF32).yes);
  EXPECT_TRUE(ask(t, gconv, kI8).yes);
  const Support g16 = ask(t, gconv, kF16, kF16);
  EXPECT_TRUE(g16.yes);
  EXPECT_NE(g16.reason.find("conv_grouped_f16"), std::string::npos) << g16.reason;
  // Weights computed at run time: float only.
  const Graph dyn = one_node(OpType::Conv, {}, {16, 16, 3, 3}, {}, true);
  EXPECT_TRUE(ask(t, dyn, kF32).yes);
  EXPECT_FALSE(ask(t, dyn, kI8).yes);
  EXPECT_FALSE(ask(t, dyn, kF16, kF16).yes);
}

TEST(CudaTarget, Int8LinearLayersNeedConstantWeights) {
  const cuda::CudaTarget t;
  AttrMap tb;
  tb.set("transB", int64_t{1});
  const Graph gemm = one_node(OpType::Gemm, tb, {4, 16}, {Tensor(DType::kFloat32, {8, 16})});
  EXPECT_TRUE(ask(t, gemm, kI8).yes);
  EXPECT_TRUE(cuda::linear_operands(gemm, gemm.nodes[0]).has_value());
  const Graph dyn = one_node(OpType::Gemm, {}, {16, 16}, {}, true);
  EXPECT_FALSE(ask(t, dyn, kI8).yes);
  EXPECT_FALSE(cuda::linear_operands(dyn, dyn.nodes[0]).has_value());
  // A MatMul by [C, K] weights over channels-last rows (any C: the int8 rows are padded to 16 bytes).
  const Support mm = ask(t, one_node(OpType::MatMul, {}, {2, 5, 7, 30}, {Tensor(DType::kFloat32, {30, 12})}), kI8);
  EXPECT_TRUE(mm.yes) << mm.reason;
  EXPECT_NE(mm.reason.find("70 rows"), std::string::npos) << mm.reason;
  EXPECT_FALSE(ask(t, one_node(OpType::MatMul, {}, {16, 16}, {}, true), kI8).yes) << "run-time weights";
  EXPECT_FALSE(ask(t, one_node(OpType::MatMul, {}, {2, 4, 16}, {Tensor(DType::kFloat32, {2, 16, 8})}), kI8).yes)
      << "batched weights";
}

// Which of the plan's INT8 nodes the CUDA build runs in INT8: convs, and linear layers with linear operands whose
// input no INT8 conv reads (one int8 copy per tensor: NHWC pixels or rows).
TEST(CudaTarget, Int8NodesOneCopyPerTensor) {
  test::GraphBuilder b;
  const int x = b.input("x", {1, 16, 4, 4});
  const int c = b.node(OpType::Conv, "conv", {x, b.constant("wc", test::random_f32({16, 16, 1, 1}, 1))});
  // x read by the INT8 conv and, as rows of 4 values, by a MatMul; c read by a MatMul alone.
  const int m1 = b.node(OpType::MatMul, "mm_x", {x, b.constant("w1", test::random_f32({4, 8}, 2))});
  const int m2 = b.node(OpType::MatMul, "mm_c", {c, b.constant("w2", test::random_f32({4, 8}, 3))});
  const int m3 = b.node(OpType::MatMul, "mm_run_time", {c, c});
  b.g.outputs = {m1, m2, m3};
  const Graph g = b.prepared();
  EXPECT_EQ(cuda::cuda_int8_nodes(g, {"conv", "mm_x", "mm_c", "mm_run_time"}), (std::set<std::string>{"conv", "mm_c"}));
  EXPECT_EQ(cuda::cuda_int8_nodes(g, {"mm_x", "mm_c"}), (std::set<std::string>{"mm_x", "mm_c"}))
      << "without the INT8 conv, x's int8 copy is rows";
}

// fp16 plans run linear layers with constant weights as 1x1 fp16 convs over their rows (16-byte multiples).
TEST(CudaTarget, Fp16LinearLayers) {
  const cuda::CudaTarget t;
  AttrMap tb;
  tb.set("transB", int64_t{1});
  EXPECT_TRUE(ask(t, one_node(OpType::Gemm, tb, {4, 16}, {Tensor(DType::kFloat32, {8, 16})}), kF16, kF16).yes);
  const Graph mm = one_node(OpType::MatMul, {}, {2, 5, 7, 16}, {Tensor(DType::kFloat32, {16, 12})});
  const auto lin = cuda::linear_operands(mm, mm.nodes[0]);
  ASSERT_TRUE(lin.has_value());
  EXPECT_EQ(lin->N, 70);
  EXPECT_EQ(lin->C, 16);
  EXPECT_EQ(lin->K, 12);
  const Support s = ask(t, mm, kF16, kF16);
  EXPECT_TRUE(s.yes) << s.reason;
  EXPECT_NE(s.reason.find("70 rows"), std::string::npos) << s.reason;
  EXPECT_FALSE(ask(t, one_node(OpType::MatMul, {}, {3, 12}, {Tensor(DType::kFloat32, {12, 8})}), kF16, kF16).yes)
      << "rows of 12 fp16 values are no 16-byte multiple";
  EXPECT_FALSE(ask(t, one_node(OpType::MatMul, {}, {16, 16}, {}, true), kF16, kF16).yes) << "run-time weights";
  AttrMap ta;
  ta.set("transA", int64_t{1});
  const Graph gta = one_node(OpType::Gemm, ta, {16, 4}, {Tensor(DType::kFloat32, {16, 8})});
  EXPECT_FALSE(cuda::linear_operands(gta, gta.nodes[0]).has_value()) << "transA";
  EXPECT_TRUE(ask(t, mm, kF32).yes) << "fp32 plans: the generic kernel";
}

TEST(CudaTarget, NhwcMovementLayers) {
  const cuda::CudaTarget t;
  AttrMap axis1;
  axis1.set("axis", int64_t{1});
  EXPECT_TRUE(ask(t, one_node(OpType::Concat, axis1, {1, 16, 4, 4}, {}, true), kF16, kF16).yes);
  EXPECT_TRUE(ask(t, one_node(OpType::Concat, axis1, {1, 16, 4, 4}, {}, true), kI8, kI8).yes);
  EXPECT_FALSE(ask(t, one_node(OpType::Concat, axis1, {1, 3, 4, 4}, {}, true), kF16, kF16).yes);  // 3 channels
  AttrMap axis2;
  axis2.set("axis", int64_t{2});
  EXPECT_FALSE(ask(t, one_node(OpType::Concat, axis2, {1, 16, 4, 4}, {}, true), kF16, kF16).yes);
  AttrMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{3, 3});
  EXPECT_TRUE(ask(t, one_node(OpType::MaxPool, pool, {1, 16, 8, 8}), kF16, kF16).yes);
  EXPECT_TRUE(ask(t, one_node(OpType::MaxPool, pool, {1, 16, 8, 8}), kF32).yes);
  // Resize: nearest upsampling by integer factors only.
  const auto resize = [&](const char* mode, const char* ctm, float f) {
    AttrMap a;
    a.set("mode", std::string(mode));
    a.set("coordinate_transformation_mode", std::string(ctm));
    a.set("nearest_mode", std::string("floor"));
    Tensor scales(DType::kFloat32, {4});
    const float v[4] = {1.f, 1.f, f, f};
    std::copy(v, v + 4, scales.data<float>());
    Graph g = one_node(OpType::Resize, a, {1, 16, 4, 4}, {Tensor(DType::kFloat32, {0}), scales});
    return ask(t, g, kF16, kF16);
  };
  EXPECT_TRUE(resize("nearest", "asymmetric", 2.f).yes);
  EXPECT_FALSE(resize("nearest", "asymmetric", 1.5f).yes);  // 4 -> 6: not an integer factor
  EXPECT_FALSE(resize("linear", "asymmetric", 2.f).yes);
  // Other ops run in their ONNX dtype.
  const Support relu16 = ask(t, one_node(OpType::Relu, {}, {1, 16, 8, 8}), kF16, kF16);
  EXPECT_FALSE(relu16.yes);
  EXPECT_NE(relu16.reason.find("ONNX dtype"), std::string::npos) << relu16.reason;
  EXPECT_FALSE(ask(t, one_node(OpType::Relu, {}, {1, 16, 8, 8}), kI8, kI8).yes);
}

// In fp32 the CUDA target runs an op exactly when ops.def gives it a CUDA family.
TEST(CudaTarget, Fp32FollowsTheCudaTrait) {
  const cuda::CudaTarget t;
  for (OpType op : {OpType::Relu, OpType::Softmax, OpType::Einsum, OpType::ConvInteger, OpType::MatMulInteger,
                    OpType::Transpose, OpType::LayerNormalization}) {
    Graph g;
    const int x = g.add_value("x"), y = g.add_value("y");
    g.nodes.push_back(Node{"n", op, 13, {}, {x}, {y}});
    const Support s = t.supports(g, g.nodes[0], uniform_formats(g, g.nodes[0], kF32));
    const bool has_family = op_traits(op).cuda != CudaFamily::kReferenceOnly;
    EXPECT_EQ(s.yes, has_family) << op_name(op) << ": " << s.reason;
    if (!has_family) {
      EXPECT_NE(s.reason.find("has no CUDA kernel"), std::string::npos) << s.reason;
    }
  }
}

TEST(CpuTarget, Fp32EverywhereInt8OnWeightOps) {
  const CpuTarget t;
  const Graph conv = one_node(OpType::Conv, {}, {1, 16, 8, 8}, {Tensor(DType::kFloat32, {32, 16, 3, 3})});
  EXPECT_TRUE(ask(t, conv, kF32).yes);
  EXPECT_TRUE(ask(t, conv, kI8).yes);
  const Support half = ask(t, conv, kF16, kF16);
  EXPECT_FALSE(half.yes);
  EXPECT_NE(half.reason.find("fp32"), std::string::npos) << half.reason;
  const Graph relu = one_node(OpType::Relu, {}, {1, 16, 8, 8});
  EXPECT_TRUE(ask(t, relu, kF32).yes);
  EXPECT_FALSE(ask(t, relu, kI8, kI8).yes);
  Graph g;  // reference-only on CUDA, fine on the reference
  const int x = g.add_value("x"), y = g.add_value("y");
  g.nodes.push_back(Node{"n", OpType::Einsum, 13, {}, {x}, {y}});
  EXPECT_TRUE(t.supports(g, g.nodes[0], uniform_formats(g, g.nodes[0], kF32)).yes);
}

}  // namespace
}  // namespace qd
