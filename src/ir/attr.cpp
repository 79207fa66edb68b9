#include "ir/attr.h"

#include <sstream>

namespace qd {

namespace {
template <typename T>
Expected<T> get_typed(const std::map<std::string, AttrValue>& m, const std::string& name, const std::optional<T>& def,
                      const char* type_name) {
  auto it = m.find(name);
  if (it == m.end()) {
    if (def) return *def;
    return invalid("required attribute '" + name + "' is missing");
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return invalid("attribute '" + name + "' should be " + type_name);
}
}  // namespace

Expected<int64_t> AttrMap::get_int(const std::string& name, std::optional<int64_t> def) const {
  return get_typed<int64_t>(m_, name, def, "an int");
}
Expected<float> AttrMap::get_float(const std::string& name, std::optional<float> def) const {
  return get_typed<float>(m_, name, def, "a float");
}
Expected<std::string> AttrMap::get_string(const std::string& name, std::optional<std::string> def) const {
  return get_typed<std::string>(m_, name, def, "a string");
}
Expected<std::vector<int64_t>> AttrMap::get_ints(const std::string& name,
                                                 std::optional<std::vector<int64_t>> def) const {
  return get_typed<std::vector<int64_t>>(m_, name, def, "a list of ints");
}
Expected<std::vector<float>> AttrMap::get_floats(const std::string& name,
                                                 std::optional<std::vector<float>> def) const {
  return get_typed<std::vector<float>>(m_, name, def, "a list of floats");
}
Expected<Tensor> AttrMap::get_tensor(const std::string& name) const {
  return get_typed<Tensor>(m_, name, std::nullopt, "a tensor");
}

std::string attr_to_string(const AttrValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
          os << x;
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << x << '"';
        } else if constexpr (std::is_same_v<T, Tensor>) {
          os << "tensor<" << dtype_name(x.dtype()) << ", " << shape_str(x.shape()) << ">";
        } else {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
          os << ']';
        }
      },
      v);
  return os.str();
}

}  // namespace qd
