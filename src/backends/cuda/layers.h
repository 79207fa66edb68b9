// The CUDA layers the lowering builds (lowerer.h). Each enqueues its kernel on a stream; the pointer and stride fields
// that depend on where tensors ended up (Concat slices, I/O bindings) are filled at launch.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/kernels/conv_grouped.h"
#include "backends/cuda/instance.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/rows.h"
#include "runtime/io_format.h"

namespace qd::cuda {

// A tensor's format in layer profiles.
inline std::string fmt_nhwc(const TensorRef& t) {
  return "nhwc" + std::to_string(t.ld) + ":" + io_dtype_name(t.dtype);
}
inline std::string fmt_of(const TensorRef& t) {
  return t.nhwc ? fmt_nhwc(t) : "nchw:" + std::string(dtype_name(t.dtype));
}

class ConvLayer final : public Layer {
 public:
  ConvParams p;
  std::shared_ptr<PackedConv> w;
  int config = 0;
  std::shared_ptr<const CudnnConv> cudnn;  // when cuDNN computes the convolution (then `config` is unused)
  bool int8 = false;
  float* workspace = nullptr;  // set while timing; otherwise the instance's conv workspace region of the arena
  int in = -1, res = -1, out = -1;
  int out2 = -1;  // the second output (ConvArgs::y2; its format in p.out2_*), or -1
  int groups = 1, group_channels = 0;  // grouped convs: conv_grouped_i8 / _f16, no tile configuration
  bool small_acc_ok = true;  // KernelPolicy::small_acc (ConvParams::small_acc where the weights allow)

  // The pointer/stride fields depend on where tensors ended up (Concat slices), so they are filled at launch.
  ConvArgs args(const Instance& inst, const Pointers& ptrs, ConvParams* q) const {
    *q = p;
    const TensorRef& x = inst.tensors[in];
    const TensorRef& y = inst.tensors[out];
    q->in_ld = x.ld;
    q->small_acc = small_acc_ok && int8 && w->acc_bound < kSmallAccLimit;
    ConvArgs a;
    a.x = static_cast<const char*>(inst.ptr(in, ptrs)) + x.coff * dtype_size(x.dtype);
    a.w = w->w.get();
    a.bias = static_cast<const float*>(w->bias.get());
    a.alpha = static_cast<const float*>(w->alpha.get());
    if (res >= 0) {
      const TensorRef& r = inst.tensors[res];
      const char* base = static_cast<const char*>(inst.ptr(res, ptrs)) + r.coff * dtype_size(r.dtype);
      if (r.dtype == DType::kInt8) {
        a.residual_i8 = reinterpret_cast<const int8_t*>(base);
      } else {
        a.residual = reinterpret_cast<const __half*>(base);
      }
      q->res_ld = r.ld;
    }
    a.y = inst.ptr(out, ptrs);
    if ((p.splits > 1 && !p.split_in_cluster) || cudnn) {
      const size_t region = side ? inst.side_splitk_offset : inst.splitk_offset;  // the stream's own
      a.workspace = workspace ? workspace : reinterpret_cast<float*>(ptrs.arena + region);
    }
    if (y.nhwc) {
      q->out_ld = y.ld;
      q->out_coff = y.coff;
    }
    if (out2 >= 0) {
      a.y2 = inst.ptr(out2, ptrs);
      q->out2_ld = inst.tensors[out2].ld;
      q->out2_coff = inst.tensors[out2].coff;
    }
    return a;
  }
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    ConvParams q;
    ConvArgs a = args(inst, ptrs, &q);
    if (cudnn) return cudnn->run(q, a, a.workspace, s);
    if (groups > 1) {
      return (int8 ? launch_conv_grouped_i8 : launch_conv_grouped_f16)(q, a, groups, group_channels, w->C, s);
    }
    return launch_conv_igemm(q, a, config, s);
  }
  // Scratch memory of the chosen kernel (split-K partial sums, or cuDNN's result and workspace).
  size_t workspace_bytes() const { return cudnn ? cudnn->workspace_bytes() : conv_igemm_workspace(p); }
};

class ReformatLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& x = inst.tensors[ins[0]];
    const TensorRef& y = inst.tensors[outs[0]];
    const Shape& sh = x.shape;
    const int N = static_cast<int>(sh[0]), C = static_cast<int>(sh[1]), H = static_cast<int>(sh[2]),
              W = static_cast<int>(sh[3]);
    if (y.nhwc) return nchw_to_nhwc(inst.ptr(ins[0], ptrs), x.dtype, inst.view(outs[0], ptrs), N, C, H, W, s);
    return nhwc_to_nchw(inst.view(ins[0], ptrs), inst.ptr(outs[0], ptrs), y.dtype, N, C, H, W, s);
  }
};

// Space-to-depth of a stem conv's input (see Lowerer::plan_s2d): NCHW (or an NHWC input binding) -> NHWC fp16, or
// int8 quantized with `scale`.
class SpaceToDepthLayer final : public Layer {
 public:
  float scale = 1.f;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    const Shape& sh = inst.tensors[ins[0]].shape;
    return nchw_to_s2d(inst.any_view(ins[0], ptrs), inst.view(outs[0], ptrs), y.dtype, scale,
                       static_cast<int>(sh[0]), static_cast<int>(sh[1]), static_cast<int>(sh[2]),
                       static_cast<int>(sh[3]), s);
  }
};

// A tensor in another dtype and/or layout: the I/O bindings' formats (--input-format / --output-format) to and from
// what the layers read and write.
class ConvertLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const Shape& sh = inst.tensors[ins[0]].shape;
    const bool four = sh.size() == 4;
    const int N = four ? static_cast<int>(sh[0]) : 1;
    const int C = four ? static_cast<int>(sh[1]) : static_cast<int>(numel(sh));
    const int HW = four ? static_cast<int>(sh[2] * sh[3]) : 1;
    return convert_tensor(inst.any_view(ins[0], ptrs), inst.any_view(outs[0], ptrs), N, C, HW, s);
  }
};

// A conv input's quantization (once per tensor): the int8 NHWC copy for the INT8 convs, and the dequantized value
// every other consumer reads.
class QuantizeLayer final : public Layer {
 public:
  float scale = 1.f;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& x = inst.tensors[ins[0]];
    const Shape& sh = inst.tensors[outs[0]].shape;  // 4-d (a Gemm's [N, C] input as [N, C, 1, 1])
    const bool dq = outs.size() > 1;  // the dequantized value, when a consumer other than the INT8 convs reads it
    return quantize_nhwc_i8(inst.ptr(ins[0], ptrs), x.nhwc, inst.view(ins[0], ptrs), inst.view(outs[0], ptrs),
                            dq ? inst.ptr(outs[1], ptrs) : nullptr, dq ? inst.view(outs[1], ptrs) : NhwcView{},
                            static_cast<int>(sh[0]),
                            static_cast<int>(sh[1]), static_cast<int>(sh[2]), static_cast<int>(sh[3]), scale, s);
  }
};

class MaxPoolLayer final : public Layer {
 public:
  PoolParams p;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return int8 ? maxpool_nhwc_i8(inst.view(ins[0], ptrs), inst.view(outs[0], ptrs), p, s)
                : maxpool_nhwc(inst.view(ins[0], ptrs), inst.view(outs[0], ptrs), p, s);
  }
};

// SPPF's chain of same-size max pools, one output per pool (Lowerer::try_pool_chain).
class MaxPoolChainLayer final : public Layer {
 public:
  int N = 0, C = 0, H = 0, W = 0, kh = 1, kw = 1;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    NhwcView y[kMaxPoolChain];
    for (size_t k = 0; k < outs.size() && k < kMaxPoolChain; ++k) y[k] = inst.view(outs[k], ptrs);
    return maxpool_chain_nhwc(inst.view(ins[0], ptrs), y, static_cast<int>(outs.size()), N, C, H, W, kh, kw, int8,
                              s);
  }
};

