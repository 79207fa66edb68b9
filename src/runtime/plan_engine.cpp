// Loading plans: load_engine / is_plan_file, and the codecs of the CPU plan's option sections.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/shape.h"
#include "plan/byte_io.h"
#include "plan/graph_codec.h"
#include "plan/plan_file.h"
#include "runtime/plan_sections.h"

namespace qd {

std::string encode_build_options(const BuildOptions& opt) {
  ByteWriter w;
  w.str(opt.device);
  w.str(precision_name(opt.precision));  // the word, as plans have always stored it
  w.shape_map(opt.shapes);
  w.str(opt.calib_cache);  // where the scales came from (information only: the "int8" section holds them)
  w.str(opt.int8_mode);
  w.strs(opt.fp16_layers);
  w.strs(opt.fp32_layers);
  w.str(opt.precision_config);
  w.shape_map(opt.min_shapes);
  w.shape_map(opt.opt_shapes);
  w.shape_map(opt.max_shapes);
  w.i32(opt.device_index);
  w.str(opt.timing_cache);
  w.strs(opt.tactic_sources);
  w.strs(opt.input_formats);
  w.strs(opt.output_formats);
  w.str(opt.kernel_policy.to_string());
  return w.take();
}

Expected<BuildOptions> decode_build_options(const std::string& data) {
  ByteReader r(data, "plan section 'build_options'");
  BuildOptions opt;
  opt.device = r.str("device");
  const std::string precision = r.str("precision");
  opt.shapes = r.shape_map("shapes");
  opt.calib_cache = r.str("calibration cache path");
  opt.int8_mode = r.str("int8 mode");
  opt.fp16_layers = r.strs("fp16 layers");
  opt.fp32_layers = r.strs("fp32 layers");
  opt.precision_config = r.str("precision config path");
  opt.min_shapes = r.shape_map("min shapes");
  opt.opt_shapes = r.shape_map("opt shapes");
  opt.max_shapes = r.shape_map("max shapes");
  opt.device_index = r.i32();
  opt.timing_cache = r.str("timing cache path");
  opt.tactic_sources = r.strs("tactic sources");
  opt.input_formats = r.strs("input formats");
  opt.output_formats = r.strs("output formats");
  const std::string policy = r.str("kernel policy");
  r.expect_end();
  if (!r.ok()) return r.status();
  auto p = parse_precision(precision);
  if (!p) return invalid("plan section 'build_options': unknown precision '" + precision + "'; rebuild the plan");
  opt.precision = *p;
  auto kp = qdeploy::KernelPolicy::parse(policy);
  if (!kp) return invalid("plan section 'build_options': " + kp.status().message());
  opt.kernel_policy = std::move(*kp);
  for (const auto& [name, s] : opt.shapes) {
    auto n = checked_numel(s);  // bound shapes are static
    if (!n) return Status(n.status()).prefix("plan section 'build_options': shape of '" + name + "'");
  }
  Status st = check_build_options(opt);
  if (st.is_ok() && opt.int8_mode != "exact" && opt.int8_mode != "fake" && opt.int8_mode != "bitexact" &&
      opt.int8_mode != "dla") {
    st = invalid("unknown int8 mode '" + opt.int8_mode + "'");
  }
  if (st.is_ok()) st = check_shape_profile(opt.min_shapes, opt.opt_shapes, opt.max_shapes);
  if (!st.is_ok()) return st.prefix("plan section 'build_options'");
  return opt;
}

std::string encode_int8_options(const Int8Options& opt) {
  ByteWriter w;
  w.u8(opt.mode == Int8Mode::kFake ? 1 : opt.mode == Int8Mode::kExactDla ? 2 : 0);
  w.u32(static_cast<uint32_t>(opt.act_scales.size()));
  for (const auto& [name, s] : opt.act_scales) {
    w.str(name);
    w.f32(s);
  }
  w.u32(static_cast<uint32_t>(opt.weight_scales.size()));
  for (const auto& [name, v] : opt.weight_scales) {
    w.str(name);
    w.u32(static_cast<uint32_t>(v.size()));
    for (float s : v) w.f32(s);
  }
  // Exact names only (CpuEngine::save resolves the patterns): a plan never feeds std::regex.
  w.strs({opt.float_node_names.begin(), opt.float_node_names.end()});
  // Asymmetric activations' zero points (absent in plans written before they existed, and when there are none).
  if (!opt.act_zero_points.empty()) {
    w.u32(static_cast<uint32_t>(opt.act_zero_points.size()));
    for (const auto& [name, zp] : opt.act_zero_points) {
      w.str(name);
      w.u8(static_cast<uint8_t>(zp));
    }
  }
  return w.take();
}

Expected<Int8Options> decode_int8_options(const std::string& data) {
  ByteReader r(data, "plan section 'int8'");
  auto check = [&](const std::string& name, float s) {
    if (r.ok() && !(std::isfinite(s) && s > 0)) {
      r.fail("tensor '" + name + "' has an invalid scale " + std::to_string(s));
    }
  };
  Int8Options opt;
  const uint8_t mode = r.u8();
  if (r.ok() && mode > 2) r.fail("unknown int8 mode " + std::to_string(mode));
  opt.mode = mode == 1 ? Int8Mode::kFake : mode == 2 ? Int8Mode::kExactDla : Int8Mode::kExact;
  const uint32_t na = r.count("activation scales", 8);
  for (uint32_t i = 0; i < na && r.ok(); ++i) {
    std::string name = r.str("tensor name");
    const float s = r.f32();
    check(name, s);
    if (r.ok() && !opt.act_scales.emplace(name, s).second) r.fail("tensor '" + name + "' has two scales");
  }
  const uint32_t nw = r.count("weight scales", 8);
  for (uint32_t i = 0; i < nw && r.ok(); ++i) {
    std::string name = r.str("weight name");
    std::vector<float> v(r.count("channel scales", 4));
    for (float& s : v) {
      s = r.f32();
      check(name, s);
    }
    if (r.ok() && !opt.weight_scales.emplace(name, std::move(v)).second) {
      r.fail("weight '" + name + "' is listed twice");
    }
  }
  for (auto& name : r.strs("float node names")) opt.float_node_names.insert(std::move(name));
  const uint32_t nz = r.ok() && r.left() > 0 ? r.count("zero points", 5) : 0;
  for (uint32_t i = 0; i < nz && r.ok(); ++i) {
    std::string name = r.str("tensor name");
    const int zp = r.u8();
    if (r.ok() && !opt.act_scales.count(name)) r.fail("zero point of tensor '" + name + "', which has no scale");
    if (r.ok() && !opt.act_zero_points.emplace(name, zp).second) r.fail("tensor '" + name + "' has two zero points");
  }
  r.expect_end();
  if (!r.ok()) return r.status();
  return opt;
}

bool is_plan_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[sizeof kPlanMagic];
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return looks_like_plan(magic, n);
}

