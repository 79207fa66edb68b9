#include "build_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "calib_data.h"
#include "passes/passes.h"
#include "plan/plan_file.h"
#include "quant/calib_cache.h"
#include "runtime/model.h"

namespace qd::cli {

void add_build_flags(CLI::App* sub, BuildFlags& f) {
  sub->add_option("--device", f.device, "cpu or cuda")->capture_default_str();
  sub->add_option("--precision", f.precision, "fp32, fp16 or int8")->capture_default_str();
  sub->add_option("--shapes", f.shapes, "Bind input shapes, e.g. images:1x3x640x640 (repeatable)");
  sub->add_option("--calib-cache", f.calib_cache,
                  "INT8 activation scales (TensorRT calibration cache text format); with --calib, where they are "
                  "written");
  sub->add_option("--calib", f.calib_data,
                  "INT8: calibrate at build time on this data, as `qdeploy calibrate --data`: images (folders or "
                  "jpg/png files, preprocessed as inference does) or tensor files (.npy, .npz), comma separated")
      ->delimiter(',');
  sub->add_option("--calib-algo", f.calib_algo, "With --calib: minmax, entropy, percentile (99.99), mse or auto")
      ->capture_default_str();
  sub->add_option("--calib-batches", f.calib_batches, "With --calib: use at most this many batches (0: all)")
      ->capture_default_str();
  add_preprocess_option(sub, f.preprocess);
  sub->add_option("--int8-mode", f.int8_mode,
                  "INT8: exact (integer arithmetic), fake (CPU: float quantize-dequantize), bitexact (CUDA: INT8 "
                  "tensors identical to the CPU reference's, slower SiLU epilogues) or dla (CPU: exact, activations "
                  "rounded ties away from zero as Orin's DLA does)")
      ->capture_default_str();
  sub->add_option("--fp16-layers", f.fp16_layers,
                  "INT8 builds: layers kept in float (names or regexes, comma separated): fp16 on CUDA, fp32 on the CPU")
      ->delimiter(',');
  sub->add_option("--fp32-layers", f.fp32_layers,
                  "INT8 builds: layers kept in float, as --fp16-layers (the CUDA INT8 engine runs float layers in fp16)")
      ->delimiter(',');
  sub->add_option("--precision-config", f.precision_config,
                  "INT8 JSON: int8_tensor_scales (override the cache), fp16_nodes, fp32_nodes (from qdeploy qat2ptq)");
  sub->add_option("--min", f.min_shapes, "Shape profile: smallest input shape, e.g. images:1x3x320x320 (repeatable)");
  sub->add_option("--opt", f.opt_shapes, "Shape profile: the shape to optimize for (repeatable)");
  sub->add_option("--max", f.max_shapes, "Shape profile: largest input shape (repeatable)");
  sub->add_option("--timing-cache", f.timing_cache, "CUDA: file that remembers kernel timings between builds");
  sub->add_option("--tactic-sources", f.tactic_sources,
                  "CUDA fp16 convs: kernels to time, qdeploy and/or cudnn (comma separated; default both, cuDNN "
                  "when libcudnn.so.9 loads)")
      ->delimiter(',');
  sub->add_option("--input-format", f.input_formats,
                  "CUDA: memory format of the inputs, DTYPE[:LAYOUT] with fp32|fp16|int8 and nchw|nhwc, e.g. "
                  "int8:nhwc (int8: quantized with the input's INT8 scale); one for all or one per input, comma "
                  "separated; default fp32:nchw")
      ->delimiter(',');
  sub->add_option("--output-format", f.output_formats,
                  "CUDA: memory format of the outputs, as --input-format, e.g. fp16:nchw")
      ->delimiter(',');
  sub->add_option("--kernel-policy", f.kernel_policy,
                  "CUDA: kernel families and features left out, for A/B runs, e.g. no-pdl,no-side-stream,split=whole "
                  "(docs/cpp-api.md#kernelpolicy; QD_NO_* environment variables add to it)");
}

namespace {

// The environment switches of A/B runs and the policy words they stand for ("=" words take the variable's value).
struct EnvSwitch {
  const char* var;
  const char* word;
};
constexpr EnvSwitch kEnvSwitches[] = {
    {"QD_NO_WGMMA", "no-wgmma"},
    {"QD_NO_TMA", "no-tma"},
    {"QD_NO_HALO_S2", "no-warp-halo-s2"},
    {"QD_NO_WARP_PW", "no-warp-pw"},
    {"QD_NO_CLUSTER_SPLIT", "no-cluster-split"},
    {"QD_NO_IMAGE_STEM", "no-image-stem"},
    {"QD_NO_STAGED_EPILOGUE", "no-staged-epilogue"},
    {"QD_NO_QUAD_EPILOGUE", "no-quad-epilogue"},
    {"QD_NO_SMALL_ACC", "no-small-acc"},
    {"QD_NO_LEAN_EPILOGUE", "no-lean-epilogue"},
    {"QD_NO_PDL", "no-pdl"},
    {"QD_NO_SIDE_STREAM", "no-side-stream"},
    {"QD_NO_GRAPH_REFINE", "no-graph-refine"},
    {"QD_SPLIT", "split="},
    {"QD_ONLY_CONFIG", "only-config="},  // last: its value may hold commas
};

}  // namespace

Expected<qdeploy::KernelPolicy> kernel_policy_from_flags(const BuildFlags& f, std::vector<std::string>* set) {
  std::string text = f.kernel_policy;
  for (const EnvSwitch& e : kEnvSwitches) {
    const char* v = std::getenv(e.var);
    const std::string word = e.word;
    if (!v || (word.back() == '=' && !*v)) continue;  // an empty value: no restriction, as before
    if (set) set->push_back(e.var);
    text += (text.empty() ? "" : ",") + (word.back() == '=' ? word + v : word);
  }
  auto p = qdeploy::KernelPolicy::parse(text);
  if (!p) {
    return invalid(p.status().message() + " (from --kernel-policy '" + f.kernel_policy +
                   "' and the QD_* environment variables)");
  }
  return *p;
}

void add_letterbox_option(CLI::App* sub, std::string& style) {
  sub->add_option("--letterbox", style,
                  "Detector images: val (YOLOv5 val.py), ultralytics (detect.py), or cudla (640 centred on 672); "
                  "calibrate on the images as they will be evaluated")
      ->capture_default_str();
}

// --min/--opt/--max NAME:DIMS (repeatable).
static Expected<std::map<std::string, Shape>> parse_profile_flags(const std::vector<std::string>& flags,
                                                                  const std::string& flag) {
  std::map<std::string, Shape> out;
  for (const auto& f : flags) {
    const size_t colon = f.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return invalid("bad " + flag + " value '" + f + "'; write NAME:1x3x640x640");
    }
    auto s = parse_shape(f.substr(colon + 1));
    if (!s) return Status(s.status()).prefix(flag + " " + f);
    if (!out.emplace(f.substr(0, colon), *s).second) {
      return invalid(flag + " gives input '" + f.substr(0, colon) + "' twice");
    }
  }
  return out;
}

