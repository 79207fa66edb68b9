// qdeploy's DCNv4 CUDA kernels timed per case, as the plugin library exposes them (libqd_dcnv4.so, loaded with dlopen
// and registered into a registrar of this program's own: it links nothing of qdeploy), and, when built with
// -DQD_DCNV4_OFFICIAL, the official op's forward kernel (OpenGVLab/DCNv4, compiled from its source in bench/peers/ with
// bench/peer_shim/'s stand-ins for the few ATen names it uses) on the same inputs, timed the same way:
// - every tactic of every qdeploy kernel, and the official kernel at every launch configuration it takes (channels per
//   thread x output pixels per block, the pixels dividing Ho*Wo as its kernel requires), each as a CUDA graph of 20
//   back-to-back launches replayed 10 times; the per-launch median of each side's best is printed (the small gaps
//   between kernels included, the same for both);
// - the largest difference between qdeploy's best tactic and the official kernel, relative to the output's range.
//
// Build (bench/dcnv4_bench.py does it):
//   nvcc -x cu -std=c++17 -O2 -arch=sm_90a -Iinclude bench/dcnv4_kernel_bench.cpp -o build-gpu/dcnv4_kernel_bench \
//     -ldl
//   with the official kernel: add -DQD_DCNV4_OFFICIAL -Ibench/peer_shim -Ibench/peers/DCNv4_op/src
//     (copy DCNv4_op/ into bench/peers/ as bench/dcnv4_peer.sh says)
// Run: dcnv4_kernel_bench LIB.so fp16|fp32 CASE [CASE ...]   -> one JSON line per case
//   CASE = N,H,W,G,D[,stride,pad,dilation,remove_center,offset_scale] (3x3 kernels; defaults 1,1,1,0,1)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qdeploy/plugin.h"

#ifdef QD_DCNV4_OFFICIAL
#include "cuda/dcnv4_im2col_cuda.cuh"
#endif

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

struct Case {
  int64_t n = 0, h = 0, w = 0, g = 0, d = 0;
  int stride = 1, pad = 1, dilation = 1, remove_center = 0;
  float offset_scale = 1.f;
  int64_t ho() const { return (h + 2 * pad - (dilation * 2 + 1)) / stride + 1; }
  int64_t wo() const { return (w + 2 * pad - (dilation * 2 + 1)) / stride + 1; }
  int64_t k() const { return 9 - remove_center; }
  int64_t p() const { return (3 * g * k() + 7) / 8 * 8; }  // offset_mask channels, padded as the official op pads
};

bool parse_case(const std::string& text, Case* c) {
  std::vector<double> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atof(item.c_str()));
  if (v.size() != 5 && v.size() != 10) return false;
  c->n = int64_t(v[0]), c->h = int64_t(v[1]), c->w = int64_t(v[2]), c->g = int64_t(v[3]), c->d = int64_t(v[4]);
  if (v.size() == 10) {
    c->stride = int(v[5]), c->pad = int(v[6]), c->dilation = int(v[7]), c->remove_center = int(v[8]);
    c->offset_scale = float(v[9]);
  }
  return c->n > 0 && c->h > 0 && c->w > 0 && c->g > 0 && c->d > 0 && c->stride > 0 && c->ho() > 0 && c->wo() > 0;
}

// Per-launch median (ms) of `launch` as a CUDA graph of 20 launches replayed 10 times; < 0 if it does not launch.
double time_launches(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, const std::function<bool()>& launch) {
  constexpr int kLaunches = 20;
  if (!launch()) return -1;  // warm up
  CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; ++i) launch();
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> ms;
  for (int r = 0; r < 11; ++r) {
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
  return ms[ms.size() / 2];
}

std::vector<float> download(const void* d, size_t n, bool half) {
  std::vector<float> out(n);
  if (half) {
    std::vector<__half> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) out[i] = __half2float(h[i]);
  } else {
    CHECK(cudaMemcpy(out.data(), d, n * 4, cudaMemcpyDeviceToHost));
  }
  return out;
}

