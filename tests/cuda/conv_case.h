// What the direct tests of the tensor-core convolution (conv_f16_test, conv_int8_test) share: a conv shape, the
// device layouts of its input (NHWC, channels padded) and weights ([K][R][S][Cp], rows padded), and its ConvParams.
#pragma once

#include <cstddef>
#include <vector>

#include "backends/cuda/kernels/conv.h"

namespace qd::test {

struct ConvCase {
  int n, c, h, w, k, r, s, stride, pad;
};

// NCHW `src` as NHWC with cp channels per pixel (the padding zero), each element through `cvt`.
template <typename T, typename S, typename F>
std::vector<T> to_nhwc(const ConvCase& cs, int cp, const S* src, F cvt) {
  std::vector<T> out(static_cast<size_t>(cs.n) * cs.h * cs.w * cp, T{});
  for (int n = 0; n < cs.n; ++n)
    for (int c = 0; c < cs.c; ++c)
      for (int y = 0; y < cs.h; ++y)
        for (int x = 0; x < cs.w; ++x)
          out[((static_cast<size_t>(n) * cs.h + y) * cs.w + x) * cp + c] =
              cvt(src[((static_cast<size_t>(n) * cs.c + c) * cs.h + y) * cs.w + x]);
  return out;
}

// [K][C][R][S] `src` as [K][R][S][cp] rows of kp elements (the padding zero).
template <typename T, typename S, typename F>
std::vector<T> to_krsc(const ConvCase& cs, int cp, int kp, const S* src, F cvt) {
  std::vector<T> out(static_cast<size_t>(cs.k) * kp, T{});
  for (int k = 0; k < cs.k; ++k)
    for (int c = 0; c < cs.c; ++c)
      for (int r = 0; r < cs.r; ++r)
        for (int s = 0; s < cs.s; ++s)
          out[static_cast<size_t>(k) * kp + (r * cs.s + s) * cp + c] =
              cvt(src[((static_cast<size_t>(k) * cs.c + c) * cs.r + r) * cs.s + s]);
  return out;
}

inline cuda::ConvParams conv_params(const ConvCase& cs, int cp, int kp, int oh, int ow) {
  cuda::ConvParams p;
  p.N = cs.n, p.H = cs.h, p.W = cs.w, p.C = cp, p.K = cs.k, p.R = cs.r, p.S = cs.s;
  p.stride_h = p.stride_w = cs.stride;
  p.pad_h = p.pad_w = cs.pad;
  p.OH = oh, p.OW = ow, p.Kp = kp, p.in_ld = cp;
  return p;
}

}  // namespace qd::test
