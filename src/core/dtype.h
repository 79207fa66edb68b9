// Element types qdeploy tensors can hold, with their ONNX TensorProto codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qd {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,  // never held in a Tensor; kept so the code round-trips
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
};

// Bytes per element; 0 for kUndefined / kString.
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", "int64", ...
// Maps an ONNX TensorProto.DataType code; false when qdeploy cannot hold it.
bool dtype_from_onnx(int32_t code, DType* out);
// An ONNX element type's name (TensorProto.DataType, onnx 1.23: up to int2), for messages about types qdeploy does
// not read: "float8e4m3fn", "int4", "element type code 99".
std::string onnx_type_name(int32_t code);
bool is_float(DType t);
bool is_integer(DType t);

}  // namespace qd
