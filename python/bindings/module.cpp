// qdeploy._native: the public C++ API (include/qdeploy/) for Python. python/qdeploy/__init__.py re-exports it beside
// the PyTorch side, and python/qdeploy/deploy.py adds the keyword-argument conveniences (build(), calibrate() on
// any iterable). Long calls release the GIL; failed statuses raise qdeploy.Error subclasses with the message.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <optional>

#include "convert.h"

namespace qdpy {

void bind_tasks(py::module_& m);  // tasks.cpp: detector, calibration, sensitivity, scoring, devices, sync

namespace {

using qdeploy::Engine;
using qdeploy::ExecutionContext;

// Dims as a Python list with None where the dim is chosen at run time.
py::list dims_list(const qdeploy::Dims& d) {
  py::list l;
  for (int64_t v : d) l.append(v < 0 ? py::object(py::none()) : py::object(py::int_(v)));
  return l;
}

qdeploy::ShapeMap shape_map(const py::dict& d) {
  qdeploy::ShapeMap m;
  for (auto [k, v] : d) m[py::str(k)] = v.cast<qdeploy::Dims>();
  return m;
}

// A context with the Python objects bound to it kept alive (the memory they own must outlive the binding).
struct Context {
  std::unique_ptr<ExecutionContext> ctx;
  Engine engine;
  std::map<std::string, py::object> bound;
  qdeploy::ShapeMap shapes;
};

// The memory a binding needs: dtype and element count, for checking a tensor given to bind().
std::pair<qdeploy::TensorInfo, int64_t> binding(const Context& c, const std::string& name) {
  for (const auto& i : c.engine.inputs()) {
    if (i.name != name) continue;
    auto it = c.shapes.find(name);
    qdeploy::Dims d = it != c.shapes.end() ? it->second : i.shape;
    return {i, qdeploy::volume(d)};
  }
  for (const auto& o : c.ctx->outputs()) {
    if (o.name == name) return {o, qdeploy::volume(o.shape)};
  }
  throw StatusError({qdeploy::StatusCode::kNotFound, "the engine has no input or output named '" + name + "'"});
}

void bind_tensor(Context& c, const std::string& name, const py::object& tensor) {
  DeviceMemory mem = device_memory(tensor);
  if (mem.known) {
    auto [info, count] = binding(c, name);
    if (!mem.cuda) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                         "'" + name + "': bind takes CUDA device memory; host arrays go through upload() or run()"});
    }
    if (mem.dtype != info.dtype) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                         "'" + name + "' is " + qdeploy::data_type_name(info.dtype) + " in this engine, the tensor is " +
                             qdeploy::data_type_name(mem.dtype) + " (BuildOptions.input_formats/output_formats "
                                                                  "choose the bindings' types)"});
    }
    if (count > 0 && qdeploy::volume(mem.shape) != count) {
      throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                         "'" + name + "' holds " + std::to_string(count) + " elements at the current shapes, the " +
                             "tensor " + std::to_string(qdeploy::volume(mem.shape)) +
                             " (call set_input_shapes first)"});
    }
  }
  check(c.ctx->bind(name, mem.ptr));
  c.bound[name] = tensor;
}

// ExternalSync from Python lists: events (objects or addresses) and (semaphore, value) pairs. An event object not
// recorded yet has no CUDA event behind it (torch creates one at the first record()): waiting on it waits for
// nothing, as CUDA waits on a never-recorded event, and to signal it the caller records it through its own record()
// after the run is enqueued (*record_after).
qdeploy::ExternalSync sync_arg(const py::object& wait_events, const py::object& signal_events,
                               const py::object& wait_semaphores, const py::object& signal_semaphores,
                               std::vector<py::object>* record_after) {
  qdeploy::ExternalSync s;
  auto events = [](const py::object& l, std::vector<void*>& out, std::vector<py::object>* lazy) {
    if (l.is_none()) return;
    for (auto e : l) {
      void* h = event_arg(e);
      if (!h && py::hasattr(e, "record")) {
        if (lazy) lazy->push_back(py::reinterpret_borrow<py::object>(e));
        continue;
      }
      out.push_back(h);
    }
  };
  auto sems = [](const py::object& l, std::vector<qdeploy::ExternalSync::Semaphore>& out) {
    if (l.is_none()) return;
    for (auto item : l) {
      py::object sem = py::reinterpret_borrow<py::object>(item);
      uint64_t value = 0;
      if (py::isinstance<py::tuple>(item)) {
        py::tuple t = item.cast<py::tuple>();
        sem = t[0];
        value = t[1].cast<uint64_t>();
      }
      void* h = py::isinstance<qdeploy::ExternalSemaphore>(sem) ? sem.cast<qdeploy::ExternalSemaphore&>().handle()
                                                                 : reinterpret_cast<void*>(sem.cast<uintptr_t>());
      out.push_back({h, value});
    }
  };
  events(wait_events, s.wait_events, nullptr);
  events(signal_events, s.signal_events, record_after);
  sems(wait_semaphores, s.wait_semaphores);
  sems(signal_semaphores, s.signal_semaphores);
  return s;
}

