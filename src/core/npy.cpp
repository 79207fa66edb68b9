#include "core/npy.h"

#include <cstring>

#include "core/file_io.h"

namespace qd {

namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16}, {"|i1", DType::kInt8},
    {"|u1", DType::kUInt8},   {"<i2", DType::kInt16},   {"<u2", DType::kUInt16},  {"<i4", DType::kInt32},
    {"<u4", DType::kUInt32},  {"<i8", DType::kInt64},   {"<u8", DType::kUInt64},  {"|b1", DType::kBool},
};

// Finds the value text after 'key': in a python dict literal.
bool dict_value(const std::string& header, const std::string& key, std::string* out) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return false;
  size_t p = header.find(':', k);
  if (p == std::string::npos) return false;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t end = p;
  if (p < header.size() && header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) return false;
    ++end;
  } else if (p < header.size() && header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos) return false;
    ++end;
  } else {
    end = header.find_first_of(",}", p);
    if (end == std::string::npos) return false;
  }
  *out = header.substr(p, end - p);
  return true;
}

}  // namespace

Expected<Tensor> parse_npy(const std::string& bytes, const std::string& what) {
  auto bad = [&](const std::string& why) { return invalid(what + ": not a valid .npy file: " + why); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) return bad("missing \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    uint32_t n;
    std::memcpy(&n, bytes.data() + 8, 4);
    header_len = n;
    offset = 12;
  } else {
    return bad("unknown format version " + std::to_string(major));
  }
  if (header_len > bytes.size() - offset) return bad("header longer than the file");
  const std::string header = bytes.substr(offset, header_len);
  std::string descr, order, shape_text;
  if (!dict_value(header, "descr", &descr) || !dict_value(header, "fortran_order", &order) ||
      !dict_value(header, "shape", &shape_text)) {
    return bad("header lacks descr, fortran_order or shape");
  }
  if (order == "True") return bad("Fortran order is not supported; save with np.save(f, np.ascontiguousarray(a))");
  if (order != "False") return bad("fortran_order is '" + order + "', expected True or False");
  if (descr.size() < 3 || descr.front() != '\'' || descr.back() != '\'') return bad("descr " + descr + " is not a quoted type string");
  descr = descr.substr(1, descr.size() - 2);
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';  // native order; qdeploy runs on little-endian hosts
  DType dtype = DType::kUndefined;
  for (const auto& t : kTypes) {
    if (descr == t.descr || (descr.size() == 3 && descr[0] == '<' && t.descr[0] == '|' && descr.substr(1) == t.descr + 1)) {
      dtype = t.dtype;
    }
  }
  if (dtype == DType::kUndefined) return bad("unsupported dtype '" + descr + "' (little-endian numeric only)");
  // shape: a python tuple of non-negative ints, e.g. "()", "(5,)", "(1, 3, 224, 224)".
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')') {
    return bad("shape " + shape_text + " is not a tuple like (1, 3, 224, 224)");
  }
  Shape shape;
  const std::string inner = shape_text.substr(1, shape_text.size() - 2);
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < inner.size() && inner[i] == ' ') ++i;
  };
  skip_spaces();
  while (i < inner.size()) {
    size_t j = i;
    while (j < inner.size() && inner[j] >= '0' && inner[j] <= '9') ++j;
    if (j == i || j - i > 15) return bad("bad shape " + shape_text);
    if (shape.size() >= 32) return bad("shape " + shape_text + " has more than 32 dims");
    shape.push_back(std::stoll(inner.substr(i, j - i)));
    i = j;
    skip_spaces();
    if (i == inner.size()) {
      if (shape.size() == 1) return bad("bad shape " + shape_text + " (a 1-d shape is written (n,))");
      break;
    }
    if (inner[i] != ',') return bad("bad shape " + shape_text);
    ++i;
    skip_spaces();
  }
  auto n = checked_numel(shape);
  if (!n) return bad(n.status().message());
  const size_t data_off = offset + header_len;
  const size_t need = static_cast<size_t>(*n) * dtype_size(dtype);
  if (bytes.size() - data_off != need) {
    return bad("data is " + std::to_string(bytes.size() - data_off) + " bytes, but shape " + shape_str(shape) + " of " +
               dtype_name(dtype) + " needs " + std::to_string(need));
  }
  Tensor t(dtype, shape);
  if (need) std::memcpy(t.raw(), bytes.data() + data_off, need);
  return t;
}

Expected<Tensor> read_npy(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.status();
  return parse_npy(*bytes, path);
}

std::string encode_npy(const Tensor& t) {
  const char* descr = "<f4";
  for (const auto& k : kTypes) {
    if (k.dtype == t.dtype()) descr = k.descr;
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += std::to_string(t.shape()[i]) + (t.rank() == 1 ? "," : (i + 1 < t.rank() ? ", " : ""));
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) { return write_file_atomic(path, encode_npy(t)); }

}  // namespace qd