class UpsampleLayer final : public Layer {
 public:
  int N = 0, C = 0, H = 0, W = 0, fh = 1, fw = 1;
  bool int8 = false;  // on int8 tensors (Lowerer::try_int8_concat)
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return (int8 ? upsample_nearest_nhwc_i8 : upsample_nearest_nhwc)(inst.view(ins[0], ptrs),
                                                                     inst.view(outs[0], ptrs), N, C, H, W, fh, fw, s);
  }
};

class ConcatLayer final : public Layer {
 public:
  std::vector<bool> in_place;  // inputs their producers already wrote into the output
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    int coff = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const TensorRef& x = inst.tensors[ins[i]];
      const int C = static_cast<int>(x.shape[1]);
      if (!in_place[i]) {
        NhwcView dst = inst.view(outs[0], ptrs);
        dst.coff += coff;
        QD_RETURN_IF_ERROR(copy_channels_nhwc(inst.view(ins[i], ptrs), dst, static_cast<int>(y.shape[0]), C,
                                              static_cast<int>(y.shape[2]), static_cast<int>(y.shape[3]), s));
      }
      coff += C;
    }
    return Status::ok();
  }
};

class GenericLayer final : public Layer {
 public:
  std::unique_ptr<GenericKernel> kernel;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    std::vector<const void*> in(ins.size(), nullptr);
    std::vector<void*> out(outs.size(), nullptr);
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i] >= 0) in[i] = inst.ptr(ins[i], ptrs);
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] >= 0) out[i] = inst.ptr(outs[i], ptrs);
    }
    if (workspace >= 0) kernel->set_workspace(ptrs.arena + (*ptrs.offsets)[workspace]);
    return kernel->launch(in, out, s);
  }
};

class EltwiseChainLayer final : public Layer {
 public:
  EwProgram prog;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const TensorRef& y = inst.tensors[outs[0]];
    return launch_eltwise_chain(static_cast<const float*>(inst.ptr(ins[0], ptrs)),
                                static_cast<float*>(inst.ptr(outs[0], ptrs)), numel(y.shape), prog, s);
  }
};

// LayerNormalization over the rows' last axis, of x (fp32, or fp16 rows) or of x + r (a residual Add it absorbed,
// fp32): ins {x, r or -1, scale, bias or -1}, outs {x + r for the Add's other readers or -1, fp16 rows or -1, fp32
// or -1}.
class RowNormLayer final : public Layer {
 public:
  int64_t rows = 0;
  int C = 0;
  float eps = 1e-5f;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    auto in = [&](int k) { return ins[k] < 0 ? nullptr : static_cast<const float*>(inst.ptr(ins[k], ptrs)); };
    auto out = [&](int k) { return outs[k] < 0 ? nullptr : inst.ptr(outs[k], ptrs); };
    RowNormIo io;
    if (inst.tensors[ins[0]].dtype == DType::kFloat16) {
      io.x16 = static_cast<const __half*>(inst.ptr(ins[0], ptrs));
    } else {
      io.x = in(0);
    }
    io.r = in(1);
    io.gamma = in(2);
    io.beta = in(3);
    io.sum = static_cast<float*>(out(0));
    io.y16 = static_cast<__half*>(out(1));
    io.y32 = static_cast<float*>(out(2));
    return add_layer_norm_rows(io, rows, C, eps, s);
  }
};

class SliceConcatLayer final : public Layer {
 public:
  SliceConcatParams p;
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    return launch_slice_concat(inst.ptr(ins[0], ptrs), inst.tensors[ins[0]].dtype, inst.ptr(outs[0], ptrs),
                               inst.tensors[outs[0]].dtype, p, s);
  }
};

class CopyLayer final : public Layer {
 public:
  Status enqueue(const Instance& inst, const Pointers& ptrs, cudaStream_t s) const override {
    const size_t n = inst.tensors[outs[0]].bytes;
    if (n == 0) return Status::ok();
    QD_CUDA_TRY(cudaMemcpyAsync(inst.ptr(outs[0], ptrs), inst.ptr(ins[0], ptrs), n, cudaMemcpyDeviceToDevice, s));
    return Status::ok();
  }
};

}  // namespace qd::cuda