std::string build_flags_given(const BuildFlags& f) {
  const BuildFlags defaults;
  std::string given;
  auto note = [&](bool set, const char* flag) {
    if (set) given += std::string(given.empty() ? "" : ", ") + flag;
  };
  note(!f.shapes.empty(), "--shapes");
  note(!f.calib_cache.empty(), "--calib-cache");
  note(!f.calib_data.empty() || f.calib_algo != defaults.calib_algo || f.calib_batches != defaults.calib_batches,
       "--calib/--calib-algo/--calib-batches");
  note(f.int8_mode != defaults.int8_mode, "--int8-mode");
  note(!f.fp16_layers.empty(), "--fp16-layers");
  note(!f.fp32_layers.empty(), "--fp32-layers");
  note(!f.precision_config.empty(), "--precision-config");
  note(!f.min_shapes.empty() || !f.opt_shapes.empty() || !f.max_shapes.empty(), "--min/--opt/--max");
  note(!f.timing_cache.empty(), "--timing-cache");
  note(!f.tactic_sources.empty(), "--tactic-sources");
  note(!f.input_formats.empty() || !f.output_formats.empty(), "--input-format/--output-format");
  note(!f.kernel_policy.empty(), "--kernel-policy");
  return given;
}

Status check_flags_for_plan(const std::string& plan_path, const BuildFlags& f) {
  auto plan = read_plan(plan_path);
  if (!plan) return plan.status();
  const BuildFlags defaults;
  const PlanHeader& h = plan->header;
  if (f.device != defaults.device && f.device != h.target) {
    return invalid("'" + plan_path + "' is a plan for " + h.target + ", but --device " + f.device +
                   " was given; build a plan for " + f.device + " with `qdeploy build MODEL -o PLAN --device " +
                   f.device + "`");
  }
  const Precision asked = QD_TRY(parse_precision(f.precision));
  auto built = parse_precision(h.precision);  // read_plan accepts only the three words
  if (asked != Precision::kFp32 && (!built || asked != *built)) {
    return invalid("'" + plan_path + "' is a " + h.precision + " plan, but --precision " + f.precision +
                   " was given; rebuild it with `qdeploy build MODEL -o PLAN --precision " + f.precision + "`");
  }
  const std::string given = build_flags_given(f);
  if (!given.empty()) {
    return invalid("'" + plan_path + "' is a plan: its build options were fixed when it was built, so " + given +
                   " cannot apply; drop them, or rebuild the plan from the ONNX model with `qdeploy build`");
  }
  return Status::ok();
}

