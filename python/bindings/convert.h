// Conversions at the Python boundary: statuses to exceptions, numpy arrays to host tensors and back, stream and
// event arguments, and device memory described by __cuda_array_interface__ or DLPack.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "qdeploy/qdeploy.h"

namespace qdpy {

namespace py = pybind11;

// A failed qdeploy::Status on its way to Python (translated into qdeploy.Error's subclass for its code).
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const qdeploy::Status& s) : std::runtime_error(s.message()), code(s.code()) {}
  qdeploy::StatusCode code;
};

inline void check(const qdeploy::Status& s) {
  if (!s) throw StatusError(s);
}
template <typename T>
T take(qdeploy::Expected<T>&& e) {
  if (!e) throw StatusError(e.status());
  return std::move(e).value();
}

// Registers qdeploy.Error and its subclasses and the translator.
void register_errors(py::module_& m);

qdeploy::DataType dtype_from_numpy(const py::dtype& d);
py::dtype numpy_dtype(qdeploy::DataType t);

// A copy of any array-like (C-contiguous, its own dtype when qdeploy has it).
qdeploy::HostTensor to_host(const py::handle& array);
// The tensor as a numpy array that owns it (no copy).
py::array to_numpy(qdeploy::HostTensor&& t);
std::map<std::string, qdeploy::HostTensor> to_host_map(const py::dict& d);

// None -> nullptr (the legacy default stream), an int, or an object with .cuda_stream (PyTorch) / .ptr (CuPy) /
// .handle (qdeploy.Stream).
void* stream_arg(const py::handle& s);
// An int, or an object with .cuda_event (PyTorch) / .ptr (CuPy) / .handle (qdeploy.Event).
void* event_arg(const py::handle& e);

// Device memory given from Python: an int address, or an object exposing __cuda_array_interface__ or __dlpack__.
struct DeviceMemory {
  void* ptr = nullptr;
  bool known = false;  // dtype, shape and device below are known (not a bare address)
  bool cuda = true;
  int device_id = 0;
  qdeploy::DataType dtype = qdeploy::DataType::kFloat32;
  std::vector<int64_t> shape;
};
DeviceMemory device_memory(const py::handle& obj);

// A DLPack capsule ("dltensor") viewing `ptr` (dense, row-major); `owner` stays referenced until the consumer
// releases the capsule. device_type: 1 CPU, 2 CUDA.
py::capsule dlpack_capsule(void* ptr, const std::vector<int64_t>& shape, qdeploy::DataType dtype, int device_type,
                           int device_id, py::object owner);

}  // namespace qdpy
