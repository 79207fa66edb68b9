#include "backends/cuda/cudnn_conv.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/device_buffer.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define QD_HAVE_CUDNN_HEADERS 1
#endif

namespace qd::cuda {

#ifdef QD_HAVE_CUDNN_HEADERS

namespace {

// The cuDNN entry points qdeploy calls, resolved from the library loaded at run time.
struct Api {
  void* lib = nullptr;
  std::string error;
#define QD_CUDNN_FN(name) decltype(&::name) name = nullptr;
#define QD_CUDNN_FNS(X)                                                                                            \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnCreateTensorDescriptor)        \
  X(cudnnSetTensor4dDescriptorEx) X(cudnnDestroyTensorDescriptor) X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnCreateConvolutionDescriptor)                \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)           \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)
  QD_CUDNN_FNS(QD_CUDNN_FN)
#undef QD_CUDNN_FN
};

const Api& api() {
  static const Api a = [] {
    Api r;
    const char* env = std::getenv("QD_CUDNN_LIBRARY");
    if (env && std::string(env) == "none") {
      r.error = "disabled by QD_CUDNN_LIBRARY=none";
      return r;
    }
    const std::string path = env && *env ? env : "libcudnn.so.9";
    r.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!r.lib) {
      const char* e = dlerror();
      r.error = "cannot load " + path + " (" + (e ? e : "?") +
                "); add cuDNN 9's lib directory to LD_LIBRARY_PATH or name the file in QD_CUDNN_LIBRARY";
      return r;
    }
#define QD_CUDNN_FN(name)                                                                     \
  r.name = reinterpret_cast<decltype(r.name)>(dlsym(r.lib, #name));                           \
  if (!r.name && r.error.empty()) r.error = path + " has no symbol " #name " (not cuDNN 9?)";
    QD_CUDNN_FNS(QD_CUDNN_FN)
#undef QD_CUDNN_FN
    if (r.error.empty() && r.cudnnGetVersion() / 10000 != 9) {
      r.error = path + " is cuDNN " + std::to_string(r.cudnnGetVersion()) + ", not version 9";
    }
    if (!r.error.empty()) {
      dlclose(r.lib);
      r.lib = nullptr;
    }
    return r;
  }();
  return a;
}

Status cudnn_status(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
  return internal(std::string("cuDNN ") + what + ": " + api().cudnnGetErrorString(s));
}
#define QD_CUDNN_TRY(expr)                                                \
  do {                                                                    \
    cudnnStatus_t qd_cudnn_st_ = (api().expr);                            \
    if (qd_cudnn_st_ != CUDNN_STATUS_SUCCESS) return cudnn_status(qd_cudnn_st_, #expr); \
  } while (0)

// One handle per thread and device: a handle is bound to one stream at a time, and contexts run on their own
// threads and streams. Handles live until the thread ends.
Expected<cudnnHandle_t> thread_handle() {
  struct Handles {
    std::map<int, cudnnHandle_t> by_device;
    ~Handles() {
      for (auto& [dev, h] : by_device) api().cudnnDestroy(h);
    }
  };
  thread_local Handles handles;
  int dev = 0;
  QD_CUDA_TRY(cudaGetDevice(&dev));
  auto it = handles.by_device.find(dev);
  if (it != handles.by_device.end()) return it->second;
  cudnnHandle_t h = nullptr;
  QD_CUDNN_TRY(cudnnCreate(&h));
  handles.by_device[dev] = h;
  return h;
}

}  // namespace

struct CudnnConv::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descriptors() {
    if (!api().lib) return;
    if (x) api().cudnnDestroyTensorDescriptor(x);
    if (y) api().cudnnDestroyTensorDescriptor(y);
    if (w) api().cudnnDestroyFilterDescriptor(w);
    if (conv) api().cudnnDestroyConvolutionDescriptor(conv);
  }
  // Elements between input pixels (in_ld, or the channel count when unset).
  static int input_ld(const ConvParams& p) { return p.in_ld > 0 ? p.in_ld : p.C; }
  // fp16 NHWC tensors (input pixels `in_ld` apart; the output packed), KRSC fp16 filter, fp32 accumulation on
  // tensor cores.
  Status init(const ConvParams& p) {
    QD_CUDNN_TRY(cudnnCreateTensorDescriptor(&x));
    QD_CUDNN_TRY(cudnnCreateTensorDescriptor(&y));
    QD_CUDNN_TRY(cudnnCreateFilterDescriptor(&w));
    QD_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&conv));
    const int ld = input_ld(p);
    QD_CUDNN_TRY(cudnnSetTensor4dDescriptorEx(x, CUDNN_DATA_HALF, p.N, p.C, p.H, p.W, p.H * p.W * ld, 1, p.W * ld, ld));
    QD_CUDNN_TRY(cudnnSetTensor4dDescriptorEx(y, CUDNN_DATA_HALF, p.N, p.K, p.OH, p.OW, p.OH * p.OW * p.K, 1,
                                              p.OW * p.K, p.K));
    QD_CUDNN_TRY(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, p.K, p.C, p.R, p.S));
    QD_CUDNN_TRY(cudnnSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    QD_CUDNN_TRY(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH));
    return Status::ok();
  }
};

bool cudnn_available() { return api().lib != nullptr; }
std::string cudnn_unavailable_reason() { return api().error; }
uint32_t cudnn_loaded_version() { return api().lib ? static_cast<uint32_t>(api().cudnnGetVersion()) : 0; }