// --calib: the calibration `qdeploy calibrate MODEL --data DATA --algo ALGO` runs, its cache written to `path`.
static Status calibrate_for_build(const std::string& model, const BuildFlags& f, const std::string& path) {
  if (QD_TRY(parse_precision(f.precision)) != Precision::kInt8) {
    return invalid("--calib calibrates for INT8: add --precision int8");
  }
  CalibOptions opt;
  opt.algo = QD_TRY(parse_calib_algo(f.calib_algo));
  opt.percentile = CalibDefaults::kPercentile;
  if (f.calib_batches < 0) return invalid("--calib-batches must be >= 0");
  ImageSource src;
  src.data = f.calib_data;
  src.batches = f.calib_batches;
  src.letterbox = f.calib_letterbox;
  src.preprocess = QD_TRY(preprocess_from_flag(f.preprocess));
  auto fp32 = QD_TRY(engine_for_data(model, src));
  ImageBatches data(src, fp32.get());
  QD_RETURN_IF_ERROR(data.init().prefix("--calib"));
  const CalibCache cache = QD_TRY(calibrate_model(model, data, opt, f.calib_algo));
  return write_calib_cache(path, cache);
}

Expected<std::unique_ptr<Engine>> build_from_flags(const std::string& model, const BuildFlags& f) {
  if (is_plan_file(model)) {
    QD_RETURN_IF_ERROR(check_flags_for_plan(model, f));
    std::vector<std::string> env;
    if (kernel_policy_from_flags(f, &env) && !env.empty()) {
      std::string vars;
      for (const auto& v : env) vars += (vars.empty() ? "" : ", ") + v;
      std::fprintf(stderr, "warning: %s set, but '%s' is a plan: it runs with the kernel policy it was built with "
                   "(the switches apply when building)\n", vars.c_str(), model.c_str());
    }
    return load_engine(model);
  }
  if (!f.calib_data.empty()) {
    BuildFlags g = f;
    g.calib_data.clear();
    if (!f.calib_cache.empty()) {
      QD_RETURN_IF_ERROR(calibrate_for_build(model, f, f.calib_cache));
      return build_from_flags(model, g);
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    g.calib_cache = (fs::temp_directory_path(ec) / ("qdeploy-calib-" + std::to_string(::getpid()) + ".cache")).string();
    Status st = calibrate_for_build(model, f, g.calib_cache);
    auto engine = st.is_ok() ? build_from_flags(model, g) : Expected<std::unique_ptr<Engine>>(st);
    fs::remove(g.calib_cache, ec);
    return engine;
  }
  const Precision precision = QD_TRY(parse_precision(f.precision));
  if ((!f.fp16_layers.empty() || !f.fp32_layers.empty() || !f.precision_config.empty()) &&
      precision != Precision::kInt8) {
    return invalid("--fp16-layers, --fp32-layers and --precision-config choose the layers an INT8 build keeps in float; "
                   "with --precision " + f.precision + " every layer runs in " + f.precision +
                   " already (add --precision int8, or drop them)");
  }
  BuildOptions opt;
  opt.device = f.device;
  opt.precision = precision;
  opt.shapes = QD_TRY(parse_shape_flags(f.shapes));
  opt.calib_cache = f.calib_cache;
  opt.int8_mode = f.int8_mode;
  opt.fp16_layers = f.fp16_layers;
  opt.fp32_layers = f.fp32_layers;
  opt.precision_config = f.precision_config;
  opt.min_shapes = QD_TRY(parse_profile_flags(f.min_shapes, "--min"));
  opt.opt_shapes = QD_TRY(parse_profile_flags(f.opt_shapes, "--opt"));
  opt.max_shapes = QD_TRY(parse_profile_flags(f.max_shapes, "--max"));
  opt.timing_cache = f.timing_cache;
  opt.tactic_sources = f.tactic_sources;
  opt.input_formats = f.input_formats;
  opt.output_formats = f.output_formats;
  if (f.device == "cuda") {
    opt.kernel_policy = QD_TRY(kernel_policy_from_flags(f));
  } else if (!f.kernel_policy.empty()) {
    return invalid("--kernel-policy chooses GPU kernels; it is for --device cuda");
  }
  return build_engine(model, opt);
}

Expected<std::vector<std::string>> list_images(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  auto is_image = [](const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
  };
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        if (e.is_regular_file() && is_image(e.path())) found.push_back(e.path().string());
      }
      if (found.empty()) return invalid("no .jpg/.jpeg/.png images in folder '" + p + "'");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.push_back(p);
    } else {
      return not_found("'" + p + "' is neither an image file nor a folder");
    }
  }
  return out;
}

Status prepare_unless_open(Graph& g, const std::map<std::string, Shape>& shapes, const std::string& model,
                           Status* prepared) {
  std::vector<Value> declared_inputs;
  for (int v : g.inputs) declared_inputs.push_back(g.values[v]);
  PrepareOptions opt;
  opt.input_shapes = shapes;
  const Status st = prepare_graph(g, opt);
  *prepared = st;
  if (st.is_ok()) return st;
  bool open_dims = false;
  for (const Value& v : declared_inputs) {
    if (shapes.count(v.name)) continue;
    open_dims = open_dims || !v.has_shape;
    for (int64_t d : v.shape) open_dims = open_dims || d < 0;
  }
  return open_dims ? Status::ok() : Status(st).prefix(model);
}

}  // namespace qd::cli
