// Small helpers shared by the NN / reduction / normalization / quantization op files.
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace qd::ops {

// An empty tensor (a 0 dim) may have other dims whose product overflows int64 (checked_numel only bounds prefix
// products), so kernels bail out on empty inputs before computing any product of dims.
inline bool has_zero_dim(const Shape& s) {
  for (int64_t d : s) {
    if (d == 0) return true;
  }
  return false;
}

// Product of dims [b, e) of s; 0 when s has any 0 dim (see above), else at most numel(s) <= 2^40.
inline int64_t range_product(const Shape& s, size_t b, size_t e) {
  if (has_zero_dim(s)) return 0;
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

}  // namespace qd::ops
