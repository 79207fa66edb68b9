// Quantization and quality from a program's own data: calibrate a model on batches the caller supplies (the data
// source of TensorRT's IInt8Calibrator, as a function), measure each layer's INT8 sensitivity, and score outputs
// (top-k accuracy, COCO box mAP). The CLI's calibrate / sensitivity / eval commands read files into the same steps.
//
//   qdeploy::BatchSource data;
//   data.num_batches = 64;
//   data.batch = [&](int k) -> qdeploy::Expected<qdeploy::TensorMap> { return TensorMap{{"input", batch(k)}}; };
//   auto cal = qdeploy::calibrate("model.onnx", data);           // Expected<Calibration>
//   cal->save("model.cache");                                   // TensorRT's text format
//   opt.precision = qdeploy::Precision::kInt8; opt.calib_cache = "model.cache";
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qdeploy/detector.h"
#include "qdeploy/status.h"
#include "qdeploy/tensor.h"

namespace qdeploy {

using TensorMap = std::map<std::string, HostTensor>;  // model input name -> tensor

// Representative model inputs: batch(k) for k in [0, num_batches), each a map of every model input (fp32, one
// shape for all batches). Calibration reads each batch once per pass (one or two passes); sensitivity reads them
// many times (keeping them in memory up to a budget), so batch(k) must give the same tensors each time.
struct BatchSource {
  int num_batches = 0;
  std::function<Expected<TensorMap>(int k)> batch;
};

struct CalibrationOptions {
  // minmax | entropy | percentile | mse | auto (docs/quantization.md); mse is what the CLI uses by default.
  std::string algo = "mse";
  double percentile = 99.99;
  int bins = 2048;
  // Leave a detection head's float side without scales (quant/calibrator.h says which tensors).
  bool float_head = true;
  // The last N batches of the data do not calibrate; with auto they check the whole model (the per-tensor picks
  // against each algorithm for every tensor, by the INT8 model's output SNR against FP32; docs/quantization.md).
  int held_out_batches = 0;
};

// The result of a calibration: per-tensor activation scales (amax / 127), in the cache's order.
struct Calibration {
  std::string algorithm;  // the cache header's name: "EntropyCalibration2", "MinMaxCalibration", ...
  std::vector<std::pair<std::string, float>> scales;
  std::vector<std::string> float_head;  // tensors the detection-head rule left without a scale
  // auto with held-out batches: each configuration's output SNR in dB ("per-tensor", "minmax", "entropy",
  // "percentile", "mse") and the one kept.
  std::vector<std::pair<std::string, double>> auto_model_snr_db;
  std::string auto_kept;
  // Writes the TensorRT-format cache (atomically) that BuildOptions::calib_cache reads.
  Status save(const std::string& path) const;
  // The cache file's text.
  std::string to_string() const;
};

// Calibrates `model_path` (ONNX) on the reference backend over every batch of `data`.
Expected<Calibration> calibrate(const std::string& model_path, const BatchSource& data,
                                const CalibrationOptions& options = {});

struct SensitivityOptions {
  std::string calib_cache;               // activation scales (or a QAT model's own Q/DQ scales when empty)
  bool exact = true;                     // integer INT8 (the contract); false: quantize-dequantize in float
  bool sweep_float = true;               // each layer alone in float, the others INT8
  bool sweep_int8 = false;               // each layer alone in INT8, the others float
  std::vector<std::string> only_layers;  // names or regular expressions (empty: every quantizable layer)
};

struct LayerSensitivity {
  std::string name, op;
  int64_t macs = 0;
  double snr_float = 0;  // dB with this layer in float (NaN: not measured)
  double snr_int8 = 0;   // dB with this layer alone in INT8 (NaN: not measured)
};

// SNR (dB) of the outputs against FP32, all layers INT8 and one layer at a time; `ranking`: layer indices, most
// sensitive first.
struct SensitivityReport {
  double all_int8_snr = 0;
  std::vector<LayerSensitivity> layers;
  std::vector<size_t> ranking;
};
Expected<SensitivityReport> sensitivity(const std::string& model_path, const BatchSource& data,
                                        const SensitivityOptions& options = {});

// Top-1 / top-5 of classifier logits [N, classes] (float32) against labels (N class indices).
struct TopK {
  int64_t count = 0, correct1 = 0, correct5 = 0;
  double top1() const { return count ? static_cast<double>(correct1) / count : 0.0; }
  double top5() const { return count ? static_cast<double>(correct5) / count : 0.0; }
};
Expected<TopK> top_k(const HostTensor& logits, const std::vector<int>& labels);

// COCO box evaluation (pycocotools' numbers) of detections against an instances JSON file.
struct CocoBox {
  int64_t image_id = 0, category_id = 0;
  float x = 0, y = 0, w = 0, h = 0;  // pixels, top-left corner and size
  float score = 0;
};
struct CocoStats {
  // AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl
  std::vector<std::string> names;
  std::vector<double> values;
  size_t images = 0, detections = 0;
};
Expected<CocoStats> coco_eval(const std::string& annotations_path, const std::vector<CocoBox>& detections);
// The same for a detector's output (Detector::detect or decode: one list per image, boxes in the image's pixels),
// with the images' ids in the annotations and the model's class indices mapped to category ids as `qdeploy eval
// --class-map` maps them: "sorted" (the annotations' ids in increasing order), "coco80" (COCO's 80 of 91), "identity".
Expected<CocoStats> coco_eval(const std::string& annotations_path, const std::vector<int64_t>& image_ids,
                              const std::vector<std::vector<Detection>>& detections, int num_classes,
                              const std::string& class_map = "sorted");

}  // namespace qdeploy
