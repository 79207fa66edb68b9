#include "onnx/tensor_proto.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace qd {

namespace fs = std::filesystem;

// Largest tensor the importer materializes. A file can declare any dims; memory is only allocated once the data that
// backs them has been found (inline) or checked to exist (external), so this bounds a well-formed but huge model.

Expected<std::string> resolve_external_path(const std::string& model_dir, const std::string& location) {
  if (model_dir.empty()) return invalid("external data is not allowed for a model loaded from memory");
  if (location.empty()) return invalid("external data has no 'location'");
  if (location.find('\0') != std::string::npos) return invalid("external data location contains a NUL byte");
  const fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory()) {
    return invalid("external data path '" + location + "' is absolute; it must be relative to the model's folder");
  }
  for (const auto& part : loc) {
    if (part == "..") {
      return invalid("external data path '" + location + "' contains '..'; it must stay inside the model's folder");
    }
  }
  std::error_code ec;
  const fs::path base = fs::canonical(model_dir, ec);
  if (ec) return invalid("cannot resolve the model's folder '" + model_dir + "'");
  const fs::path full = fs::canonical(base / loc, ec);
  if (ec) {
    return not_found("external data file '" + location + "' not found next to the model (in " + base.string() + ")");
  }
  // Compare whole path components, so that "/models/a" does not count as inside "/models/ab" (and "/" works).
  auto b = base.begin();
  auto f = full.begin();
  for (; b != base.end() && !b->empty(); ++b, ++f) {
    if (f == full.end() || *f != *b) {
      return invalid("external data path '" + location + "' resolves to '" + full.string() +
                     "', outside the model's folder (a symlink escaping it?)");
    }
  }
  if (!fs::is_regular_file(full, ec)) {
    return invalid("external data path '" + location + "' is not a regular file");
  }
  return full.string();
}

namespace {

// Reads `need` bytes of a tensor's external data into `dst` (or only checks that they exist when dst is null).
Status read_external(const onnx::TensorProto& p, const std::string& model_dir, uint64_t need, void* dst) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || kv.value().size() > 20 || *end != '\0' || v < 0 || errno == ERANGE ||
          kv.value().find_first_not_of("0123456789") != std::string::npos) {
        return invalid("external data " + kv.key() + " '" + kv.value() + "' is not a non-negative integer");
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  auto resolved = resolve_external_path(model_dir, location);
  if (!resolved) return resolved.status();
  const std::string& path = *resolved;
  std::error_code ec;
  const uint64_t fsize = fs::file_size(path, ec);
  if (ec) return invalid("cannot read external data file '" + location + "'");
  if (length >= 0 && static_cast<uint64_t>(length) != need) {
    return invalid("external data length " + std::to_string(length) + " disagrees with the tensor's size of " +
                   std::to_string(need) + " bytes");
  }
  if (static_cast<uint64_t>(offset) > fsize || fsize - static_cast<uint64_t>(offset) < need) {
    return invalid("external data file '" + location + "' is " + std::to_string(fsize) + " bytes; offset " +
                   std::to_string(offset) + " + " + std::to_string(need) + " bytes runs past its end");
  }
  if (!dst || need == 0) return Status::ok();
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(static_cast<char*>(dst), static_cast<std::streamsize>(need));
  if (!f) return invalid("error reading external data file '" + location + "'");
  return Status::ok();
}

template <typename Field>
Status check_count(const Field& f, int64_t n, const char* field) {
  if (static_cast<int64_t>(f.size()) == n) return Status::ok();
  if (f.size() == 0) return invalid("no data (dims need " + std::to_string(n) + " values in raw_data or " + field + ")");
  return invalid(std::string(field) + " holds " + std::to_string(f.size()) + " values; the dims need " +
                 std::to_string(n));
}

// The typed field ONNX stores elements of `dt` in (when raw_data is not used).
Status check_typed_count(const onnx::TensorProto& p, DType dt, int64_t n) {
  switch (dt) {
    case DType::kFloat32: return check_count(p.float_data(), n, "float_data");
    case DType::kFloat64: return check_count(p.double_data(), n, "double_data");
    case DType::kInt64: return check_count(p.int64_data(), n, "int64_data");
    case DType::kUInt32:
    case DType::kUInt64: return check_count(p.uint64_data(), n, "uint64_data");
    default: return check_count(p.int32_data(), n, "int32_data");  // int32/16/8, uint16/8, bool, float16 bits
  }
}

}  // namespace

