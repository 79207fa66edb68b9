#include "passes/passes.h"

namespace qd {

Status bind_input_shapes(Graph& g, const std::map<std::string, Shape>& shapes) {
  for (const auto& [name, s] : shapes) {
    bool found = false;
    for (int v : g.inputs) found |= g.values[v].name == name;
    if (!found) {
      std::string names;
      for (int v : g.inputs) names += (names.empty() ? "" : ", ") + g.values[v].name;
      return invalid("the model has no input named '" + name + "'; its inputs are: " + names);
    }
  }
  std::map<std::string, int64_t> dims;  // symbolic name -> value
  for (int v : g.inputs) {
    Value& val = g.values[v];
    auto it = shapes.find(val.name);
    if (it == shapes.end()) continue;
    const Shape& s = it->second;
    if (val.has_shape && s.size() != val.shape.size()) {
      return invalid("input '" + val.name + "' has rank " + std::to_string(val.shape.size()) + " (" +
                     shape_str(val.shape) + ") but shape " + shape_str(s) + " was given");
    }
    for (size_t i = 0; i < s.size(); ++i) {
      if (val.has_shape && val.shape[i] >= 0 && val.shape[i] != s[i]) {
        return invalid("input '" + val.name + "' has fixed dim " + std::to_string(i) + " = " +
                       std::to_string(val.shape[i]) + " but " + shape_str(s) + " was given");
      }
      const std::string& dn = i < val.dim_names.size() ? val.dim_names[i] : std::string();
      if (!dn.empty()) {
        auto [d, inserted] = dims.emplace(dn, s[i]);
        if (!inserted && d->second != s[i]) {
          return invalid("dim '" + dn + "' is bound to both " + std::to_string(d->second) + " and " +
                         std::to_string(s[i]));
        }
      }
    }
  }
  for (int v : g.inputs) {
    Value& val = g.values[v];
    auto it = shapes.find(val.name);
    if (it != shapes.end()) {
      auto n = checked_numel(it->second);
      if (!n) return Status(n.status()).prefix("input '" + val.name + "'");
      val.shape = it->second;
      val.has_shape = true;
      continue;
    }
    if (!val.has_shape) return invalid("input '" + val.name + "' has no declared shape; give one with --shapes " + val.name + ":1x3x640x640");
    for (size_t i = 0; i < val.shape.size(); ++i) {
      if (val.shape[i] >= 0) continue;
      const std::string& dn = i < val.dim_names.size() ? val.dim_names[i] : std::string();
      auto d = dims.find(dn);
      if (!dn.empty() && d != dims.end()) {
        val.shape[i] = d->second;
        continue;
      }
      return invalid("input '" + val.name + "' has a dynamic dim " + std::to_string(i) +
                     (dn.empty() ? std::string() : " ('" + dn + "')") + " (shape " + shape_str(val.shape) +
                     "); set it with --shapes " + val.name + ":<dims> or give an input file");
    }
  }
  return Status::ok();
}

}  // namespace qd
