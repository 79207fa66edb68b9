#include "core/dtype.h"

namespace qd {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kUInt16: return 2;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    default: return "undefined";
  }
}

bool dtype_from_onnx(int32_t code, DType* out) {
  if (code < 1 || code > 13 || code == 8) return false;
  *out = static_cast<DType>(code);
  return true;
}

std::string onnx_type_name(int32_t code) {
  static const char* const kNames[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                       "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                       "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                       "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2"};
  if (code >= 0 && code < static_cast<int32_t>(sizeof kNames / sizeof kNames[0])) return kNames[code];
  return "element type code " + std::to_string(code);
}

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64; }

bool is_integer(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
    case DType::kInt32: case DType::kInt64: case DType::kUInt32: case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

}  // namespace qd
