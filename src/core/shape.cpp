#include "core/shape.h"

#include <cstdlib>

namespace qd {

bool is_static(const Shape& s) {
  for (int64_t d : s) {
    if (d < 0) return false;
  }
  return true;
}

Expected<int64_t> checked_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return invalid("shape " + shape_str(s) + " has an unknown or negative dimension");
    if (d != 0 && n > kMaxElements / d) {
      return invalid("shape " + shape_str(s) + " has more than 2^40 elements");
    }
    n *= d;
  }
  return n;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += s[i] < 0 ? std::string("?") : std::to_string(s[i]);
  }
  return out;
}

Expected<Shape> parse_shape(const std::string& text) {
  Shape s;
  size_t i = 0;
  if (text.empty()) return invalid("empty shape; write it like 1x3x640x640");
  while (i <= text.size()) {
    size_t j = text.find_first_of("x,", i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    if (part.empty() || part.size() > 12 || part.find_first_not_of("0123456789") != std::string::npos) {
      return invalid("bad shape '" + text + "'; write it like 1x3x640x640");
    }
    s.push_back(std::strtoll(part.c_str(), nullptr, 10));
    i = j + 1;
  }
  QD_RETURN_IF_ERROR(checked_numel(s).status());
  return s;
}

Expected<int> normalize_axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (da < 0 || db < 0) {
      out[i] = -1;
    } else {
      return invalid("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    }
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

}  // namespace qd
