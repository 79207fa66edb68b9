#include "eval/topk.h"

#include <vector>

namespace qd {

Status TopK::add(const Tensor& logits, const uint8_t* labels) {
  const int64_t n = logits.rank() == 2 ? logits.shape()[0] : 0;
  std::vector<int32_t> wide(labels, labels + n);
  return add(logits, wide.data());
}

Status TopK::add(const Tensor& logits, const int32_t* labels) {
  if (logits.rank() != 2 || logits.dtype() != DType::kFloat32) {
    return invalid("classifier output must be float32 [N, classes], got " + shape_str(logits.shape()));
  }
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data<float>() + i * c;
    const int label = labels[i];
    if (label < 0 || label >= c) return invalid("label " + std::to_string(label) + " is outside the model's " + std::to_string(c) + " classes");
    // rank of the true class: classes scoring higher, or equal with a lower index
    int64_t rank = 0;
    for (int64_t k = 0; k < c; ++k) rank += row[k] > row[label] || (row[k] == row[label] && k < label);
    correct1 += rank == 0;
    correct5 += rank < 5;
  }
  count += n;
  return Status::ok();
}

}  // namespace qd
