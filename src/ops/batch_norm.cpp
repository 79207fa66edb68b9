// BatchNormalization in inference mode: y = (x - mean) / sqrt(var + epsilon) * scale + bias, per channel (axis 1).
// Training mode (batch statistics, running-mean outputs) is unsupported: qdeploy deploys trained models.
#include <cmath>

#include "ops/common.h"
#include "ops/nn_util.h"

namespace qd::ops {

namespace {

const char* const kParamNames[] = {"X", "scale", "B", "input_mean", "input_var"};

std::string dims(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Expected<double> read_epsilon(const Node& n, float def) {
  const float eps = QD_TRY(n.attrs.get_float("epsilon", def));
  if (!std::isfinite(eps) || eps < 0) {
    return invalid("epsilon must be a finite, non-negative number, got " + std::to_string(eps));
  }
  return static_cast<double>(eps);
}

// Number of elements each parameter holds per channel: 1 normally; the whole spatial extent with the per-activation
// form of opsets 7-8 (spatial=0, parameters of shape [C, D1, ..., Dn]).
Expected<int64_t> params_per_channel(const Node& n, const Shape& x) {
  if (n.opset >= 9) return int64_t{1};
  const int64_t spatial = QD_TRY(n.attrs.get_int("spatial", 1));
  if (spatial == 1) return int64_t{1};
  if (spatial != 0) return invalid("spatial must be 0 or 1, got " + std::to_string(spatial));
  return range_product(x, 2, x.size());
}

Status check_bn(const InferCtx& c) {
  QD_RETURN_IF_ERROR(require_float(c, 0));
  const Node& n = c.node;
  if (n.opset >= 14) {
    const int64_t training = QD_TRY(n.attrs.get_int("training_mode", 0));
    if (training != 0) {
      return unsupported("BatchNormalization with training_mode=1 (qdeploy runs inference only; export the model in "
                         "eval mode)");
    }
  }
  for (size_t i = 1; i < c.num_outputs(); ++i) {
    if (c.has_output(i)) {
      return unsupported("BatchNormalization's running/saved mean and variance outputs exist only in training mode "
                         "(qdeploy runs inference only; export the model in eval mode)");
    }
  }
  QD_RETURN_IF_ERROR(read_epsilon(n, 1e-5f).status());
  const Shape& x = c.shape(0);
  if (x.size() < 2) return invalid("X must have shape [N, C, ...] (rank >= 2), got rank " + std::to_string(x.size()));
  const int64_t per = QD_TRY(params_per_channel(n, x));
  Shape want = {x[1]};
  if (per != 1) want.insert(want.end(), x.begin() + 2, x.end());
  for (size_t i = 1; i < 5; ++i) {
    if (!is_float(c.dtype(i))) {
      return unsupported(std::string(kParamNames[i]) + " has element type " + dtype_name(c.dtype(i)) + " (floating point only)");
    }
    if (c.shape(i) != want) {
      return invalid(std::string(kParamNames[i]) + " must have shape " + dims(want) + " (one value per channel of X " +
                     dims(x) + "), got " + dims(c.shape(i)));
    }
  }
  return Status::ok();
}

}  // namespace

Status infer_BatchNormalization(InferCtx& c) {
  QD_RETURN_IF_ERROR(check_bn(c));
  c.set_output(0, c.dtype(0), c.shape(0));
  return Status::ok();
}

Status run_BatchNormalization(KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const double eps = QD_TRY(read_epsilon(c.node, 1e-5f));
  const int64_t per = QD_TRY(params_per_channel(c.node, xs));
  if (c.in[0]->numel() == 0) return Status::ok();  // (an empty X may still have a huge channel count)
  const int64_t n = xs[0], ch = xs[1];
  int64_t spatial = 1;
  for (size_t d = 2; d < xs.size(); ++d) spatial *= xs[d];
  // Per parameter slot: y = (x - mean) * a + bias with a = scale / sqrt(var + eps).
  const int64_t slots = ch * per;
  std::vector<double> mean(slots), a(slots), bias(slots);
  for (int64_t i = 0; i < slots; ++i) {
    mean[i] = c.in[3]->get_f64(i);
    a[i] = c.in[1]->get_f64(i) / std::sqrt(c.in[4]->get_f64(i) + eps);
    bias[i] = c.in[2]->get_f64(i);
  }
  return dispatch_float(c.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.in[0]->data<T>();
    T* y = c.out[0]->data<T>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t k = 0; k < ch; ++k) {
        const int64_t off = (b * ch + k) * spatial;
        for (int64_t s = 0; s < spatial; ++s) {
          const int64_t p = per == 1 ? k : k * per + s;
          y[off + s] = static_cast<T>((x[off + s] - mean[p]) * a[p] + bias[p]);
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace qd::ops
