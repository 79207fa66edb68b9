// Better INT8 weights without training, from calibration data on the reference backend: AdaRound-style rounding
// and bias correction for every Conv that INT8 quantizes (its input has an activation scale).
//
// Per Conv, on output positions sampled from the calibration batches (the float model's activations, so each layer
// is fitted on its own, errors do not chain), with x a sampled input patch, x~ its quantize-dequantize with the
// input's scale, W_c an output channel's float weights and V_c its quantized ones (V_c = s_c q_c, s_c = max|W_c|/127
// as lower_int8 derives it):
//   error of channel c    f_c(V_c) = sum_p (V_c . x~_p - W_c . x_p)^2   (weight and activation quantization together)
//   bias correction       b_c -= mean_p (V_c . x~_p - W_c . x_p): the mean shift the quantization causes, folded into
//                         the bias (the Conv gets a bias if it had none)
//   AdaRound-style        q_c[k] in {floor(W_c[k]/s_c), ceil(W_c[k]/s_c)} (clamped to [-127, 127]) chosen to minimize
//                         f_c, or f_c minus its mean part when bias correction is on too (the bias absorbs the mean,
//                         so the rounding fits the rest). Exact quadratic form in the sampled patches
//                         (H = sum x~ x~^T, g_c = sum x~ (x~ - x) . W_c), minimized by coordinate descent from
//                         round-to-nearest: each sweep tries every weight's other rounding and keeps it when f_c
//                         drops, so f_c never rises above round-to-nearest's (a monotone, deterministic optimizer;
//                         AdaRound's own is a continuous relaxation with an annealed regularizer). The weight holding
//                         max|W_c| stays at +-127 so that the scale max|V_c|/127 re-derives s_c. A Conv with fewer
//                         samples than min_samples_per_weight times its patch size keeps round-to-nearest: with too
//                         few equations the fit would only memorize the samples (small late layers of a classifier
//                         at a few images).
// The adjusted weights are written as floats V_c = s_c q_c, so that any engine that derives per-channel scales as
// max|w|/127 (qdeploy, TensorRT) quantizes them to exactly q_c: the result exports as an ONNX model plus the
// calibration cache, whose activation scales are the ones the fit used.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace qd {

struct WeightAdjustOptions {
  bool adaround = false;
  bool bias_correction = false;
  int samples_per_batch = 256;      // output positions sampled per Conv and batch
  int max_sweeps = 10;              // coordinate-descent sweeps per output channel (it stops earlier at a minimum)
  int min_samples_per_weight = 4;   // AdaRound needs samples >= this x the patch size (C/group * kh * kw)
  uint32_t seed = 0;                // of the position sampling
  std::vector<std::string> skip_layers;  // Conv names (or regexes, see matches_any) left as they are
  std::function<void(int batches_done)> progress;  // called after each batch (optional)
};

struct LayerAdjustment {
  std::string node, weight;
  int64_t samples = 0;
  double err_nearest = 0;    // mean squared output error per sampled value: round-to-nearest weights, old bias
  double err_adjusted = 0;   // the same with the adjusted weights and bias
  int64_t flipped = 0;       // weights rounded the other way than to nearest
  bool rounding_fitted = false;  // false where AdaRound was not asked for or the samples were too few
  double bias_shift_rms = 0; // RMS over channels of the bias change
};

struct WeightAdjustResult {
  std::map<std::string, Tensor> weights;             // weight constant name -> adjusted float weights
  std::map<std::string, std::vector<float>> biases;  // Conv node name -> its corrected bias (one per output channel)
  std::vector<LayerAdjustment> layers;               // in graph order
};

using AdjustBatchFn = std::function<Expected<std::map<std::string, Tensor>>(int batch)>;

// `prepared`: the float graph, shapes inferred for the batches' shapes. `act_scales`: the activation scales (tensor
// name -> scale, symmetric) the model will be quantized with. Convs whose weights are not a float constant of their
// own (shared with another node) or whose input has no scale are left out.
Expected<WeightAdjustResult> adjust_weights(const Graph& prepared, const std::map<std::string, float>& act_scales,
                                            int num_batches, const AdjustBatchFn& batches,
                                            const WeightAdjustOptions& opt);

// Writes the adjusted weights and biases into `g` (e.g. the model as imported, to export it): the Convs and weight
// constants are found by name and must have the shapes the adjustment saw.
Status apply_weight_adjustments(Graph& g, const WeightAdjustResult& r);

}  // namespace qd
