#include "convert.h"

#include <cstring>

namespace qdpy {

namespace {

// DLPack's ABI (dlpack.h, v0.8; stable since v0.2): declared here to need no header.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

DLDataType to_dl(qdeploy::DataType t) {
  using D = qdeploy::DataType;
  const uint8_t bits = static_cast<uint8_t>(qdeploy::data_type_size(t) * 8);
  switch (t) {
    case D::kFloat32: case D::kFloat16: case D::kFloat64: return {2, bits, 1};
    case D::kUInt8: case D::kUInt16: return {1, bits, 1};
    case D::kBool: return {6, 8, 1};
    default: return {0, bits, 1};
  }
}

qdeploy::DataType from_dl(DLDataType d) {
  using D = qdeploy::DataType;
  if (d.lanes == 1) {
    if (d.code == 2 && d.bits == 32) return D::kFloat32;
    if (d.code == 2 && d.bits == 16) return D::kFloat16;
    if (d.code == 2 && d.bits == 64) return D::kFloat64;
    if (d.code == 0 && d.bits == 8) return D::kInt8;
    if (d.code == 0 && d.bits == 16) return D::kInt16;
    if (d.code == 0 && d.bits == 32) return D::kInt32;
    if (d.code == 0 && d.bits == 64) return D::kInt64;
    if (d.code == 1 && d.bits == 8) return D::kUInt8;
    if (d.code == 1 && d.bits == 16) return D::kUInt16;
    if (d.code == 6 && d.bits == 8) return D::kBool;
  }
  throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                     "DLPack tensor of a dtype qdeploy has no binding for (code " + std::to_string(d.code) +
                         ", " + std::to_string(d.bits) + " bits, " + std::to_string(d.lanes) + " lanes)"});
}

qdeploy::DataType from_typestr(const std::string& s) {
  // __array_interface__ type strings: "<f4", "|i1", ...
  if (s.size() < 3) throw StatusError({qdeploy::StatusCode::kInvalidArgument, "bad typestr '" + s + "'"});
  if (s[0] == '>') {
    throw StatusError({qdeploy::StatusCode::kInvalidArgument, "big-endian device arrays are not supported"});
  }
  return dtype_from_numpy(py::dtype(s));
}

bool is_dense(const std::vector<int64_t>& shape, const int64_t* strides, int64_t elem_bytes, bool strides_in_bytes) {
  if (!strides) return true;
  int64_t expect = strides_in_bytes ? elem_bytes : 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

struct DLPackOwner {
  DLManagedTensor t;
  std::vector<int64_t> shape;
  py::object owner;
};

void dlpack_delete(DLManagedTensor* t) {
  if (!t) return;
  py::gil_scoped_acquire gil;
  delete static_cast<DLPackOwner*>(t->manager_ctx);
}

}  // namespace

void register_errors(py::module_& m) {
  static py::exception<StatusError> error(m, "Error", PyExc_RuntimeError);
  static py::object invalid = py::reinterpret_steal<py::object>(PyErr_NewException(
      "qdeploy._native.InvalidArgumentError", py::make_tuple(error, py::handle(PyExc_ValueError)).ptr(), nullptr));
  static py::object unsupported = py::reinterpret_steal<py::object>(PyErr_NewException(
      "qdeploy._native.UnsupportedError", py::make_tuple(error, py::handle(PyExc_NotImplementedError)).ptr(),
      nullptr));
  static py::object not_found = py::reinterpret_steal<py::object>(PyErr_NewException(
      "qdeploy._native.NotFoundError", py::make_tuple(error, py::handle(PyExc_FileNotFoundError)).ptr(), nullptr));
  m.attr("InvalidArgumentError") = invalid;
  m.attr("UnsupportedError") = unsupported;
  m.attr("NotFoundError") = not_found;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* type = error.ptr();
      if (e.code == qdeploy::StatusCode::kInvalidArgument) type = invalid.ptr();
      if (e.code == qdeploy::StatusCode::kUnsupported) type = unsupported.ptr();
      if (e.code == qdeploy::StatusCode::kNotFound) type = not_found.ptr();
      PyErr_SetString(type, e.what());
    }
  });
}

qdeploy::DataType dtype_from_numpy(const py::dtype& d) {
  using D = qdeploy::DataType;
  const char k = d.kind();
  const auto n = d.itemsize();
  if (k == 'f' && n == 4) return D::kFloat32;
  if (k == 'f' && n == 2) return D::kFloat16;
  if (k == 'f' && n == 8) return D::kFloat64;
  if (k == 'i' && n == 1) return D::kInt8;
  if (k == 'i' && n == 2) return D::kInt16;
  if (k == 'i' && n == 4) return D::kInt32;
  if (k == 'i' && n == 8) return D::kInt64;
  if (k == 'u' && n == 1) return D::kUInt8;
  if (k == 'u' && n == 2) return D::kUInt16;
  if (k == 'b' && n == 1) return D::kBool;
  throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                     "arrays of dtype " + py::str(static_cast<const py::handle&>(d)).cast<std::string>() +
                         " have no qdeploy tensor type"});
}

py::dtype numpy_dtype(qdeploy::DataType t) {
  using D = qdeploy::DataType;
  switch (t) {
    case D::kFloat32: return py::dtype("float32");
    case D::kFloat16: return py::dtype("float16");
    case D::kFloat64: return py::dtype("float64");
    case D::kInt8: return py::dtype("int8");
    case D::kInt16: return py::dtype("int16");
    case D::kInt32: return py::dtype("int32");
    case D::kInt64: return py::dtype("int64");
    case D::kUInt8: return py::dtype("uint8");
    case D::kUInt16: return py::dtype("uint16");
    case D::kBool: return py::dtype("bool");
  }
  return py::dtype("float32");
}

