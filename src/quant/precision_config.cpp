#include "quant/precision_config.h"

#include <cfloat>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "quant/int8.h"

namespace qd {

namespace {

using Json = nlohmann::ordered_json;

std::string key_path(const std::string& field, const std::string& key) {
  return "$." + field + "[" + Json(key).dump() + "]";
}

Expected<float> read_scale(const Json& v, const std::string& path) {
  if (!v.is_number()) return invalid(path + ": expected a number, got " + std::string(v.type_name()));
  const double d = v.get<double>();
  const float s = std::isfinite(d) && std::fabs(d) <= FLT_MAX ? static_cast<float>(d) : 0.f;
  if (!std::isfinite(s) || !(s > 0)) {
    return invalid(path + ": scale " + v.dump() + " is not finite and positive (as a float32)");
  }
  return s;
}

Expected<std::vector<std::string>> read_names(const Json& v, const std::string& field) {
  if (!v.is_array()) return invalid("$." + field + ": expected an array of node names, got " + v.type_name());
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return invalid("$." + field + "[" + std::to_string(i) + "]: expected a node name (string), got " +
                     v[i].type_name());
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

Expected<PrecisionConfig> parse(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number too large for a double
    return invalid(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return invalid(std::string("$: expected an object, got ") + j.type_name());
  PrecisionConfig c;
  for (const auto& [key, v] : j.items()) {
    if (key == "int8_tensor_scales") {
      if (!v.is_object()) {
        return invalid("$.int8_tensor_scales: expected an object {tensor: scale}, got " + std::string(v.type_name()));
      }
      for (const auto& [name, s] : v.items()) {
        c.int8_tensor_scales.emplace_back(name, QD_TRY(read_scale(s, key_path(key, name))));
      }
    } else if (key == "fp16_nodes") {
      c.fp16_nodes = QD_TRY(read_names(v, key));
    } else if (key == "fp32_nodes") {
      c.fp32_nodes = QD_TRY(read_names(v, key));
    } else if (key == "weight_scales") {
      if (!v.is_object()) {
        return invalid("$.weight_scales: expected an object {weight: [scales]}, got " + std::string(v.type_name()));
      }
      for (const auto& [name, arr] : v.items()) {
        const std::string path = key_path(key, name);
        if (!arr.is_array() || arr.empty()) return invalid(path + ": expected a non-empty array of scales");
        std::vector<float>& scales = c.weight_scales[name];
        for (size_t i = 0; i < arr.size(); ++i) {
          scales.push_back(QD_TRY(read_scale(arr[i], path + "[" + std::to_string(i) + "]")));
        }
      }
    } else {
      return invalid("$." + key + ": unknown key; expected int8_tensor_scales, fp16_nodes, fp32_nodes or "
                     "weight_scales");
    }
  }
  return c;
}

}  // namespace

Expected<PrecisionConfig> parse_precision_config(const std::string& text, const std::string& what) {
  auto c = parse(text);
  if (!c) return Status(c.status()).prefix(what);
  return c;
}

Expected<PrecisionConfig> read_precision_config(const std::string& path) {
  const std::string text = QD_TRY(read_file(path, uint64_t{256} << 20));
  return parse_precision_config(text, path);
}

std::string format_precision_config(const PrecisionConfig& c) {
  Json j;
  j["int8_tensor_scales"] = Json::object();
  for (const auto& [name, s] : c.int8_tensor_scales) j["int8_tensor_scales"][name] = s;
  j["fp16_nodes"] = c.fp16_nodes;
  if (!c.fp32_nodes.empty()) j["fp32_nodes"] = c.fp32_nodes;
  if (!c.weight_scales.empty()) {
    j["weight_scales"] = Json::object();
    for (const auto& [name, s] : c.weight_scales) j["weight_scales"][name] = s;
  }
  return j.dump(2) + "\n";
}

Status check_precision_config(const PrecisionConfig& c, const Graph& g, const std::string& what) {
  auto fail = [&](const std::string& msg) { return invalid(what + ": " + msg); };
  for (const auto& [name, s] : c.int8_tensor_scales) {
    if (g.find_value(name) < 0) {
      return fail(key_path("int8_tensor_scales", name) + ": the model has no tensor named '" + name + "'");
    }
  }
  std::set<std::string> nodes;
  for (const Node& n : g.nodes) nodes.insert(n.name);
  for (const auto* list : {&c.fp16_nodes, &c.fp32_nodes}) {
    const char* field = list == &c.fp16_nodes ? "fp16_nodes" : "fp32_nodes";
    for (size_t i = 0; i < list->size(); ++i) {
      if (!nodes.count((*list)[i])) {
        return fail(std::string("$.") + field + "[" + std::to_string(i) + "]: the model has no node named '" +
                    (*list)[i] + "'");
      }
    }
  }
  for (const auto& [name, s] : c.weight_scales) {
    const Tensor* w = g.constant(g.find_value(name));
    const std::string path = key_path("weight_scales", name);
    if (!w) return fail(path + ": the model has no constant (weight) named '" + name + "'");
    // Output channels: axis 0 for Conv and transposed Gemm weights, axis 1 for a Gemm's or MatMul's B [K, N].
    const int64_t n = static_cast<int64_t>(s.size());
    if (w->rank() == 0 || (n != w->shape()[0] && !(w->rank() == 2 && n == w->shape()[1]))) {
      return fail(path + ": " + std::to_string(n) + " scales for a weight of shape " + shape_str(w->shape()) +
                  "; give one per output channel");
    }
  }
  return Status::ok();
}

namespace {

// Config node names are exact; Int8Options::float_nodes also reads regexes, so escape them.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

Status apply_precision_config(const std::string& path, const Graph& g, Int8Options* opt) {
  const PrecisionConfig c = QD_TRY(read_precision_config(path));
  QD_RETURN_IF_ERROR(check_precision_config(c, g, path));
  for (const auto& [name, s] : c.int8_tensor_scales) opt->act_scales[name] = s;
  for (const auto& [name, s] : c.weight_scales) opt->weight_scales[name] = s;
  for (const auto* list : {&c.fp16_nodes, &c.fp32_nodes}) {
    for (const auto& n : *list) opt->float_nodes.push_back(regex_escape(n));
  }
  return Status::ok();
}

}  // namespace qd
