// The generic plugin harness on the GPU: every built-in plugin op's declared cases, in fp32 and fp16 storage, dense
// and with row-strided inputs (a column slice of a wider buffer), through every CUDA kernel that supports them and
// every tactic it offers, against the reference. And the fused-input DCNv4 model end to end: one GEMM for value and
// offsets, its slices read in place by the plugin layer, the engine's output against the CPU engine's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "backends/cuda/cuda_engine.h"
#include "core/file_io.h"
#include "gpu_test.h"
#include "onnx/onnx_builder.h"
#include "plugins/plugin_cases.h"
#include "qdeploy/plugin.h"
#include "runtime/engine.h"

namespace qd {
namespace {

double max_abs(const Tensor& t) {
  const Tensor f = test::to_f32(t);
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::max(m, std::abs(double(static_cast<const float*>(f.raw())[i])));
  return m;
}

// t on the device as rows of `ld` elements (ld >= the last dim).
void* upload_rows(const Tensor& t, int64_t ld) {
  const int64_t last = t.shape().back(), rows = last ? t.numel() / last : 0;
  const size_t e = dtype_size(t.dtype());
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(rows * ld * e, 256)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0x7f, std::max<size_t>(rows * ld * e, 256)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2D(d, ld * e, t.raw(), last * e, last * e, rows, cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

TEST(PluginOpsCuda, EveryCaseKernelAndTacticMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  qdeploy::register_builtin_plugins();
  int runs = 0;
  for (const PluginOp* p : plugin_ops()) {
    if (p->source != "built in" || p->def.cuda_kernels.empty()) continue;
    for (const auto& tc : p->def.tests) {
      for (DType dt : {DType::kFloat32, DType::kFloat16}) {
        for (int64_t pad : {int64_t{0}, int64_t{8}}) {  // dense, and rows 8 elements wider (16-byte aligned)
          SCOPED_TRACE(p->qualified + " " + tc.name + " " + dtype_name(dt) + " pad " + std::to_string(pad));
          auto c = test::make_plugin_case(*p, tc, dt, 11);
          ASSERT_TRUE(c) << c.status().to_string();
          const qdeploy::Attrs attrs = *resolve_plugin_attrs(p->def, c->graph.nodes[0].attrs);
          std::vector<qdeploy::TensorView> in, out;
          std::vector<void*> dev;
          for (const Tensor& t : c->inputs) {
            qdeploy::TensorView v{to_plugin_dtype(t.dtype()), t.shape(), nullptr, pad ? t.shape().back() + pad : 0};
            v.data = upload_rows(t, v.ld());
            dev.push_back(v.data);
            in.push_back(v);
          }
          for (const Tensor& t : c->expected) {
            qdeploy::TensorView v{to_plugin_dtype(t.dtype()), t.shape(), nullptr, 0};
            EXPECT_EQ(cudaMalloc(&v.data, std::max<size_t>(t.nbytes(), 256)), cudaSuccess);
            dev.push_back(v.data);
            out.push_back(v);
          }
          for (const auto& k : p->def.cuda_kernels) {
            if (!k.supports(attrs, in, out).is_ok()) continue;
            for (int64_t tactic : k.tactics(attrs, in, out)) {
              SCOPED_TRACE(k.name + " tactic " + (k.tactic_name ? k.tactic_name(tactic) : std::to_string(tactic)));
              for (auto& o : out) ASSERT_EQ(cudaMemset(o.data, 0xff, 256), cudaSuccess);  // NaN if not written
              const qdeploy::Status st = k.launch(attrs, tactic, in, out, nullptr, nullptr);
              ASSERT_TRUE(st.is_ok()) << st.message();
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              for (size_t o = 0; o < out.size(); ++o) {
                Tensor got = *Tensor::make(c->expected[o].dtype(), c->expected[o].shape());
                ASSERT_EQ(cudaMemcpy(got.raw(), out[o].data, got.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
                const double scale = std::max(1.0, max_abs(c->expected[o]));
                const double tol = dt == DType::kFloat32 ? 1e-5 : 4e-3;
                EXPECT_LE(test::max_abs_diff(test::to_f32(got), test::to_f32(c->expected[o])), tol * scale);
              }
              ++runs;
            }
          }
          for (void* d : dev) cudaFree(d);
        }
      }
    }
  }
  EXPECT_GT(runs, 20);
}

// x [2, 20, 64] -> value_proj / offset_mask (MatMul + Add + Reshape) -> DCNv4 (4 x 16) -> y, as FlashInternImage.
std::string fused_model(const std::string& dir) {
  namespace ob = test::onnxb;
  onnx::ModelProto m = ob::empty_model(17);
  auto* op = m.add_opset_import();
  op->set_domain("ai.qdeploy");
  op->set_version(1);
  auto* g = m.mutable_graph();
  ob::add_input(g, "x", {2, 20, 64});
  for (auto [name, k] : {std::pair<std::string, int64_t>{"value_proj", 64}, {"offset_mask", 112}}) {
    const Tensor w = test::random_f32({64, k}, static_cast<uint32_t>(k), -0.2f, 0.2f);
    const Tensor b = test::random_f32({k}, static_cast<uint32_t>(k) + 1);
    *g->add_initializer() = ob::tensor_f32(name + ".w", {64, k}, std::vector<float>(
        static_cast<const float*>(w.raw()), static_cast<const float*>(w.raw()) + w.numel()));
    *g->add_initializer() = ob::tensor_f32(name + ".b", {k}, std::vector<float>(
        static_cast<const float*>(b.raw()), static_cast<const float*>(b.raw()) + b.numel()));
    *g->add_initializer() = ob::tensor_i64(name + ".shape", {4}, {2, 4, 5, k});
    ob::add_node(g, "MatMul", {"x", name + ".w"}, {name + ".mm"}, name);
    ob::add_node(g, "Add", {name + ".mm", name + ".b"}, {name + ".add"}, name + ".bias");
    ob::add_node(g, "Reshape", {name + ".add", name + ".shape"}, {name + ".nhwc"}, name + ".reshape");
  }
  auto* n = ob::add_node(g, "DCNv4", {"value_proj.nhwc", "offset_mask.nhwc"}, {"y"}, "dcn");
  n->set_domain("ai.qdeploy");
  ob::attr_int(n, "group", 4);
  ob::attr_int(n, "group_channels", 16);
  ob::add_output(g, "y");
  const std::string path = dir + "/fused_dcnv4.onnx";
  EXPECT_TRUE(write_file_atomic(path, m.SerializeAsString()).is_ok());
  return path;
}

TEST(PluginOpsCuda, FusedLinearSlicesAreReadInPlace) {
  SKIP_WITHOUT_GPU();
  const std::string dir = test::temp_dir("plugin_fused");
  const std::string model = fused_model(dir);
  std::map<std::string, Tensor> in = {{"x", test::random_f32({2, 20, 64}, 5)}};
  BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  auto cpu = build_engine(model, opt);
  ASSERT_TRUE(cpu) << cpu.status().to_string();
  opt.device = "cuda";
  auto gpu = build_engine(model, opt);
  ASSERT_TRUE(gpu) << gpu.status().to_string();
  auto layers = dynamic_cast<cuda::CudaEngine&>(**gpu).layer_info({{"x", {2, 20, 64}}});
  ASSERT_TRUE(layers) << layers.status().to_string();
  int plugin = 0, slices = 0, matmuls = 0;
  for (const auto& l : *layers) {
    plugin += l.kind == "ai.qdeploy::DCNv4@1" && l.in_format.find("(in place)") != std::string::npos;
    slices += l.kind == "Slice";
    matmuls += l.kind == "MatMul";
  }
  EXPECT_EQ(plugin, 1);
  EXPECT_EQ(slices, 0);
  EXPECT_EQ(matmuls, 1);
  auto want = (*cpu)->run(in), got = (*gpu)->run(in);
  ASSERT_TRUE(want && got) << got.status().to_string();
  EXPECT_LE(test::max_abs_diff((*want)[0], (*got)[0]), 1e-4 * std::max(1.0, max_abs((*want)[0])));
  // The plan keeps the plugin node and its kernel choice: loaded, it computes the same.
  ASSERT_TRUE((*gpu)->save(dir + "/fused.plan").is_ok());
  auto loaded = load_engine(dir + "/fused.plan");
  ASSERT_TRUE(loaded) << loaded.status().to_string();
  auto again = (*loaded)->run(in);
  ASSERT_TRUE(again) << again.status().to_string();
  EXPECT_EQ(test::max_abs_diff((*got)[0], (*again)[0]), 0.0);
  // fp16 plans run the op in fp16: the fused linear layer writes fp16 rows that DCNv4 reads in place, and its fp16
  // output is converted for the graph's fp32 output.
  opt.precision = Precision::kFp16;
  auto half = build_engine(model, opt);
  ASSERT_TRUE(half) << half.status().to_string();
  layers = dynamic_cast<cuda::CudaEngine&>(**half).layer_info({{"x", {2, 20, 64}}});
  ASSERT_TRUE(layers) << layers.status().to_string();
  int plugin16 = 0, linears16 = 0;
  for (const auto& l : *layers) {
    plugin16 += l.kind == "ai.qdeploy::DCNv4@1" && l.precision == "float16" && l.in_format == "nhwc:float16(in place)";
    linears16 += l.kind == "matmul" && l.out_format == "nhwc176:fp16";
  }
  EXPECT_EQ(plugin16, 1);
  EXPECT_EQ(linears16, 1);
  auto h = (*half)->run(in);
  ASSERT_TRUE(h) << h.status().to_string();
  const double snr = test::snr_db((*want)[0], (*h)[0]);
  std::cout << "fused DCNv4 fp16 plan: SNR " << snr << " dB\n";
  EXPECT_GE(snr, 40.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qd