std::string unsupported_type_message(int32_t onnx_type) {
  const std::string name = onnx_type_name(onnx_type);
  std::string why;
  if (onnx_type == onnx::TensorProto::BFLOAT16) why = "; export in float32 or float16";
  else if (onnx_type >= 17 && onnx_type <= 26) why = "; qdeploy quantizes to int8/uint8 (QuantizeLinear with an int8 or uint8 zero point), float8, 4-bit and 2-bit types are not supported";
  else if (onnx_type == onnx::TensorProto::STRING) why = "; qdeploy supports numeric tensors only";
  return "element type " + name + " is not supported" + why;
}

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& model_dir, const std::string& kind) {
  const std::string what = p.name().empty() ? kind + " (unnamed)" : kind + " '" + p.name() + "'";
  auto fail = [&](Status s) { return s.prefix(what); };
  DType dt;
  if (!p.has_data_type() || p.data_type() == onnx::TensorProto::UNDEFINED) {
    return fail(invalid("no element type (data_type is unset)"));
  }
  if (p.data_type() == onnx::TensorProto::STRING) return fail(unsupported("string tensors are not supported"));
  if (!dtype_from_onnx(p.data_type(), &dt)) {
    return fail(unsupported(unsupported_type_message(p.data_type())));
  }
  if (p.dims_size() > 8) return fail(invalid("rank " + std::to_string(p.dims_size()) + " is more than 8"));
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape) {
    if (d < 0) {
      std::string dims;
      for (int64_t x : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(x);
      return fail(invalid("negative dim " + std::to_string(d) + " in dims [" + dims + "]"));
    }
  }
  auto count = checked_numel(shape);
  if (!count) return fail(count.status());
  const int64_t n = *count;
  const uint64_t need = static_cast<uint64_t>(n) * dtype_size(dt);
  if (need > kMaxTensorBytes) {
    return fail(invalid(std::to_string(need) + " bytes (dims " + shape_str(shape) + ") is more than the 8 GiB limit"));
  }
  // Check that the data is there before allocating: dims alone must not make us allocate.
  const bool external = p.data_location() == onnx::TensorProto::EXTERNAL;
  if (external) {
    QD_RETURN_IF_ERROR(fail(read_external(p, model_dir, need, nullptr)));
  } else if (p.has_raw_data()) {
    if (p.raw_data().size() != need) {
      return fail(invalid("raw_data is " + std::to_string(p.raw_data().size()) + " bytes but dims " +
                          shape_str(shape) + " of " + dtype_name(dt) + " need " + std::to_string(need)));
    }
  } else {
    QD_RETURN_IF_ERROR(fail(check_typed_count(p, dt, n)));
  }
  Tensor t(dt, shape);
  if (external) {
    QD_RETURN_IF_ERROR(fail(read_external(p, model_dir, need, t.raw())));
    return t;
  }
  if (p.has_raw_data()) {
    if (need) std::memcpy(t.raw(), p.raw_data().data(), need);
    return t;
  }
  switch (dt) {
    case DType::kFloat32:
      if (need) std::memcpy(t.raw(), p.float_data().data(), need);
      break;
    case DType::kFloat64:
      if (need) std::memcpy(t.raw(), p.double_data().data(), need);
      break;
    case DType::kInt64:
      if (need) std::memcpy(t.raw(), p.int64_data().data(), need);
      break;
    case DType::kUInt64:
      if (need) std::memcpy(t.raw(), p.uint64_data().data(), need);
      break;
    case DType::kUInt32:  // ONNX keeps uint32 in uint64_data
      for (int64_t i = 0; i < n; ++i) t.data<uint32_t>()[i] = static_cast<uint32_t>(p.uint64_data(i));
      break;
    case DType::kFloat16:  // the raw 16-bit patterns, one per int32_data entry
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(i));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool: int32_data (out-of-range values saturate)
      for (int64_t i = 0; i < n; ++i) t.set_f64(i, p.int32_data(i));
      break;
  }
  return t;
}

}  // namespace qd