#ifdef QD_DCNV4_OFFICIAL
// The official forward at one launch configuration (its dcnv4_im2col_cuda, as its extension calls it), no softmax.
template <typename T>
void official(const Case& c, int d_stride, int threads, const void* value, const void* om, void* out, cudaStream_t s) {
  dcnv4_im2col_cuda<T>(s, static_cast<const T*>(value), static_cast<const T*>(om), static_cast<T*>(out), 3, 3,
                       c.stride, c.stride, c.pad, c.pad, c.dilation, c.dilation, int(c.g), int(c.d), int(c.n),
                       int(c.h), int(c.w), int(c.ho()), int(c.wo()), c.offset_scale, c.remove_center, d_stride, threads,
                       false, int(c.p()));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LIB.so fp16|fp32 N,H,W,G,D[,stride,pad,dilation,remove_center,offset_scale] ...\n",
                 argv[0]);
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
  for (int a = 3; a < argc; ++a) {
    Case c;
    if (!parse_case(argv[a], &c)) {
      std::fprintf(stderr, "bad case '%s' (N,H,W,G,D[,stride,pad,dilation,remove_center,offset_scale])\n", argv[a]);
      return 2;
    }
    qdeploy::Attrs attrs;
    for (const auto& spec : def.attrs) {
      if (spec.type == qdeploy::AttrType::kInt) attrs.set(spec.name, spec.default_int);
      if (spec.type == qdeploy::AttrType::kFloat) attrs.set(spec.name, spec.default_float);
    }
    attrs.set("group", c.g);
    attrs.set("group_channels", c.d);
    for (const char* k : {"stride_h", "stride_w"}) attrs.set(k, int64_t{c.stride});
    for (const char* k : {"pad_h", "pad_w"}) attrs.set(k, int64_t{c.pad});
    for (const char* k : {"dilation_h", "dilation_w"}) attrs.set(k, int64_t{c.dilation});
    attrs.set("remove_center", int64_t{c.remove_center});
    attrs.set("offset_scale", c.offset_scale);
    const int64_t out_n = c.n * c.ho() * c.wo() * c.g * c.d;
    std::vector<qdeploy::TensorView> in = {{dt, {c.n, c.h, c.w, c.g * c.d}}, {dt, {c.n, c.ho(), c.wo(), c.p()}}};
    std::vector<qdeploy::TensorView> out = {{dt, {c.n, c.ho(), c.wo(), c.g * c.d}}};
    in[0].data = random_buffer(c.n * c.h * c.w * c.g * c.d, half, -1.f, 1.f, 1);
    in[1].data = random_buffer(c.n * c.ho() * c.wo() * c.p(), half, -2.f, 2.f, 2);
    CHECK(cudaMalloc(&out[0].data, out_n * (half ? 2 : 4)));
    double best = 1e30;
    std::string best_name, per_kernel;  // per_kernel: each kernel's best, as JSON members
    std::function<bool()> best_launch;
    for (const auto& k : def.cuda_kernels) {
      if (!k.supports(attrs, in, out).is_ok()) continue;
      double kernel_best = 1e30;
      std::string kernel_best_name;
      for (int64_t t : k.tactics(attrs, in, out)) {
        auto launch = [&, t, kp = &k] { return kp->launch(attrs, t, in, out, nullptr, s).is_ok(); };
        const double ms = time_launches(s, e0, e1, launch);
        if (ms < 0) continue;
        if (ms < kernel_best) kernel_best = ms, kernel_best_name = k.tactic_name ? k.tactic_name(t) : std::to_string(t);
        if (ms < best) best = ms, best_name = k.name + "/" + kernel_best_name, best_launch = launch;
      }
      if (kernel_best_name.empty()) continue;
      char member[256];
      std::snprintf(member, sizeof member, "%s\"%s\": [%.6f, \"%s\"]", per_kernel.empty() ? "" : ", ",
                    k.name.c_str(), kernel_best, kernel_best_name.c_str());
      per_kernel += member;
    }
    std::string official_json;
#ifdef QD_DCNV4_OFFICIAL
    {
      // Every configuration the official kernel takes: d_stride channels per thread (dividing D; at most 8 in fp32),
      // m output pixels per block with m dividing Ho*Wo, at most 1024 threads.
      void* ref = nullptr;
      CHECK(cudaMalloc(&ref, out_n * (half ? 2 : 4)));
      double off_best = 1e30;
      int off_ds = 0, off_threads = 0;
      for (int ds : {1, 2, 4, 8, 16}) {
        if (c.d % ds || (!half && ds > 8)) continue;
        for (int m = 1; m <= 64; ++m) {
          const int64_t threads = m * c.g * c.d / ds;
          if ((c.ho() * c.wo()) % m || threads > 1024) continue;
          auto launch = [&, ds, threads] {
            if (half) {
              official<__half>(c, ds, int(threads), in[0].data, in[1].data, ref, s);
            } else {
              official<float>(c, ds, int(threads), in[0].data, in[1].data, ref, s);
            }
            return cudaPeekAtLastError() == cudaSuccess;
          };
          const double ms = time_launches(s, e0, e1, launch);
          if (ms >= 0 && ms < off_best) off_best = ms, off_ds = ds, off_threads = int(threads);
        }
      }
      if (off_ds == 0 || !best_launch) {
        std::fprintf(stderr, "case '%s': no launch configuration of %s runs\n", argv[a],
                     off_ds ? "qdeploy" : "the official kernel");
        return 1;
      }
      // Outputs of both sides' best on the same inputs.
      if (half) {
        official<__half>(c, off_ds, off_threads, in[0].data, in[1].data, ref, s);
      } else {
        official<float>(c, off_ds, off_threads, in[0].data, in[1].data, ref, s);
      }
      CHECK(cudaMemsetAsync(out[0].data, 0xff, out_n * (half ? 2 : 4), s));
      best_launch();
      CHECK(cudaStreamSynchronize(s));
      const std::vector<float> want = download(ref, out_n, half), got = download(out[0].data, out_n, half);
      double range = 0, diff = 0;
      for (int64_t i = 0; i < out_n; ++i) {
        range = std::max(range, double(std::fabs(want[i])));
        // A non-finite output counts as 1e30 (JSON has no inf).
        diff = std::max(diff, std::isfinite(got[i]) ? double(std::fabs(got[i] - want[i])) : 1e30);
      }
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ", \"official_ms\": %.6f, \"official_config\": \"d%d_t%d\", \"max_rel_diff\": %.3g", off_best,
                    off_ds, off_threads, range > 0 ? diff / range : diff);
      official_json = buf;
      cudaFree(ref);
    }
#endif
    std::printf("{\"case\": \"%s\", \"n\": %lld, \"h\": %lld, \"w\": %lld, \"g\": %lld, \"d\": %lld, "
                "\"dtype\": \"%s\", \"ms\": %.6f, \"tactic\": \"%s\", \"kernels\": {%s}%s}\n",
                argv[a], static_cast<long long>(c.n), static_cast<long long>(c.h), static_cast<long long>(c.w),
                static_cast<long long>(c.g), static_cast<long long>(c.d), argv[2], best, best_name.c_str(),
                per_kernel.c_str(), official_json.c_str());
    std::fflush(stdout);
    cudaFree(in[0].data);
    cudaFree(in[1].data);
    cudaFree(out[0].data);
  }
  return 0;
}
