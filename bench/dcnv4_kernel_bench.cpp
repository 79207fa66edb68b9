// qdeploy's DCNv4 CUDA kernels timed per shape, as the plugin library exposes them (libqd_dcnv4.so, loaded with dlopen
// and registered into a registrar of this program's own: it links nothing of qdeploy). For each shape and dtype every
// tactic runs; each is timed as a CUDA graph of 50 back-to-back launches replayed 20 times, and the per-launch median
// of the best tactic is printed (an upper bound of the kernel time: it includes the small gaps between kernels).
//
// Build (bench/dcnv4_bench.py does it):
//   nvcc -std=c++17 -O2 -Iinclude bench/dcnv4_kernel_bench.cpp -o build-gpu/dcnv4_kernel_bench -ldl
// Run: dcnv4_kernel_bench LIB.so fp16|fp32 N H W G D [N H W G D ...]   -> one JSON line per shape
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "qdeploy/plugin.h"

namespace {

struct Capture final : qdeploy::PluginRegistrar {
  std::vector<qdeploy::OpDef> defs;
  qdeploy::Status add(qdeploy::OpDef def) override {
    defs.push_back(std::move(def));
    return qdeploy::Status::ok();
  }
};

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                 \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

// Device buffer of n elements, uniform in [lo, hi].
void* random_buffer(size_t n, bool half, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  void* d = nullptr;
  const size_t bytes = n * (half ? 2 : 4);
  CHECK(cudaMalloc(&d, bytes));
  if (half) {
    std::vector<__half> h(n);
    for (auto& x : h) x = __float2half(u(rng));
    CHECK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
  } else {
    std::vector<float> h(n);
    for (auto& x : h) x = u(rng);
    CHECK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8 || (argc - 3) % 5) {
    std::fprintf(stderr, "usage: %s LIB.so fp16|fp32 N H W G D [N H W G D ...]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  auto entry = reinterpret_cast<qd_register_ops_fn>(dlsym(lib, "qd_register_ops"));
  Capture cap;
  char err[512] = {0};
  if (!entry || entry(&cap, err, sizeof err) != 0 || cap.defs.empty() || cap.defs[0].cuda_kernels.empty()) {
    std::fprintf(stderr, "not a DCNv4 plugin with CUDA kernels: %s\n", err);
    return 2;
  }
  const qdeploy::OpDef& def = cap.defs[0];
  const bool half = std::string(argv[2]) == "fp16";
  const auto dt = half ? qdeploy::DataType::kFloat16 : qdeploy::DataType::kFloat32;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int a = 3; a + 4 < argc; a += 5) {
    const int64_t n = std::atoll(argv[a]), h = std::atoll(argv[a + 1]), w = std::atoll(argv[a + 2]);
    const int64_t g = std::atoll(argv[a + 3]), d = std::atoll(argv[a + 4]);
    const int64_t p = (3 * g * 9 + 7) / 8 * 8;
    qdeploy::Attrs attrs;
    for (const auto& spec : def.attrs) {
      if (spec.type == qdeploy::AttrType::kInt) attrs.set(spec.name, spec.default_int);
      if (spec.type == qdeploy::AttrType::kFloat) attrs.set(spec.name, spec.default_float);
    }
    attrs.set("group", g);
    attrs.set("group_channels", d);
    std::vector<qdeploy::TensorView> in = {{dt, {n, h, w, g * d}}, {dt, {n, h, w, p}}};
    std::vector<qdeploy::TensorView> out = {{dt, {n, h, w, g * d}}};
    in[0].data = random_buffer(n * h * w * g * d, half, -1.f, 1.f, 1);
    in[1].data = random_buffer(n * h * w * p, half, -2.f, 2.f, 2);
    CHECK(cudaMalloc(&out[0].data, n * h * w * g * d * (half ? 2 : 4)));
    double best = 1e30;
    std::string best_name;
    for (const auto& k : def.cuda_kernels) {
      if (!k.supports(attrs, in, out).is_ok()) continue;
      for (int64_t t : k.tactics(attrs, in, out)) {
        constexpr int kLaunches = 50;
        if (!k.launch(attrs, t, in, out, nullptr, s).is_ok()) continue;  // warm up
        CHECK(cudaStreamSynchronize(s));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kLaunches; ++i) (void)k.launch(attrs, t, in, out, nullptr, s);
        CHECK(cudaStreamEndCapture(s, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        std::vector<double> ms;
        for (int r = 0; r < 21; ++r) {
          CHECK(cudaEventRecord(e0, s));
          CHECK(cudaGraphLaunch(exec, s));
          CHECK(cudaEventRecord(e1, s));
          CHECK(cudaEventSynchronize(e1));
          float m = 0;
          CHECK(cudaEventElapsedTime(&m, e0, e1));
          if (r) ms.push_back(m / kLaunches);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        std::sort(ms.begin(), ms.end());
        if (ms[ms.size() / 2] < best) {
          best = ms[ms.size() / 2];
          best_name = k.name + "/" + (k.tactic_name ? k.tactic_name(t) : std::to_string(t));
        }
      }
    }
    std::printf("{\"n\": %lld, \"h\": %lld, \"w\": %lld, \"g\": %lld, \"d\": %lld, \"dtype\": \"%s\", \"ms\": %.6f, "
                "\"tactic\": \"%s\"}\n",
                static_cast<long long>(n), static_cast<long long>(h), static_cast<long long>(w),
                static_cast<long long>(g), static_cast<long long>(d), argv[2], best, best_name.c_str());
    std::fflush(stdout);
    cudaFree(in[0].data);
    cudaFree(in[1].data);
    cudaFree(out[0].data);
  }
  return 0;
}
