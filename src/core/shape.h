// Shapes: a list of dimensions; -1 marks a dimension not known yet (symbolic or data-dependent).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace qd {

using Shape = std::vector<int64_t>;

// Largest element count any tensor may have (2^40): guards every allocation derived from a file.
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool is_static(const Shape& s);
// Element count of a static shape; an error for unknown or negative dims or when the product exceeds kMaxElements.
Expected<int64_t> checked_numel(const Shape& s);
// Element count of a shape already known to be valid (internal use).
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "1x3x640x640", "?" for unknown dims
// Parses "1x3x640x640" (also "1,3,640,640").
Expected<Shape> parse_shape(const std::string& text);
// Normalizes a possibly negative axis for a tensor of rank `rank`; error when out of [-rank, rank).
Expected<int> normalize_axis(int64_t axis, size_t rank);
// Numpy-style broadcast of two shapes.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Row-major strides (in elements).
std::vector<int64_t> strides_of(const Shape& s);

}  // namespace qd