Status cudnn_thread_init() {
  if (!cudnn_available()) return Status::ok();
  return thread_handle().status();
}

CudnnConv::~CudnnConv() = default;

std::vector<int> CudnnConv::algorithms(const ConvParams& p) {
  std::vector<int> out;
  if (!cudnn_available() || p.N * p.OH * p.OW == 0) return out;
  auto h = thread_handle();
  Descriptors d;
  if (!h || !d.init(p).is_ok()) return out;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  if (api().cudnnGetConvolutionForwardAlgorithm_v7(*h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n,
                                                   perf) != CUDNN_STATUS_SUCCESS) {
    return out;
  }
  for (int i = 0; i < n; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) out.push_back(static_cast<int>(perf[i].algo));
  }
  return out;
}

std::string CudnnConv::algorithm_name(int algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "algo" + std::to_string(algo);
  }
}

Expected<std::unique_ptr<CudnnConv>> CudnnConv::create(const ConvParams& p, int algo, const void* w_dense,
                                                      bool warm) {
  if (!cudnn_available()) return unsupported("cuDNN is not loaded: " + cudnn_unavailable_reason());
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) {
    return invalid("no cuDNN convolution algorithm " + std::to_string(algo));
  }
  std::unique_ptr<CudnnConv> c(new CudnnConv);
  c->d_ = std::make_unique<Descriptors>();
  QD_RETURN_IF_ERROR(c->d_->init(p));
  const cudnnHandle_t h = QD_TRY(thread_handle());
  QD_CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(h, c->d_->x, c->d_->w, c->d_->conv, c->d_->y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                       &c->cudnn_bytes_));
  // The workspace joins the plan's activation memory: algorithms that want more (FFT ones can ask for gigabytes)
  // are no candidates.
  if (c->cudnn_bytes_ > kMaxCudnnWorkspace) {
    return unsupported("cuDNN " + algorithm_name(algo) + " needs " + std::to_string(c->cudnn_bytes_ >> 20) +
                       " MiB of workspace (the limit is " + std::to_string(kMaxCudnnWorkspace >> 20) + " MiB)");
  }
  c->algo_ = algo;
  c->w_ = w_dense;
  c->result_bytes_ = (static_cast<size_t>(p.N) * p.OH * p.OW * p.K * sizeof(__half) + 255) / 256 * 256;
  if (warm) QD_RETURN_IF_ERROR(c->warm_up(p));
  return c;
}

Status CudnnConv::warm_up(const ConvParams& p) const {
  const cudnnHandle_t h = QD_TRY(thread_handle());
  DeviceBuffer x, scratch;
  const int ld = Descriptors::input_ld(p);
  QD_RETURN_IF_ERROR(x.alloc(static_cast<size_t>(p.N) * p.H * p.W * ld * sizeof(__half)));
  QD_RETURN_IF_ERROR(scratch.alloc(workspace_bytes()));
  QD_CUDA_TRY(cudaMemset(x.get(), 0, x.size()));
  cudaStream_t s = nullptr;
  QD_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const float one = 1.f, zero = 0.f;
  cudnnStatus_t st = api().cudnnSetStream(h, s);
  if (st == CUDNN_STATUS_SUCCESS) {
    st = api().cudnnConvolutionForward(h, &one, d_->x, x.get(), d_->w, w_, d_->conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo_),
                                       static_cast<char*>(scratch.get()) + result_bytes_, cudnn_bytes_, &zero, d_->y,
                                       scratch.get());
  }
  const cudaError_t e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  if (st != CUDNN_STATUS_SUCCESS) return cudnn_status(st, "cudnnConvolutionForward (warm-up)");
  return cuda_status(e, "cuDNN warm-up");
}

Status CudnnConv::run(const ConvParams& p, const ConvArgs& a, void* workspace, cudaStream_t stream) const {
  const cudnnHandle_t h = QD_TRY(thread_handle());
  QD_CUDNN_TRY(cudnnSetStream(h, stream));
  auto* result = static_cast<__half*>(workspace);
  const float one = 1.f, zero = 0.f;
  QD_CUDNN_TRY(cudnnConvolutionForward(h, &one, d_->x, a.x, d_->w, w_, d_->conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo_),
                                       static_cast<char*>(workspace) + result_bytes_, cudnn_bytes_, &zero, d_->y,
                                       result));
  return launch_conv_epilogue(p, a, result, stream);
}

#else  // built without cuDNN's headers: qdeploy's own kernels only

struct CudnnConv::Descriptors {};
bool cudnn_available() { return false; }
std::string cudnn_unavailable_reason() { return "qdeploy was built without cuDNN's headers"; }
uint32_t cudnn_loaded_version() { return 0; }
Status cudnn_thread_init() { return Status::ok(); }
CudnnConv::~CudnnConv() = default;
std::vector<int> CudnnConv::algorithms(const ConvParams&) { return {}; }
std::string CudnnConv::algorithm_name(int algo) { return "algo" + std::to_string(algo); }
Expected<std::unique_ptr<CudnnConv>> CudnnConv::create(const ConvParams&, int, const void*, bool) {
  return unsupported("qdeploy was built without cuDNN's headers");
}
Status CudnnConv::run(const ConvParams&, const ConvArgs&, void*, cudaStream_t) const {
  return internal("qdeploy was built without cuDNN's headers");
}
Status CudnnConv::warm_up(const ConvParams&) const { return Status::ok(); }

#endif

}  // namespace qd::cuda