Expected<std::map<std::string, std::string>> decode_cuda_kernels(const std::string& data) {
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid("CUDA plan: section cuda.kernels is not a JSON object");
  std::map<std::string, std::string> kernels;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) return invalid("CUDA plan: cuda.kernels['" + k + "'] is not a string");
    kernels[k] = v.get<std::string>();
  }
  return kernels;
}

const char* split_words(const std::string& split) {
  static const char* const kWords[] = {"the whole batch at once", "two halves on two streams",
                                       "two halves on two streams, held in step"};  // kSplits' order
  static_assert(std::size(kWords) == std::size(kSplits));
  for (size_t i = 0; i < std::size(kSplits); ++i) {
    if (split == kSplits[i]) return kWords[i];
  }
  return nullptr;
}

static const std::string kSplitPrefix = "split:n";

std::string batch_split_key(int64_t batch, const std::map<std::string, Shape>& shapes) {
  std::string key = kSplitPrefix + std::to_string(batch) + ":";
  for (const auto& [name, shape] : shapes) key += name + "=" + shape_str(shape) + ";";
  return key;
}

std::vector<BatchSplit> batch_splits(const std::map<std::string, std::string>& kernels) {
  std::vector<BatchSplit> out;
  for (const auto& [key, value] : kernels) {
    if (key.compare(0, kSplitPrefix.size(), kSplitPrefix) != 0) continue;
    const size_t colon = key.find(':', kSplitPrefix.size());
    if (colon == std::string::npos) continue;
    BatchSplit b;
    // The batch as digits (at most 18: no overflow); a key of another form is not listed.
    const std::string digits = key.substr(kSplitPrefix.size(), colon - kSplitPrefix.size());
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    b.batch = std::stoll(digits);
    for (size_t i = colon + 1; i < key.size();) {  // "name=dims;" entries
      size_t end = key.find(';', i);
      if (end == std::string::npos) end = key.size();
      b.inputs += (b.inputs.empty() ? "" : ", ") + key.substr(i, end - i);
      i = end + 1;
    }
    b.split = value;
    out.push_back(std::move(b));
  }
  std::stable_sort(out.begin(), out.end(), [](const BatchSplit& x, const BatchSplit& y) { return x.batch < y.batch; });
  return out;
}

Expected<CudaPlanParts> decode_cuda_plan(const PlanFile& plan) {
  const PlanSection* graph = plan.find("graph");
  const PlanSection* options = plan.find("build_options");
  const PlanSection* kernels = plan.find("cuda.kernels");
  if (!graph || !options || !kernels) {
    return invalid("CUDA plan is missing a section (graph, build_options, cuda.kernels)");
  }
  CudaPlanParts parts;
  parts.graph = QD_TRY(decode_graph(graph->data));
  parts.options = QD_TRY(decode_build_options(options->data));
  parts.options.timing_cache.clear();  // a plan never writes files where it was built
  parts.kernels = QD_TRY(decode_cuda_kernels(kernels->data));
  if (parts.options.precision == Precision::kInt8) {
    const PlanSection* sec = plan.find("int8");
    if (!sec) return invalid("INT8 CUDA plan without its int8 section");
    parts.int8 = QD_TRY(decode_int8_options(sec->data));
  }
  return parts;
}

PlanFile new_plan(const std::string& target, const BuildOptions& opt, const std::vector<TensorDesc>& inputs,
                  const std::vector<TensorDesc>& outputs) {
  PlanFile plan;
  plan.header.qdeploy_version = QD_VERSION;
  plan.header.target = target;
  plan.header.precision = precision_name(opt.precision);
  for (const auto& d : inputs) {
    auto lo = opt.min_shapes.find(d.name);
    if (lo != opt.min_shapes.end()) {
      plan.header.profile.push_back({d.name, lo->second, opt.opt_shapes.at(d.name), opt.max_shapes.at(d.name)});
    } else {
      plan.header.profile.push_back({d.name, d.shape, d.shape, d.shape});
    }
  }
  PlanIo io;
  auto tensor = [](const TensorDesc& d) {
    return PlanTensor{d.name, d.dtype, d.shape, d.layout == TensorLayout::kNHWC, d.scale};
  };
  for (const auto& d : inputs) io.inputs.push_back(tensor(d));
  for (const auto& d : outputs) io.outputs.push_back(tensor(d));
  plan.add("io", encode_plan_io(io));
  return plan;
}

}  // namespace qd
