// Top-1 / top-5 accuracy of classifier logits.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace qd {

struct TopK {
  int64_t count = 0, correct1 = 0, correct5 = 0;
  // logits [N, classes] (float32); labels[N] class indices. Ties rank the lower class index first.
  Status add(const Tensor& logits, const uint8_t* labels);
  Status add(const Tensor& logits, const int32_t* labels);
  double top1() const { return count ? static_cast<double>(correct1) / count : 0.0; }
  double top5() const { return count ? static_cast<double>(correct5) / count : 0.0; }
};

}  // namespace qd
