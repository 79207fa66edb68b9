// Conv weights as the tensor-core kernels read them: [K][R][S][C] rows padded for 16-byte loads, fp16 or INT8 with
// the per-channel output scales, uploaded once per plan and shared by every batch size's instance.
#include "backends/cuda/weight_pack.h"

#include <algorithm>

#include "backends/cuda/cuda_util.h"
#include "core/half.h"
#include "quant/int8.h"

namespace qd::cuda {

// [K, C, R, S] -> [K, 4C, R/2, S/2] with w'[k][(dy * 2 + dx) * C + c][i][j] = w[k][c][2i + dy][2j + dx]: the weights of
// the stride-1 conv over the space-to-depth input that computes the stride-2 conv (R and S even).
Tensor space_to_depth_weights(const Tensor& w) {
  const Shape& s = w.shape();
  const int64_t K = s[0], C = s[1], R = s[2], S = s[3];
  Tensor out(DType::kFloat32, {K, 4 * C, R / 2, S / 2});
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t q = 0; q < S; ++q) {
          const int64_t c2 = ((r % 2) * 2 + q % 2) * C + c;
          dst[((k * 4 * C + c2) * (R / 2) + r / 2) * (S / 2) + q / 2] = src[((k * C + c) * R + r) * S + q];
        }
      }
    }
  }
  return out;
}

namespace {

constexpr int round_up(int v, int m) { return (v + m - 1) / m * m; }

// The geometry of a packed weight: channels padded to 16 bytes' worth, rows to 64 bytes' worth (elem_bytes 2 or 1).
std::shared_ptr<PackedConv> packed_geometry(const Shape& ws, int elem_bytes) {
  auto pc = std::make_shared<PackedConv>();
  pc->K = static_cast<int>(ws[0]);
  pc->R = static_cast<int>(ws[2]);
  pc->S = static_cast<int>(ws[3]);
  pc->C = round_up(static_cast<int>(ws[1]), 16 / elem_bytes);
  pc->Kp = round_up(pc->R * pc->S * pc->C, 64 / elem_bytes);
  return pc;
}

// [K][Cin][R][S] -> [K][R][S][C] with rows of Kp (zero padding), converting each element with `cv`.
template <typename T, typename Src, typename Cvt>
std::vector<T> repack_krsc(const PackedConv& pc, int cin, const Src* src, Cvt cv) {
  std::vector<T> packed(static_cast<size_t>(pc.K) * pc.Kp, T{});
  for (int k = 0; k < pc.K; ++k)
    for (int c = 0; c < cin; ++c)
      for (int r = 0; r < pc.R; ++r)
        for (int s = 0; s < pc.S; ++s) {
          packed[static_cast<size_t>(k) * pc.Kp + (r * pc.S + s) * pc.C + c] =
              cv(k, src[((static_cast<size_t>(k) * cin + c) * pc.R + r) * pc.S + s]);
        }
  return packed;
}

}  // namespace

Expected<std::shared_ptr<PackedConv>> pack_conv(const Tensor& w, const Tensor* bias) {
  auto pc = packed_geometry(w.shape(), 2);
  const std::vector<uint16_t> packed = repack_krsc<uint16_t>(*pc, static_cast<int>(w.shape()[1]), w.data<float>(),
                                                             [&](int, float v) { return float_to_half(v); });
  std::vector<float> b(pc->K, 0.f);
  for (int k = 0; k < pc->K; ++k) b[k] = bias ? bias->data<float>()[k] : 0.f;
  QD_RETURN_IF_ERROR(pc->w.upload(packed));
  QD_RETURN_IF_ERROR(pc->bias.upload(b));
  return pc;
}

// Two convs' packed weights (both fp16, or both INT8 with their alphas) as one conv with a's output channels first,
// then b's (same C, R, S).
Expected<std::shared_ptr<PackedConv>> merge_packed(const PackedConv& a, const PackedConv& b) {
  if (a.C != b.C || a.R != b.R || a.S != b.S || a.Kp != b.Kp || !a.alpha.get() != !b.alpha.get()) {
    return internal("merge_packed: the convs' weights differ in shape or precision");
  }
  auto m = std::make_shared<PackedConv>();
  m->K = a.K + b.K;
  m->C = a.C;
  m->R = a.R;
  m->S = a.S;
  m->Kp = a.Kp;
  m->acc_bound = std::max(a.acc_bound, b.acc_bound);
  const size_t wa = a.w.size(), wb = b.w.size(), ba = a.bias.size(), bb = b.bias.size();
  QD_RETURN_IF_ERROR(m->w.alloc(wa + wb));
  QD_RETURN_IF_ERROR(m->bias.alloc(ba + bb));
  QD_CUDA_TRY(cudaMemcpy(m->w.get(), a.w.get(), wa, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->w.get()) + wa, b.w.get(), wb, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(m->bias.get(), a.bias.get(), ba, cudaMemcpyDeviceToDevice));
  QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->bias.get()) + ba, b.bias.get(), bb, cudaMemcpyDeviceToDevice));
  if (a.alpha.get()) {  // INT8: s_x * s_w[k], the same s_x (one input)
    const size_t aa = a.alpha.size(), ab = b.alpha.size();
    QD_RETURN_IF_ERROR(m->alpha.alloc(aa + ab));
    QD_CUDA_TRY(cudaMemcpy(m->alpha.get(), a.alpha.get(), aa, cudaMemcpyDeviceToDevice));
    QD_CUDA_TRY(cudaMemcpy(static_cast<char*>(m->alpha.get()) + aa, b.alpha.get(), ab, cudaMemcpyDeviceToDevice));
  }
  return m;
}

// INT8 weights exactly as the reference quantizes them (per output channel; a QAT model's scales when it has them),
// packed [K][R][S][C padded to 16] with rows padded to 64, and alpha = s_x * s_w[k] in fp32.
Expected<std::shared_ptr<PackedConv>> pack_conv_int8(const Tensor& w, const Tensor* bias, float sx,
                                                    const std::vector<float>* qat_scales) {
  const WeightQuant wq = qat_scales ? quantize_weights_with(w, 0, *qat_scales) : quantize_weights(w, 0);
  auto pc = packed_geometry(w.shape(), 1);
  const std::vector<int8_t> packed = repack_krsc<int8_t>(*pc, static_cast<int>(w.shape()[1]),
                                                         wq.q.data<int8_t>(), [](int, int8_t v) { return v; });
  std::vector<float> b(pc->K, 0.f), alpha(pc->K);
  for (int k = 0; k < pc->K; ++k) {
    alpha[k] = sx * wq.scales[k];
    b[k] = bias ? bias->data<float>()[k] : 0.f;
  }
  pc->acc_bound = int8_acc_bound(wq.q.data<int8_t>(), pc->K, wq.q.numel() / pc->K);
  QD_RETURN_IF_ERROR(pc->w.upload(packed));
  QD_RETURN_IF_ERROR(pc->bias.upload(b));
  QD_RETURN_IF_ERROR(pc->alpha.upload(alpha));
  return pc;
}

}  // namespace qd::cuda