py::dict outputs_dict(const std::vector<qdeploy::TensorInfo>& infos, std::vector<qdeploy::HostTensor>&& out) {
  py::dict d;
  for (size_t i = 0; i < out.size(); ++i) {
    d[py::str(i < infos.size() ? infos[i].name : std::to_string(i))] = to_numpy(std::move(out[i]));
  }
  return d;
}

// A view of a context's own device buffer for frameworks: __cuda_array_interface__ and DLPack, no copy. It keeps the
// context alive; its address changes when the context's shapes do.
struct DeviceTensor {
  py::object owner;
  void* ptr = nullptr;
  qdeploy::TensorInfo info;
  qdeploy::Dims shape;  // memory shape (NHWC bindings permuted)
  int device = 0;
  int device_type = 2;  // DLPack's: 2 CUDA, 1 CPU (memory_view of host memory)
};

void bind_engine(py::module_& m) {
  py::enum_<qdeploy::Device>(m, "Device").value("CPU", qdeploy::Device::kCpu).value("CUDA", qdeploy::Device::kCuda);
  py::enum_<qdeploy::Precision>(m, "Precision")
      .value("FP32", qdeploy::Precision::kFp32)
      .value("FP16", qdeploy::Precision::kFp16)
      .value("INT8", qdeploy::Precision::kInt8);
  py::enum_<qdeploy::Int8Mode>(m, "Int8Mode")
      .value("EXACT", qdeploy::Int8Mode::kExact)
      .value("FAKE", qdeploy::Int8Mode::kFake)
      .value("BIT_EXACT", qdeploy::Int8Mode::kBitExact);
  py::enum_<qdeploy::Layout>(m, "Layout").value("NCHW", qdeploy::Layout::kNCHW).value("NHWC", qdeploy::Layout::kNHWC);
  py::enum_<qdeploy::DataType>(m, "DataType")
      .value("FLOAT32", qdeploy::DataType::kFloat32)
      .value("FLOAT16", qdeploy::DataType::kFloat16)
      .value("INT8", qdeploy::DataType::kInt8)
      .value("UINT8", qdeploy::DataType::kUInt8)
      .value("INT32", qdeploy::DataType::kInt32)
      .value("INT64", qdeploy::DataType::kInt64)
      .value("BOOL", qdeploy::DataType::kBool)
      .value("FLOAT64", qdeploy::DataType::kFloat64)
      .value("INT16", qdeploy::DataType::kInt16)
      .value("UINT16", qdeploy::DataType::kUInt16);

  py::class_<qdeploy::TensorInfo>(m, "TensorInfo")
      .def_readonly("name", &qdeploy::TensorInfo::name)
      .def_readonly("dtype", &qdeploy::TensorInfo::dtype)
      .def_property_readonly("shape", [](const qdeploy::TensorInfo& t) { return dims_list(t.shape); })
      .def_property_readonly("numpy_dtype", [](const qdeploy::TensorInfo& t) { return numpy_dtype(t.dtype); })
      .def_readonly("layout", &qdeploy::TensorInfo::layout)
      .def_readonly("scale", &qdeploy::TensorInfo::scale)
      .def("__repr__", [](const qdeploy::TensorInfo& t) {
        std::string s = "TensorInfo('" + t.name + "', " + qdeploy::data_type_name(t.dtype) + ", [";
        for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
        return s + "])";
      });

  py::class_<qdeploy::IoFormat>(m, "IoFormat")
      .def(py::init([](qdeploy::DataType dtype, qdeploy::Layout layout) { return qdeploy::IoFormat{dtype, layout}; }),
           py::arg("dtype") = qdeploy::DataType::kFloat32, py::arg("layout") = qdeploy::Layout::kNCHW)
      .def_readwrite("dtype", &qdeploy::IoFormat::dtype)
      .def_readwrite("layout", &qdeploy::IoFormat::layout);

  py::class_<qdeploy::BuildOptions>(m, "BuildOptions")
      .def(py::init<>())
      .def_readwrite("device", &qdeploy::BuildOptions::device)
      .def_readwrite("precision", &qdeploy::BuildOptions::precision)
      .def_readwrite("shapes", &qdeploy::BuildOptions::shapes)
      .def_readwrite("min_shapes", &qdeploy::BuildOptions::min_shapes)
      .def_readwrite("opt_shapes", &qdeploy::BuildOptions::opt_shapes)
      .def_readwrite("max_shapes", &qdeploy::BuildOptions::max_shapes)
      .def_readwrite("calib_cache", &qdeploy::BuildOptions::calib_cache)
      .def_readwrite("precision_config", &qdeploy::BuildOptions::precision_config)
      .def_readwrite("int8_mode", &qdeploy::BuildOptions::int8_mode)
      .def_readwrite("fp16_layers", &qdeploy::BuildOptions::fp16_layers)
      .def_readwrite("fp32_layers", &qdeploy::BuildOptions::fp32_layers)
      .def_readwrite("device_index", &qdeploy::BuildOptions::device_index)
      .def_readwrite("timing_cache", &qdeploy::BuildOptions::timing_cache)
      .def_readwrite("input_formats", &qdeploy::BuildOptions::input_formats)
      .def_readwrite("output_formats", &qdeploy::BuildOptions::output_formats)
      .def_property(
          "kernel_policy", [](const qdeploy::BuildOptions& o) { return o.kernel_policy.to_string(); },
          [](qdeploy::BuildOptions& o, const std::string& words) {
            o.kernel_policy = take(qdeploy::KernelPolicy::parse(words));
          },
          "the KernelPolicy as its words (docs/cpp-api.md): '' is the default");

  py::class_<qdeploy::LayerInfo>(m, "LayerInfo")
      .def_readonly("name", &qdeploy::LayerInfo::name)
      .def_readonly("kind", &qdeploy::LayerInfo::kind)
      .def_readonly("kernel", &qdeploy::LayerInfo::kernel)
      .def_readonly("precision", &qdeploy::LayerInfo::precision)
      .def_readonly("in_format", &qdeploy::LayerInfo::in_format)
      .def_readonly("out_format", &qdeploy::LayerInfo::out_format)
      .def_readonly("macs", &qdeploy::LayerInfo::macs)
      .def_readonly("stream", &qdeploy::LayerInfo::stream);
  py::class_<qdeploy::LayerTime>(m, "LayerTime")
      .def_readonly("layer", &qdeploy::LayerTime::layer)
      .def_readonly("ms", &qdeploy::LayerTime::ms);
  py::class_<qdeploy::MemoryReport>(m, "MemoryReport")
      .def_readonly("arena_bytes", &qdeploy::MemoryReport::arena_bytes)
      .def_readonly("activation_bytes", &qdeploy::MemoryReport::activation_bytes)
      .def_readonly("weight_bytes", &qdeploy::MemoryReport::weight_bytes);

  py::class_<DeviceTensor>(m, "DeviceTensor")
      .def_property_readonly("ptr", [](const DeviceTensor& t) { return reinterpret_cast<uintptr_t>(t.ptr); })
      .def_property_readonly("shape", [](const DeviceTensor& t) { return py::tuple(py::cast(t.shape)); })
      .def_property_readonly("dtype", [](const DeviceTensor& t) { return numpy_dtype(t.info.dtype); })
      .def_property_readonly("name", [](const DeviceTensor& t) { return t.info.name; })
      .def_property_readonly("__cuda_array_interface__",
                             [](const DeviceTensor& t) {
                               if (t.device_type != 2) throw py::attribute_error("host memory");
                               py::dict d;
                               d["shape"] = py::tuple(py::cast(t.shape));
                               d["typestr"] = numpy_dtype(t.info.dtype).attr("str");
                               d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(t.ptr), false);
                               d["strides"] = py::none();
                               d["version"] = 3;
                               return d;
                             })
      .def(
          "__dlpack__",
          [](const DeviceTensor& t, py::object stream) {
            return dlpack_capsule(t.ptr, t.shape, t.info.dtype, t.device_type, t.device, t.owner);
          },
          py::arg("stream") = py::none(),
          "A DLPack capsule of the memory. STREAM is not waited on: the consumer orders its reads after the work "
          "that wrote the memory (the stream passed to enqueue, or a synchronize).")
      .def("__dlpack_device__", [](const DeviceTensor& t) { return py::make_tuple(t.device_type, t.device); });

  m.def(
      "memory_view",
      [](uintptr_t ptr, const qdeploy::Dims& shape, const py::object& dtype, bool cuda, int device, py::object owner) {
        DeviceTensor t;
        t.owner = std::move(owner);
        t.ptr = reinterpret_cast<void*>(ptr);
        t.info.dtype = dtype_from_numpy(py::dtype::from_args(dtype));
        t.shape = shape;
        t.device = device;
        t.device_type = cuda ? 2 : 1;
        return t;
      },
      py::arg("ptr"), py::arg("shape"), py::arg("dtype"), py::arg("cuda") = true, py::arg("device") = 0,
      py::arg("owner") = py::none(),
      "A DeviceTensor over raw memory (e.g. ExecutionContext.device_buffer's address) for torch.from_dlpack / "
      "cupy; OWNER is kept alive while a consumer holds the memory.");

  py::class_<Context>(m, "ExecutionContext")
      .def(
          "set_input_shapes",
          [](Context& c, const py::dict& shapes) {
            qdeploy::ShapeMap s = shape_map(shapes);
            check(c.ctx->set_input_shapes(s));
            for (auto& [k, v] : s) c.shapes[k] = v;
          },
          py::arg("shapes"))
      .def("outputs", [](const Context& c) { return c.ctx->outputs(); })
      .def("bind", &bind_tensor, py::arg("name"), py::arg("tensor"),
           "Binds device memory (a torch.cuda tensor, a CuPy array, anything with __cuda_array_interface__ or "
           "__dlpack__, or an int address) to an input or output; the object is kept alive while bound.")
      .def(
          "device_buffer",
          [](const Context& c, const std::string& name) {
            return reinterpret_cast<uintptr_t>(c.ctx->device_buffer(name));
          },
          py::arg("name"))
      .def(
          "device_tensor",
          [](py::object self, const std::string& name) {
            Context& c = self.cast<Context&>();
            auto [info, count] = binding(c, name);
            void* p = c.ctx->device_buffer(name);
            if (!p) {
              throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                                 "'" + name + "' has no context buffer (a CPU engine, or no shapes set yet)"});
            }
            DeviceTensor t;
            t.owner = self;
            t.ptr = p;
            t.info = info;
            auto it = c.shapes.find(name);
            qdeploy::Dims logical = it != c.shapes.end() ? it->second : info.shape;
            for (const auto& o : c.ctx->outputs()) {
              if (o.name == name) logical = o.shape;
            }
            t.shape = logical;
            if (info.layout == qdeploy::Layout::kNHWC && logical.size() == 4) {
              t.shape = {logical[0], logical[2], logical[3], logical[1]};
            }
            t.device = c.engine.options().device_index;
            return t;
          },
          py::arg("name"),
          "A zero-copy view of the context's own buffer for NAME (torch.from_dlpack / cupy.asarray take it).")
      .def(
          "use_cuda_graph", [](Context& c, bool on) { check(c.ctx->use_cuda_graph(on)); }, py::arg("on") = true)
      .def(
          "upload",
          [](Context& c, const py::dict& inputs, const py::object& stream) {
            auto h = to_host_map(inputs);
            void* s = stream_arg(stream);
            py::gil_scoped_release nogil;
            check(c.ctx->upload(h, s));
          },
          py::arg("inputs"), py::arg("stream") = py::none())
      .def(
          "enqueue",
          [](Context& c, const py::object& stream, const py::object& wait_events, const py::object& signal_events,
             const py::object& wait_semaphores, const py::object& signal_semaphores) {
            void* s = stream_arg(stream);
            std::vector<py::object> record_after;
            qdeploy::ExternalSync sync =
                sync_arg(wait_events, signal_events, wait_semaphores, signal_semaphores, &record_after);
            {
              py::gil_scoped_release nogil;
              check(c.ctx->enqueue(s, sync));
            }
            for (const py::object& e : record_after) {
              if (stream.is_none()) e.attr("record")();
              else e.attr("record")(stream);
            }
          },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("wait_events") = py::none(),
          py::arg("signal_events") = py::none(), py::arg("wait_semaphores") = py::none(),
          py::arg("signal_semaphores") = py::none(),
          "Enqueues one run on STREAM; first waits for the events and (semaphore, value) pairs, after it records "
          "and signals the others. An event object not recorded yet (torch creates its CUDA event at the first "
          "record) is skipped among the waits and recorded with its own record(STREAM) among the signals.")
      .def(
          "download",
          [](Context& c, const py::object& stream) {
            void* s = stream_arg(stream);
            std::vector<qdeploy::HostTensor> out;
            {
              py::gil_scoped_release nogil;
              out = take(c.ctx->download(s));
            }
            return outputs_dict(c.ctx->outputs(), std::move(out));
          },
          py::arg("stream") = py::none())
      .def(
          "run",
          [](Context& c, const py::dict& inputs, const py::object& stream) {
            auto h = to_host_map(inputs);
            void* s = stream_arg(stream);
            qdeploy::ShapeMap shapes;
            for (const auto& [k, v] : h) shapes[k] = v.shape();
            std::vector<qdeploy::HostTensor> out;
            {
              py::gil_scoped_release nogil;
              if (shapes != c.shapes) check(c.ctx->set_input_shapes(shapes));
              check(c.ctx->upload(h, s));
              check(c.ctx->enqueue(s));
              out = take(c.ctx->download(s));
            }
            c.shapes = shapes;
            return outputs_dict(c.ctx->outputs(), std::move(out));
          },
          py::arg("inputs"), py::arg("stream") = py::none(),
          "set_input_shapes (when they change), upload, enqueue and download in one call: numpy in, numpy out.")
      .def(
          "profile",
          [](Context& c, int iterations, const py::object& stream) {
            void* s = stream_arg(stream);
            py::gil_scoped_release nogil;
            return take(c.ctx->profile(iterations, s));
          },
          py::arg("iterations") = 20, py::arg("stream") = py::none())
      .def("memory_report", [](const Context& c) { return take(c.ctx->memory_report()); })
      .def("batch_split", [](const Context& c) { return c.ctx->batch_split(); });

  py::class_<Engine>(m, "Engine")
      .def_property_readonly("inputs", &Engine::inputs)
      .def_property_readonly("outputs", &Engine::outputs)
      .def_property_readonly("device", &Engine::device)
      .def_property_readonly("device_name", &Engine::device_name)
      .def("describe", &Engine::describe)
      .def("options", &Engine::options)
      .def("build_shapes", &Engine::build_shapes)
      .def(
          "save", [](const Engine& e, const std::string& path) { check(e.save(path)); }, py::arg("path"))
      .def("create_context",
           [](const Engine& e) {
             Context c{take(e.create_context()), e, {}, {}};
             return c;
           })
      .def(
          "run",
          [](const Engine& e, const py::dict& inputs) {
            auto h = to_host_map(inputs);
            std::vector<qdeploy::HostTensor> out;
            {
              py::gil_scoped_release nogil;
              out = take(e.run(h));
            }
            return outputs_dict(e.outputs(), std::move(out));
          },
          py::arg("inputs"), "Host arrays in (input name -> array), host arrays out (output name -> array).")
      .def(
          "layer_info", [](const Engine& e, const py::dict& shapes) { return take(e.layer_info(shape_map(shapes))); },
          py::arg("shapes"))
      .def(
          "memory_report",
          [](const Engine& e, const py::dict& shapes) { return take(e.memory_report(shape_map(shapes))); },
          py::arg("shapes"));

  m.def(
      "build_engine",
      [](const std::string& model, const qdeploy::BuildOptions& opt) {
        py::gil_scoped_release nogil;
        return take(qdeploy::build(model, opt));
      },
      py::arg("model"), py::arg("options"), "Imports an ONNX model and compiles it (qdeploy.build takes keywords).");
  m.def(
      "load",
      [](const std::string& plan, std::optional<int> device_index) {
        py::gil_scoped_release nogil;
        return take(device_index ? qdeploy::load(plan, *device_index) : qdeploy::load(plan));
      },
      py::arg("plan"), py::arg("device_index") = py::none(),
      "Loads a plan; DEVICE_INDEX runs a GPU plan on that GPU instead of the one it was built on.");
  m.def("is_plan", &qdeploy::is_plan, py::arg("path"));
  m.def("version", &qdeploy::version);
  m.def("has_cuda", &qdeploy::has_cuda);
}

}  // namespace

}  // namespace qdpy

PYBIND11_MODULE(_native, m) {
  m.doc() = "qdeploy's C++ API (include/qdeploy/); use it through `import qdeploy`";
  qdpy::register_errors(m);
  qdpy::bind_engine(m);
  qdpy::bind_tasks(m);
}
