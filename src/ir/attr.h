// Typed node attributes, as ONNX defines them. Ops read them through checked getters that say what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace qd {

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

class AttrMap {
 public:
  void set(const std::string& name, AttrValue v) { m_[name] = std::move(v); }
  bool has(const std::string& name) const { return m_.count(name) != 0; }
  void erase(const std::string& name) { m_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return m_; }

  // Each getter returns the default when the attribute is absent and an error when it has another type.
  Expected<int64_t> get_int(const std::string& name, std::optional<int64_t> def = std::nullopt) const;
  Expected<float> get_float(const std::string& name, std::optional<float> def = std::nullopt) const;
  Expected<std::string> get_string(const std::string& name, std::optional<std::string> def = std::nullopt) const;
  Expected<std::vector<int64_t>> get_ints(const std::string& name,
                                          std::optional<std::vector<int64_t>> def = std::nullopt) const;
  Expected<std::vector<float>> get_floats(const std::string& name,
                                          std::optional<std::vector<float>> def = std::nullopt) const;
  Expected<Tensor> get_tensor(const std::string& name) const;

 private:
  std::map<std::string, AttrValue> m_;
};

std::string attr_to_string(const AttrValue& v);

}  // namespace qd
