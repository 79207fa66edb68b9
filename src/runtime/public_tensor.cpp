// include/qdeploy/tensor.h
#include "qdeploy/tensor.h"

namespace qdeploy {

size_t data_type_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kUInt8: return 1;
    case DataType::kInt8: return 1;
    case DataType::kUInt16: return 2;
    case DataType::kInt16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kBool: return 1;
    case DataType::kFloat16: return 2;
    case DataType::kFloat64: return 8;
  }
  return 1;
}

const char* data_type_name(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
  }
  return "unknown";
}

int64_t volume(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) {
    if (x < 0) return 0;
    n *= x;
  }
  return n;
}

HostTensor::HostTensor(DataType dtype, Dims shape)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(static_cast<size_t>(volume(shape_)) * data_type_size(dtype)) {}

}  // namespace qdeploy
