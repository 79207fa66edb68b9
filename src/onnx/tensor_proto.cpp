#include "onnx/tensor_proto.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace qd {

namespace fs = std::filesystem;

Expected<std::string> resolve_external_path(const std::string& model_dir, const std::string& location) {
  if (model_dir.empty()) return invalid("external data is not allowed for a model loaded from memory");
  if (location.empty()) return invalid("external data has an empty location");
  if (location.find('\0') != std::string::npos) return invalid("external data location contains a NUL byte");
  const fs::path loc(location);
  if (loc.is_absolute()) {
    return invalid("external data path '" + location + "' is absolute; it must be relative to the model's folder");
  }
  for (const auto& part : loc) {
    if (part == "..") {
      return invalid("external data path '" + location + "' contains '..'; it must stay inside the model's folder");
    }
  }
  std::error_code ec;
  const fs::path base = fs::canonical(model_dir.empty() ? "." : model_dir, ec);
  if (ec) return invalid("cannot resolve the model's folder '" + model_dir + "'");
  const fs::path full = fs::canonical(base / loc, ec);
  if (ec) return not_found("external data file '" + location + "' not found next to the model (in " + base.string() + ")");
  const std::string b = base.string() + "/";
  if (full.string().compare(0, b.size(), b) != 0) {
    return invalid("external data path '" + location + "' resolves to '" + full.string() +
                   "', outside the model's folder (a symlink escaping it?)");
  }
  return full.string();
}

namespace {

Expected<std::string> read_external(const onnx::TensorProto& p, const std::string& model_dir, size_t need) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    char* end = nullptr;
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      errno = 0;
      const long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end != '\0' || v < 0 || errno == ERANGE) {
        return invalid("external data " + kv.key() + " '" + kv.value() + "' is not a non-negative integer");
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  const std::string path = QD_TRY(resolve_external_path(model_dir, location));
  std::error_code ec;
  const uint64_t fsize = fs::file_size(path, ec);
  if (ec) return invalid("cannot read external data file '" + location + "'");
  if (length >= 0 && static_cast<uint64_t>(length) != need) {
    return invalid("external data length " + std::to_string(length) + " disagrees with the tensor's size " +
                   std::to_string(need) + " bytes");
  }
  if (static_cast<uint64_t>(offset) > fsize || fsize - offset < need) {
    return invalid("external data '" + location + "' is " + std::to_string(fsize) + " bytes; offset " +
                   std::to_string(offset) + " + " + std::to_string(need) + " bytes runs past its end");
  }
  std::ifstream f(path, std::ios::binary);
  std::string out(need, '\0');
  f.seekg(offset);
  f.read(out.data(), static_cast<std::streamsize>(need));
  if (!f) return invalid("error reading external data '" + location + "'");
  return out;
}

template <typename Field>
Status check_count(const Field& f, int64_t n, const char* field) {
  if (static_cast<int64_t>(f.size()) != n) {
    return invalid(std::string(field) + " holds " + std::to_string(f.size()) + " values; the dims need " +
                   std::to_string(n));
  }
  return Status::ok();
}

}  // namespace

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& model_dir) {
  const std::string what = "initializer '" + p.name() + "'";
  auto fail = [&](Status s) { return s.prefix(what); };
  DType dt;
  if (p.data_type() == onnx::TensorProto::STRING) return fail(unsupported("string tensors are not supported"));
  if (!dtype_from_onnx(p.data_type(), &dt)) {
    return fail(unsupported("element type code " + std::to_string(p.data_type()) + " is not supported"));
  }
  if (p.dims_size() > 8) return fail(invalid("rank " + std::to_string(p.dims_size()) + " exceeds 8"));
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return fail(invalid("negative dim " + std::to_string(d) + " in " + shape_str(shape)));
  }
  auto count = checked_numel(shape);
  if (!count) return fail(count.status());
  const int64_t n = *count;
  const size_t es = dtype_size(dt);
  const size_t need = static_cast<size_t>(n) * es;
  if (need > (size_t{8} << 30)) return fail(invalid("is larger than 8 GiB"));
  Tensor t(dt, shape);
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    auto bytes = read_external(p, model_dir, need);
    if (!bytes) return fail(bytes.status());
    std::memcpy(t.raw(), bytes->data(), need);
    return t;
  }
  if (p.has_raw_data()) {
    if (p.raw_data().size() != need) {
      return fail(invalid("raw_data is " + std::to_string(p.raw_data().size()) + " bytes but dims " +
                          shape_str(shape) + " of " + dtype_name(dt) + " need " + std::to_string(need)));
    }
    std::memcpy(t.raw(), p.raw_data().data(), need);
    return t;
  }
  Status st;
  switch (dt) {
    case DType::kFloat32:
      st = check_count(p.float_data(), n, "float_data");
      if (st.is_ok()) std::memcpy(t.raw(), p.float_data().data(), need);
      break;
    case DType::kFloat64:
      st = check_count(p.double_data(), n, "double_data");
      if (st.is_ok()) std::memcpy(t.raw(), p.double_data().data(), need);
      break;
    case DType::kInt64:
      st = check_count(p.int64_data(), n, "int64_data");
      if (st.is_ok()) std::memcpy(t.raw(), p.int64_data().data(), need);
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      st = check_count(p.uint64_data(), n, "uint64_data");
      for (int64_t i = 0; st.is_ok() && i < n; ++i) t.set_f64(i, static_cast<double>(p.uint64_data(i)));
      if (st.is_ok() && dt == DType::kUInt64) std::memcpy(t.raw(), p.uint64_data().data(), need);
      break;
    case DType::kFloat16:  // stored as the raw 16-bit patterns in int32_data
      st = check_count(p.int32_data(), n, "int32_data");
      for (int64_t i = 0; st.is_ok() && i < n; ++i) t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(i));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool: int32_data
      st = check_count(p.int32_data(), n, "int32_data");
      for (int64_t i = 0; st.is_ok() && i < n; ++i) t.set_f64(i, p.int32_data(i));
      break;
  }
  if (!st.is_ok()) return fail(st);
  return t;
}

}  // namespace qd
