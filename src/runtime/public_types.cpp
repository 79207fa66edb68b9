#include "runtime/public_types.h"

#include <cstring>

#include "core/shape.h"
#include "runtime/io_format.h"

namespace qd {

qdeploy::Status to_public(const Status& s) {
  if (s.is_ok()) return {};
  return {static_cast<qdeploy::StatusCode>(static_cast<int>(s.code())), s.to_string()};
}

Status from_public(const qdeploy::Status& s) {
  if (s.is_ok()) return Status::ok();
  return {static_cast<StatusCode>(static_cast<int>(s.code())), s.message()};
}

qdeploy::HostTensor to_public(const Tensor& t) {
  qdeploy::HostTensor h(static_cast<qdeploy::DataType>(t.dtype()), t.shape());
  if (t.nbytes()) std::memcpy(h.data(), t.raw(), t.nbytes());
  return h;
}

Expected<Tensor> from_public(const qdeploy::HostTensor& t) {
  const auto dt = static_cast<DType>(t.dtype());
  if (dtype_size(dt) != qdeploy::data_type_size(t.dtype())) {
    return invalid(std::string("host tensor of an unknown data type (") + qdeploy::data_type_name(t.dtype()) + ")");
  }
  Tensor x(dt, t.shape());
  if (x.nbytes() != t.nbytes()) return invalid("host tensor of " + shape_str(t.shape()) + " with another byte count");
  if (t.nbytes()) std::memcpy(x.raw(), t.data(), t.nbytes());
  return x;
}

Expected<std::map<std::string, Tensor>> from_public(const std::map<std::string, qdeploy::HostTensor>& ts) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : ts) {
    auto x = from_public(t);
    if (!x) return std::move(x).take_status().prefix("input '" + name + "'");
    out.emplace(name, std::move(*x));
  }
  return out;
}

qdeploy::TensorInfo to_public(const TensorDesc& d) {
  qdeploy::TensorInfo i;
  i.name = d.name;
  i.dtype = static_cast<qdeploy::DataType>(d.dtype);
  i.shape = d.shape;
  i.layout = d.layout == TensorLayout::kNHWC ? qdeploy::Layout::kNHWC : qdeploy::Layout::kNCHW;
  i.scale = d.scale;
  return i;
}

namespace {

std::string format_word(const qdeploy::IoFormat& f) {
  IoFormat g;
  g.dtype = static_cast<DType>(f.dtype);
  g.layout = f.layout == qdeploy::Layout::kNHWC ? TensorLayout::kNHWC : TensorLayout::kNCHW;
  return io_format_str(g);
}

}  // namespace

BuildOptions from_public(const qdeploy::BuildOptions& o) {
  BuildOptions b;
  b.device = o.device == qdeploy::Device::kCuda ? "cuda" : "cpu";
  b.precision = o.precision == qdeploy::Precision::kInt8   ? Precision::kInt8
                : o.precision == qdeploy::Precision::kFp16 ? Precision::kFp16
                                                           : Precision::kFp32;
  b.shapes = o.shapes;
  b.min_shapes = o.min_shapes;
  b.opt_shapes = o.opt_shapes;
  b.max_shapes = o.max_shapes;
  b.calib_cache = o.calib_cache;
  b.precision_config = o.precision_config;
  b.int8_mode = o.int8_mode == qdeploy::Int8Mode::kFake       ? "fake"
                : o.int8_mode == qdeploy::Int8Mode::kBitExact ? "bitexact"
                                                              : "exact";
  b.fp16_layers = o.fp16_layers;
  b.fp32_layers = o.fp32_layers;
  b.device_index = o.device_index;
  b.timing_cache = o.timing_cache;
  for (auto s : o.tactic_sources) b.tactic_sources.push_back(s == qdeploy::TacticSource::kCudnn ? "cudnn" : "qdeploy");
  for (const auto& f : o.input_formats) b.input_formats.push_back(format_word(f));
  for (const auto& f : o.output_formats) b.output_formats.push_back(format_word(f));
  b.kernel_policy = o.kernel_policy;
  return b;
}

Expected<qdeploy::BuildOptions> to_public(const BuildOptions& b) {
  qdeploy::BuildOptions o;
  o.device = b.device == "cuda" ? qdeploy::Device::kCuda : qdeploy::Device::kCpu;
  o.precision = b.precision == Precision::kInt8   ? qdeploy::Precision::kInt8
                : b.precision == Precision::kFp16 ? qdeploy::Precision::kFp16
                                                  : qdeploy::Precision::kFp32;
  o.shapes = b.shapes;
  o.min_shapes = b.min_shapes;
  o.opt_shapes = b.opt_shapes;
  o.max_shapes = b.max_shapes;
  o.calib_cache = b.calib_cache;
  o.precision_config = b.precision_config;
  o.int8_mode = b.int8_mode == "fake"       ? qdeploy::Int8Mode::kFake
                : b.int8_mode == "bitexact" ? qdeploy::Int8Mode::kBitExact
                                            : qdeploy::Int8Mode::kExact;
  o.fp16_layers = b.fp16_layers;
  o.fp32_layers = b.fp32_layers;
  o.device_index = b.device_index;
  o.timing_cache = b.timing_cache;
  for (const auto& s : b.tactic_sources) {
    o.tactic_sources.push_back(s == "cudnn" ? qdeploy::TacticSource::kCudnn : qdeploy::TacticSource::kQdeploy);
  }
  for (const auto* specs : {&b.input_formats, &b.output_formats}) {
    for (const auto& s : *specs) {
      const IoFormat f = QD_TRY(parse_io_format(s));
      qdeploy::IoFormat p;
      p.dtype = static_cast<qdeploy::DataType>(f.dtype);
      p.layout = f.layout == TensorLayout::kNHWC ? qdeploy::Layout::kNHWC : qdeploy::Layout::kNCHW;
      (specs == &b.input_formats ? o.input_formats : o.output_formats).push_back(p);
    }
  }
  o.kernel_policy = b.kernel_policy;
  return o;
}

}  // namespace qd
