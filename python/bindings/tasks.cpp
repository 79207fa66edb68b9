// qdeploy._native beyond engines and contexts: the detector, calibration and sensitivity on Python data, scoring,
// and the CUDA helpers of qdeploy/device.h (streams, events, external semaphores).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstring>
#include <exception>

#include "convert.h"

namespace qdpy {

namespace {

// (name, value) pairs in order as a Python dict.
template <typename V>
py::dict pairs_to_dict(const std::vector<std::pair<std::string, V>>& pairs) {
  py::dict d;
  for (const auto& [k, v] : pairs) d[py::str(k)] = v;
  return d;
}

qdeploy::Image image_arg(const py::handle& obj) {
  py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a = py::array_t<uint8_t>::ensure(obj);
  if (!a || a.ndim() != 3 || a.shape(2) != 3) {
    throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                       "an image is a uint8 array [height, width, 3] (RGB, as PIL and qdeploy.read_image give it)"});
  }
  qdeploy::Image im;
  im.height = static_cast<int>(a.shape(0));
  im.width = static_cast<int>(a.shape(1));
  im.rgb.assign(a.data(), a.data() + a.size());
  return im;
}

// Detections of one image as an array [n, 6]: x1, y1, x2, y2, score, class.
py::array detections_array(const std::vector<qdeploy::Detection>& d) {
  py::array_t<float> a({static_cast<py::ssize_t>(d.size()), py::ssize_t{6}});
  auto r = a.mutable_unchecked<2>();
  for (size_t i = 0; i < d.size(); ++i) {
    r(i, 0) = d[i].x1;
    r(i, 1) = d[i].y1;
    r(i, 2) = d[i].x2;
    r(i, 3) = d[i].y2;
    r(i, 4) = d[i].score;
    r(i, 5) = static_cast<float>(d[i].class_id);
  }
  return a;
}

py::list detections_lists(const std::vector<std::vector<qdeploy::Detection>>& all) {
  py::list l;
  for (const auto& d : all) l.append(detections_array(d));
  return l;
}

// A Python batch source (a callable k -> {input name: array}) as the C++ one. Runs with the GIL released around it:
// each call takes the GIL; an exception raised in Python is kept and raised again once the C++ call returns.
struct PySource {
  py::function get;
  int n = 0;
  std::exception_ptr error;

  qdeploy::BatchSource source() {
    qdeploy::BatchSource s;
    s.num_batches = n;
    s.batch = [this](int k) -> qdeploy::Expected<qdeploy::TensorMap> {
      py::gil_scoped_acquire gil;
      try {
        py::object b = get(k);
        return to_host_map(b.cast<py::dict>());
      } catch (...) {
        error = std::current_exception();
        return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument,
                               "the batch source failed on batch " + std::to_string(k));
      }
    };
    return s;
  }
  template <typename T>
  T finish(qdeploy::Expected<T>&& r) {
    if (error) std::rethrow_exception(error);
    return take(std::move(r));
  }
};

}  // namespace

