// qdeploy calibrate MODEL --data DIR|FILES|NPY|NPZ --algo minmax|entropy|percentile|mse|auto --cache out.cache
//                  [--bias-correction] [--adaround] [--float-layers L,...] [-o adjusted.onnx] [--json report.json]
// Runs representative data through the reference backend (images preprocessed exactly as `qdeploy eval` does: a
// --preprocess spec, else the detector's letterbox in the style of --letterbox, default val as eval's, and eval
// --classes' classifier_input for other image models; or .npy/.npz tensors as they are) and writes per-tensor INT8
// scales in TensorRT's calibration cache format. calib_data.h is the code path and CalibDefaults the defaults that
// every command that calibrates shares. --bias-correction / --adaround then fit the weights (calib_adjust.h).
#include <cstdio>

#include "build_flags.h"
#include "calib_adjust.h"
#include "calib_data.h"
#include "core/file_io.h"
#include "commands.h"

namespace qd::cli {

namespace {

struct CalibrateArgs {
  std::string model;
  std::vector<std::string> data;
  std::string fmnist;
  std::string algo = CalibDefaults::kAlgo;
  double percentile = CalibDefaults::kPercentile;
  int batches = CalibDefaults::kBatches;  // 0: all the data
  int batch_size = CalibDefaults::kBatchSize;
  std::string cache;
  std::string header;
  std::string letterbox = kDefaultLetterbox;
  std::string preprocess;
  bool no_head_rule = false;
  bool bias_correction = false, adaround = false;
  std::vector<std::string> float_layers;  // left out of the weight fit
  std::string output;  // the model with adjusted weights
  std::string json;
};

int run_calibrate(const CalibrateArgs& a) {
  if (is_plan_file(a.model)) return report(invalid("calibrate needs the ONNX model, not a plan ('" + a.model + "')"));
  if (a.data.empty() == a.fmnist.empty()) {
    return report(invalid("give the calibration data: --data DIR|FILES (images, .npy or .npz) or --fmnist DIR"));
  }
  if (a.batches < 0) return report(invalid("--batches must be >= 0"));
  if (a.batch_size < 1 || a.batch_size > 256) return report(invalid("--batch-size must be in 1..256"));
  if (!(a.percentile > 0 && a.percentile <= 100)) return report(invalid("--percentile must be in (0, 100]"));
  auto algo = parse_calib_algo(a.algo);
  if (!algo) return report(algo.status());
  if ((a.bias_correction || a.adaround) && a.output.empty()) {
    return report(invalid("--bias-correction and --adaround change the weights: give the model to write, -o FILE.onnx"));
  }
  if (!a.float_layers.empty() && a.output.empty()) {
    return report(invalid("--float-layers leaves layers out of the weight fit: add --bias-correction and/or "
                          "--adaround and -o FILE.onnx"));
  }
  if (!a.output.empty() && !(a.bias_correction || a.adaround)) {
    return report(invalid("-o writes the model with adjusted weights: add --bias-correction and/or --adaround"));
  }
  CalibCache header;
  if (!a.header.empty()) {
    if (Status s = parse_cache_header(a.header, &header); !s) return report(s.prefix("--cache-header"));
  }
  ImageSource src;
  src.data = a.data;
  src.fmnist = a.fmnist;
  src.batches = a.batches;
  src.batch_size = a.batch_size;
  src.letterbox = a.letterbox;
  auto spec = preprocess_from_flag(a.preprocess);
  if (!spec) return report(spec.status());
  src.preprocess = *spec;
  auto engine = engine_for_data(a.model, src);
  if (!engine) return report(engine.status());
  ImageBatches data(src, engine->get());
  if (Status s = data.init(); !s) return report(s);
  CalibOptions opt;
  opt.algo = *algo;
  opt.percentile = a.percentile;
  opt.float_head = !a.no_head_rule;
  CalibReport calib_report;
  auto calibrated = calibrate_model(a.model, data, opt, a.algo, false, &calib_report);
  if (!calibrated) return report(calibrated.status());
  CalibCache& cache = *calibrated;
  if (!a.header.empty()) {
    cache.version = header.version;
    cache.algorithm = header.algorithm;
  }
  if (Status s = write_calib_cache(a.cache, cache); !s) return report(s);
  print_calib_report(calib_report);
  if (data.tensors()) {
    std::printf("wrote %zu tensor scales (%s, %d batches) to %s\n", cache.scales.size(), a.algo.c_str(),
                data.num_batches(), a.cache.c_str());
  } else {
    std::printf("wrote %zu tensor scales (%s, %d images) to %s\n", cache.scales.size(), a.algo.c_str(),
                data.num_batches() * data.batch(), a.cache.c_str());
  }
  Json j;
  j["cache"] = a.cache;
  j["algo"] = a.algo;
  j["batches"] = data.num_batches();
  j.update(calib_report_json(calib_report));
  if (!a.output.empty()) {
    WeightAdjustOptions wo;
    wo.adaround = a.adaround;
    wo.bias_correction = a.bias_correction;
    wo.skip_layers = a.float_layers;
    auto adjusted = adjust_and_export(a.model, data, cache, wo, a.output, false);
    if (!adjusted) return report(adjusted.status());
    std::printf("wrote the model with adjusted weights to %s (use it with %s)\n", a.output.c_str(), a.cache.c_str());
    j["adjusted_model"] = a.output;
    j["weight_adjustments"] = weight_adjust_json(*adjusted);
  }
  if (!a.json.empty()) {
    if (Status s = write_file_atomic(a.json, j.dump(2) + "\n"); !s) return report(s);
  }
  return 0;
}

}  // namespace

RunFn add_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* sub = app.add_subcommand("calibrate", "INT8 calibration: per-tensor scales into a TensorRT-format cache");
  sub->add_option("model", a->model, "ONNX model")->required();
  sub->add_option("--data", a->data,
                  "Calibration data: images (folders or jpg/png files), or tensors: .npy files (the model's one "
                  "input) or .npz archives (input name -> array), one batch each (or per slice of a fixed batch)")
      ->delimiter(',');
  sub->add_option("--fmnist", a->fmnist, "Calibrate a classifier on the Fashion-MNIST train split (IDX folder)");
  sub->add_option("--algo,--calib-algo", a->algo,
                  "minmax, entropy, percentile, mse, or auto (per tensor, the one with the smallest quantization "
                  "error; then, on data beyond --batches, one algorithm for every tensor instead where that gives a "
                  "clearly better output SNR; reported)")
      ->capture_default_str();
  sub->add_option("--percentile", a->percentile, "For --algo percentile")->capture_default_str();
  sub->add_option("--batches,--calib-batches", a->batches, "Use at most this many batches (0: all)")
      ->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Images per batch when the model's batch is dynamic")
      ->capture_default_str();
  sub->add_option("--cache", a->cache, "Output calibration cache")->required();
  sub->add_option("--cache-header", a->header, "Header to write, e.g. TRT-8600-EntropyCalibration2");
  add_letterbox_option(sub, a->letterbox);
  add_preprocess_option(sub, a->preprocess);
  sub->add_flag("--no-head-rule", a->no_head_rule,
                "Give scales to the detection head's decode tensors too (by default the tensors after its last "
                "convs, Sigmoid and box decode, get none, so no engine squeezes them into one INT8 scale)");
  sub->add_flag("--bias-correction", a->bias_correction,
                "Fold the mean output shift INT8 causes in each conv (measured on the data) into its bias; needs -o");
  sub->add_flag("--adaround", a->adaround,
                "Round each conv's weights up or down to reconstruct its float output on the data; needs -o");
  sub->add_option("--float-layers", a->float_layers,
                  "With --bias-correction/--adaround: the layers the deployment keeps in float (its --fp16-layers or "
                  "--fp32-layers; names or regexes, comma separated) keep their weights and biases: a bias corrected "
                  "for INT8 is wrong in float")
      ->delimiter(',');
  sub->add_option("-o,--output", a->output, "With --bias-correction/--adaround: the ONNX model to write");
  sub->add_option("--json", a->json, "Write auto's choices, the head rule's tensors and the adjustments as JSON");
  return [a] { return run_calibrate(*a); };
}

}  // namespace qd::cli