qdeploy::HostTensor to_host(const py::handle& obj) {
  py::object a = py::module_::import("numpy").attr("ascontiguousarray")(obj);
  py::array arr = a.cast<py::array>();
  const qdeploy::DataType t = dtype_from_numpy(arr.dtype());
  qdeploy::Dims dims(arr.shape(), arr.shape() + arr.ndim());
  qdeploy::HostTensor h(t, dims);
  if (h.nbytes() != static_cast<size_t>(arr.nbytes())) {
    throw StatusError({qdeploy::StatusCode::kInvalidArgument, "array of an unsupported shape (a negative dim?)"});
  }
  if (h.nbytes()) std::memcpy(h.data(), arr.data(), h.nbytes());
  return h;
}

py::array to_numpy(qdeploy::HostTensor&& t) {
  auto* owned = new qdeploy::HostTensor(std::move(t));
  py::capsule base(owned, [](void* p) { delete static_cast<qdeploy::HostTensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  return py::array(numpy_dtype(owned->dtype()), shape, owned->data(), base);
}

std::map<std::string, qdeploy::HostTensor> to_host_map(const py::dict& d) {
  std::map<std::string, qdeploy::HostTensor> out;
  for (auto [k, v] : d) out.emplace(py::str(k), to_host(v));
  return out;
}

namespace {

void* address_of(const py::handle& o, std::initializer_list<const char*> attrs, const char* what) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::int_>(o)) return reinterpret_cast<void*>(o.cast<uintptr_t>());
  for (const char* a : attrs) {
    if (py::hasattr(o, a)) return address_of(o.attr(a), {}, what);
  }
  throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                     std::string("expected ") + what + " (an int address, or an object with " +
                         (attrs.size() ? *attrs.begin() : "an address") + "), got " +
                         std::string(py::str(py::type::of(o)))});
}

}  // namespace

void* stream_arg(const py::handle& s) { return address_of(s, {"cuda_stream", "ptr", "handle"}, "a CUDA stream"); }
void* event_arg(const py::handle& e) { return address_of(e, {"cuda_event", "ptr", "handle"}, "a CUDA event"); }

DeviceMemory device_memory(const py::handle& obj) {
  DeviceMemory m;
  if (py::isinstance<py::int_>(obj)) {
    m.ptr = reinterpret_cast<void*>(obj.cast<uintptr_t>());
    return m;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    py::dict cai = obj.attr("__cuda_array_interface__");
    py::tuple data = cai["data"];
    m.ptr = reinterpret_cast<void*>(data[0].cast<uintptr_t>());
    if (data[1].cast<bool>()) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument, "the device array is read-only"});
    }
    for (auto d : cai["shape"].cast<py::tuple>()) m.shape.push_back(d.cast<int64_t>());
    m.dtype = from_typestr(cai["typestr"].cast<std::string>());
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      std::vector<int64_t> st;
      for (auto d : cai["strides"].cast<py::tuple>()) st.push_back(d.cast<int64_t>());
      if (!is_dense(m.shape, st.data(), static_cast<int64_t>(qdeploy::data_type_size(m.dtype)), true)) {
        throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                           "the device array is not contiguous (call .contiguous() or cupy.ascontiguousarray first)"});
      }
    }
    m.known = true;
    return m;
  }
  if (py::hasattr(obj, "__dlpack__")) {
    py::object cap = obj.attr("__dlpack__")();
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    if (!t) throw py::error_already_set();
    const DLTensor& d = t->dl_tensor;
    m.ptr = static_cast<char*>(d.data) + d.byte_offset;
    m.shape.assign(d.shape, d.shape + d.ndim);
    m.dtype = from_dl(d.dtype);
    m.device_id = d.device.device_id;
    m.cuda = d.device.device_type == kDLCUDA || d.device.device_type == kDLCUDAManaged;
    if (!m.cuda && d.device.device_type != kDLCPU && d.device.device_type != kDLCUDAHost) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                         "DLPack tensor on device type " + std::to_string(d.device.device_type) +
                             ": qdeploy binds CUDA device memory"});
    }
    if (!is_dense(m.shape, d.strides, 1, false)) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument, "the DLPack tensor is not contiguous"});
    }
    // The capsule is left unconsumed: its destructor returns it to the producer, and the caller keeps `obj` (which
    // owns the memory) alive for as long as the address is used.
    m.known = true;
    return m;
  }
  throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                     "expected device memory: an int address, or an object with __cuda_array_interface__ or "
                     "__dlpack__ (a torch.cuda tensor, a CuPy array), got " +
                         std::string(py::str(py::type::of(obj)))});
}

py::capsule dlpack_capsule(void* ptr, const std::vector<int64_t>& shape, qdeploy::DataType dtype, int device_type,
                           int device_id, py::object owner) {
  auto* o = new DLPackOwner();
  o->shape = shape;
  o->owner = std::move(owner);
  o->t.dl_tensor.data = ptr;
  o->t.dl_tensor.device = {device_type, device_id};
  o->t.dl_tensor.ndim = static_cast<int32_t>(o->shape.size());
  o->t.dl_tensor.dtype = to_dl(dtype);
  o->t.dl_tensor.shape = o->shape.data();
  o->t.dl_tensor.strides = nullptr;
  o->t.dl_tensor.byte_offset = 0;
  o->t.manager_ctx = o;
  o->t.deleter = dlpack_delete;
  // A capsule a consumer never took ("dltensor", not renamed "used_dltensor") frees the tensor itself.
  return py::capsule(&o->t, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      if (t && t->deleter) t->deleter(t);
    }
  });
}

}  // namespace qdpy