void bind_tasks(py::module_& m) {
  // ---- detection ----
  py::class_<qdeploy::DetectorOptions>(m, "DetectorOptions")
      .def(py::init<>())
      .def_readwrite("conf_threshold", &qdeploy::DetectorOptions::conf_threshold)
      .def_readwrite("iou_threshold", &qdeploy::DetectorOptions::iou_threshold)
      .def_readwrite("max_detections", &qdeploy::DetectorOptions::max_detections)
      .def_readwrite("class_agnostic_nms", &qdeploy::DetectorOptions::class_agnostic_nms)
      .def_readwrite("device_pipeline", &qdeploy::DetectorOptions::device_pipeline);

  py::class_<qdeploy::Letterboxed>(m, "Letterboxed")
      .def_property_readonly("tensor",
                             [](const qdeploy::Letterboxed& l) {
                               qdeploy::HostTensor copy = l.tensor;
                               return to_numpy(std::move(copy));
                             })
      .def_property_readonly("placements", [](const qdeploy::Letterboxed& l) {
        py::list out;
        for (const auto& p : l.placements) {
          py::dict d;
          d["scale"] = p.scale;
          d["pad_x"] = p.pad_x;
          d["pad_y"] = p.pad_y;
          d["width"] = p.width;
          d["height"] = p.height;
          out.append(d);
        }
        return out;
      });

  py::class_<qdeploy::Detector>(m, "Detector")
      .def(py::init([](const qdeploy::Engine& e, const qdeploy::DetectorOptions& o) {
             return take(qdeploy::Detector::create(e, o));
           }),
           py::arg("engine"), py::arg("options") = qdeploy::DetectorOptions())
      .def_property_readonly("num_classes", &qdeploy::Detector::num_classes)
      .def_property_readonly("input_width", &qdeploy::Detector::input_width)
      .def_property_readonly("input_height", &qdeploy::Detector::input_height)
      .def(
          "letterbox",
          [](const qdeploy::Detector& d, const py::list& images) {
            std::vector<qdeploy::Image> ims;
            for (auto i : images) ims.push_back(image_arg(i));
            std::vector<const qdeploy::Image*> ptrs;
            for (const auto& i : ims) ptrs.push_back(&i);
            py::gil_scoped_release nogil;
            return take(d.letterbox(ptrs));
          },
          py::arg("images"), "Images (uint8 [H, W, 3] RGB) into the network input; Letterboxed.tensor is the batch.")
      .def(
          "decode",
          [](const qdeploy::Detector& d, const py::object& outputs, const qdeploy::Letterboxed& batch) {
            std::vector<qdeploy::HostTensor> outs;
            py::object values = py::isinstance<py::dict>(outputs) ? outputs.attr("values")() : outputs;
            for (auto o : values) outs.push_back(to_host(o));
            std::vector<std::vector<qdeploy::Detection>> r;
            {
              py::gil_scoped_release nogil;
              r = take(d.decode(outs, batch));
            }
            return detections_lists(r);
          },
          py::arg("outputs"), py::arg("letterboxed"),
          "Decode + NMS of the engine's outputs (a list in output order, or the dict run() returns); per image an "
          "array [n, 6]: x1, y1, x2, y2, score, class in the image's pixels.")
      .def(
          "detect",
          [](qdeploy::Detector& d, const py::list& images) {
            std::vector<qdeploy::Image> ims;
            for (auto i : images) ims.push_back(image_arg(i));
            std::vector<const qdeploy::Image*> ptrs;
            for (const auto& i : ims) ptrs.push_back(&i);
            std::vector<std::vector<qdeploy::Detection>> r;
            {
              py::gil_scoped_release nogil;
              r = take(d.detect(ptrs));
            }
            return detections_lists(r);
          },
          py::arg("images"));
  m.def(
      "read_image",
      [](const std::string& path) {
        qdeploy::Image im = take(qdeploy::read_image(path));
        qdeploy::HostTensor t(qdeploy::DataType::kUInt8, {im.height, im.width, 3});
        if (!im.rgb.empty()) std::memcpy(t.data(), im.rgb.data(), im.rgb.size());
        return to_numpy(std::move(t));
      },
      py::arg("path"), "A JPEG or PNG file as uint8 [H, W, 3] RGB.");
  m.def("class_name", &qdeploy::class_name, py::arg("class_id"), py::arg("num_classes"));

  // ---- calibration, sensitivity, scoring ----
  py::class_<qdeploy::CalibrationOptions>(m, "CalibrationOptions")
      .def(py::init<>())
      .def_readwrite("algo", &qdeploy::CalibrationOptions::algo)
      .def_readwrite("percentile", &qdeploy::CalibrationOptions::percentile)
      .def_readwrite("bins", &qdeploy::CalibrationOptions::bins)
      .def_readwrite("float_head", &qdeploy::CalibrationOptions::float_head)
      .def_readwrite("held_out_batches", &qdeploy::CalibrationOptions::held_out_batches);
  py::class_<qdeploy::Calibration>(m, "Calibration")
      .def_readonly("algorithm", &qdeploy::Calibration::algorithm)
      .def_property_readonly("scales", [](const qdeploy::Calibration& c) { return pairs_to_dict(c.scales); })
      .def_readonly("float_head", &qdeploy::Calibration::float_head)
      .def_property_readonly("auto_model_snr_db",
                             [](const qdeploy::Calibration& c) { return pairs_to_dict(c.auto_model_snr_db); })
      .def_readonly("auto_kept", &qdeploy::Calibration::auto_kept)
      .def(
          "save", [](const qdeploy::Calibration& c, const std::string& path) { check(c.save(path)); },
          py::arg("path"), "Writes the TensorRT-format calibration cache (BuildOptions.calib_cache reads it).")
      .def("to_string", &qdeploy::Calibration::to_string);
  m.def(
      "calibrate_batches",
      [](const std::string& model, int num_batches, py::function get, const qdeploy::CalibrationOptions& opt) {
        PySource src{std::move(get), num_batches, nullptr};
        qdeploy::BatchSource s = src.source();
        qdeploy::Expected<qdeploy::Calibration> r = qdeploy::Status();
        {
          py::gil_scoped_release nogil;
          r = qdeploy::calibrate(model, s, opt);
        }
        return src.finish(std::move(r));
      },
      py::arg("model"), py::arg("num_batches"), py::arg("batch"), py::arg("options") = qdeploy::CalibrationOptions(),
      "Calibrates MODEL on batch(k) -> {input name: array} for k < num_batches (qdeploy.calibrate takes iterables).");

  py::class_<qdeploy::SensitivityOptions>(m, "SensitivityOptions")
      .def(py::init<>())
      .def_readwrite("calib_cache", &qdeploy::SensitivityOptions::calib_cache)
      .def_readwrite("exact", &qdeploy::SensitivityOptions::exact)
      .def_readwrite("sweep_float", &qdeploy::SensitivityOptions::sweep_float)
      .def_readwrite("sweep_int8", &qdeploy::SensitivityOptions::sweep_int8)
      .def_readwrite("only_layers", &qdeploy::SensitivityOptions::only_layers);
  py::class_<qdeploy::LayerSensitivity>(m, "LayerSensitivity")
      .def_readonly("name", &qdeploy::LayerSensitivity::name)
      .def_readonly("op", &qdeploy::LayerSensitivity::op)
      .def_readonly("macs", &qdeploy::LayerSensitivity::macs)
      .def_readonly("snr_float", &qdeploy::LayerSensitivity::snr_float)
      .def_readonly("snr_int8", &qdeploy::LayerSensitivity::snr_int8);
  py::class_<qdeploy::SensitivityReport>(m, "SensitivityReport")
      .def_readonly("all_int8_snr", &qdeploy::SensitivityReport::all_int8_snr)
      .def_readonly("layers", &qdeploy::SensitivityReport::layers)
      .def_readonly("ranking", &qdeploy::SensitivityReport::ranking);
  m.def(
      "sensitivity_batches",
      [](const std::string& model, int num_batches, py::function get, const qdeploy::SensitivityOptions& opt) {
        PySource src{std::move(get), num_batches, nullptr};
        qdeploy::BatchSource s = src.source();
        qdeploy::Expected<qdeploy::SensitivityReport> r = qdeploy::Status();
        {
          py::gil_scoped_release nogil;
          r = qdeploy::sensitivity(model, s, opt);
        }
        return src.finish(std::move(r));
      },
      py::arg("model"), py::arg("num_batches"), py::arg("batch"), py::arg("options") = qdeploy::SensitivityOptions());

  py::class_<qdeploy::TopK>(m, "TopK")
      .def_readonly("count", &qdeploy::TopK::count)
      .def_readonly("correct1", &qdeploy::TopK::correct1)
      .def_readonly("correct5", &qdeploy::TopK::correct5)
      .def_property_readonly("top1", &qdeploy::TopK::top1)
      .def_property_readonly("top5", &qdeploy::TopK::top5);
  m.def(
      "top_k",
      [](const py::object& logits, const std::vector<int>& labels) {
        return take(qdeploy::top_k(to_host(py::module_::import("numpy").attr("asarray")(logits, "float32")), labels));
      },
      py::arg("logits"), py::arg("labels"), "Top-1/top-5 of logits [N, classes] against N labels.");
  m.def(
      "coco_eval",
      [](const std::string& annotations, const py::object& detections) {
        py::array_t<double, py::array::c_style | py::array::forcecast> a = py::array_t<double>::ensure(detections);
        if (!a || (a.size() && (a.ndim() != 2 || a.shape(1) != 7))) {
          throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                             "detections are an array [n, 7]: image_id, category_id, x, y, w, h, score"});
        }
        std::vector<qdeploy::CocoBox> boxes;
        for (py::ssize_t i = 0; a.size() && i < a.shape(0); ++i) {
          qdeploy::CocoBox b;
          b.image_id = static_cast<int64_t>(a.at(i, 0));
          b.category_id = static_cast<int64_t>(a.at(i, 1));
          b.x = static_cast<float>(a.at(i, 2));
          b.y = static_cast<float>(a.at(i, 3));
          b.w = static_cast<float>(a.at(i, 4));
          b.h = static_cast<float>(a.at(i, 5));
          b.score = static_cast<float>(a.at(i, 6));
          boxes.push_back(b);
        }
        qdeploy::CocoStats s;
        {
          py::gil_scoped_release nogil;
          s = take(qdeploy::coco_eval(annotations, boxes));
        }
        py::dict d;
        for (size_t i = 0; i < s.names.size(); ++i) d[py::str(s.names[i])] = s.values[i];
        return d;
      },
      py::arg("annotations"), py::arg("detections"),
      "COCO box AP/AR (pycocotools' twelve numbers) of detections [n, 7] against an instances JSON file.");

  m.def(
      "coco_eval_detections",
      [](const std::string& annotations, const std::vector<int64_t>& image_ids, const py::list& detections,
         int num_classes, const std::string& class_map) {
        std::vector<std::vector<qdeploy::Detection>> dets;
        for (auto item : detections) {
          py::array_t<float, py::array::c_style | py::array::forcecast> a = py::array_t<float>::ensure(item);
          if (!a || (a.size() && (a.ndim() != 2 || a.shape(1) != 6))) {
            throw StatusError({qdeploy::StatusCode::kInvalidArgument,
                               "each image's detections are an array [n, 6]: x1, y1, x2, y2, score, class"});
          }
          std::vector<qdeploy::Detection> d;
          for (py::ssize_t i = 0; a.size() && i < a.shape(0); ++i) {
            d.push_back({a.at(i, 0), a.at(i, 1), a.at(i, 2), a.at(i, 3), a.at(i, 4), static_cast<int>(a.at(i, 5))});
          }
          dets.push_back(std::move(d));
        }
        qdeploy::CocoStats s;
        {
          py::gil_scoped_release nogil;
          s = take(qdeploy::coco_eval(annotations, image_ids, dets, num_classes, class_map));
        }
        py::dict out;
        for (size_t i = 0; i < s.names.size(); ++i) out[py::str(s.names[i])] = s.values[i];
        return out;
      },
      py::arg("annotations"), py::arg("image_ids"), py::arg("detections"), py::arg("num_classes"),
      py::arg("class_map") = "sorted",
      "COCO box AP/AR of a detector's per-image arrays [n, 6] (Detector.detect's), the model's classes mapped to "
      "category ids as `qdeploy eval --class-map` does: sorted, coco80 or identity.");

  // ---- CUDA helpers ----
  py::class_<qdeploy::Stream>(m, "Stream")
      .def_static("create", [] { return take(qdeploy::Stream::create()); })
      .def_property_readonly("handle", [](const qdeploy::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); })
      .def("synchronize", [](const qdeploy::Stream& s) {
        py::gil_scoped_release nogil;
        check(s.synchronize());
      });
  py::class_<qdeploy::Event>(m, "Event")
      .def_static(
          "create", [](bool timing) { return take(qdeploy::Event::create(timing)); }, py::arg("timing") = true)
      .def_property_readonly("handle", [](const qdeploy::Event& e) { return reinterpret_cast<uintptr_t>(e.handle()); })
      .def(
          "record", [](const qdeploy::Event& e, const py::object& s) { check(e.record(stream_arg(s))); },
          py::arg("stream") = py::none())
      .def("synchronize",
           [](const qdeploy::Event& e) {
             py::gil_scoped_release nogil;
             check(e.synchronize());
           })
      .def(
          "wait_on", [](const qdeploy::Event& e, const py::object& s) { check(e.wait_on(stream_arg(s))); },
          py::arg("stream"));
  py::enum_<qdeploy::SemaphoreType>(m, "SemaphoreType")
      .value("OPAQUE_FD", qdeploy::SemaphoreType::kOpaqueFd)
      .value("TIMELINE_FD", qdeploy::SemaphoreType::kTimelineFd);
  py::class_<qdeploy::ExternalSemaphore>(m, "ExternalSemaphore")
      .def_static(
          "import_fd",
          [](int fd, qdeploy::SemaphoreType type) { return take(qdeploy::ExternalSemaphore::import_fd(fd, type)); },
          py::arg("fd"), py::arg("type") = qdeploy::SemaphoreType::kTimelineFd,
          "Imports a semaphore exported as a file descriptor; CUDA owns the descriptor once this succeeds.")
      .def_property_readonly("handle",
                             [](const qdeploy::ExternalSemaphore& s) { return reinterpret_cast<uintptr_t>(s.handle()); })
      .def_property_readonly("type", &qdeploy::ExternalSemaphore::type)
      .def(
          "wait",
          [](const qdeploy::ExternalSemaphore& s, uint64_t value, const py::object& stream) {
            qdeploy::ExternalSync sync;
            sync.wait_semaphores.push_back({s.handle(), value});
            check(qdeploy::enqueue_waits(sync, stream_arg(stream)));
          },
          py::arg("value") = 0, py::arg("stream") = py::none(), "STREAM waits until the semaphore reaches VALUE.")
      .def(
          "signal",
          [](const qdeploy::ExternalSemaphore& s, uint64_t value, const py::object& stream) {
            qdeploy::ExternalSync sync;
            sync.signal_semaphores.push_back({s.handle(), value});
            check(qdeploy::enqueue_signals(sync, stream_arg(stream)));
          },
          py::arg("value") = 0, py::arg("stream") = py::none(),
          "Sets the semaphore to VALUE once STREAM's work so far is done.");
}

}  // namespace qdpy
