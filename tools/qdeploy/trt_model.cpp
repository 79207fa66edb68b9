#include "trt_model.h"

#include <set>

#include "onnx/importer.h"
#include "passes/passes.h"
#include "quant/precision_config.h"
#include "quant/qat2ptq.h"
#include "quant/qdq.h"
#include "runtime/model.h"

namespace qd::cli {

Expected<TrtModel> load_trt_model(const std::string& path, const BuildFlags& f) {
  if (f.precision != "int8" && f.precision != "fp16") {
    return invalid("--precision " + f.precision + ": DLA and TensorRT's reduced-precision builds take fp16 or int8 "
                   "(DLA has no FP32); add --precision int8 (with scales) or --precision fp16");
  }
  if (!f.calib_data.empty()) {
    return invalid("--calib is not taken here: calibrate first (qdeploy calibrate MODEL --data DATA --cache FILE) "
                   "and pass --calib-cache FILE");
  }
  TrtModel m;
  m.int8 = f.precision == "int8";
  Graph g = QD_TRY(import_onnx_file(path));
  Int8Options& o = m.int8_options;
  if (has_qdq(g)) {
    // DLA and TensorRT <= 10 take implicit quantization: the Q/DQ scales, carried to every tensor they determine.
    Qat2Ptq r = QD_TRY(qat_to_ptq(std::move(g), Qat2PtqOptions{}));
    g = std::move(r.model);
    for (const auto& s : r.scales) o.act_scales[s.tensor] = s.scale;
    o.weight_scales = r.weight_scales;
    o.float_nodes = r.fp16_nodes;
    m.from_qat = true;
  }
  if (m.int8) {
    if (!f.calib_cache.empty()) {
      CalibCache c = QD_TRY(read_calib_cache(f.calib_cache));
      Status names = check_cache_names(c, g);
      if (!names.is_ok()) return names.prefix(f.calib_cache);
      m.cache.version = c.version;
      m.cache.algorithm = c.algorithm;
      for (const auto& [name, s] : c.scales) o.act_scales[name] = s;
    }
    if (!f.precision_config.empty()) QD_RETURN_IF_ERROR(apply_precision_config(f.precision_config, g, &o));
    if (o.act_scales.empty()) {
      return invalid("--precision int8 needs activation scales: --calib-cache FILE (from qdeploy calibrate), "
                     "--precision-config FILE.json, or a QAT model (QuantizeLinear/DequantizeLinear)");
    }
    o.float_nodes.insert(o.float_nodes.end(), f.fp32_layers.begin(), f.fp32_layers.end());
    o.float_nodes.insert(o.float_nodes.end(), f.fp16_layers.begin(), f.fp16_layers.end());
  } else if (!f.calib_cache.empty() || !f.precision_config.empty() || !f.fp16_layers.empty() ||
             !f.fp32_layers.empty()) {
    return invalid("--calib-cache, --precision-config and --fp16-layers/--fp32-layers are INT8 options: add "
                   "--precision int8, or drop them");
  }
  o = resolve_float_nodes(g, o);
  // Graph order for the cache and the float list, so that the files read top to bottom like the model.
  std::set<std::string> seen;
  auto add_scale = [&](int v) {
    if (v < 0) return;
    const std::string& name = g.values[v].name;
    auto it = o.act_scales.find(name);
    if (it != o.act_scales.end() && seen.insert(name).second) m.cache.scales.emplace_back(name, it->second);
  };
  for (int v : g.inputs) add_scale(v);
  for (const Node& n : g.nodes) {
    for (int v : n.outputs) add_scale(v);
    if (o.float_node_names.count(n.name)) m.float_nodes.push_back(n.name);
  }
  m.model = g;
  PrepareOptions prep;
  prep.input_shapes = QD_TRY(parse_shape_flags(f.shapes));
  QD_RETURN_IF_ERROR(prepare_graph(g, prep).prefix(path));
  m.prepared = std::move(g);
  return m;
}

DlaPlacementOptions dla_options(const TrtModel& m) {
  DlaPlacementOptions opt;
  opt.int8 = m.int8;
  if (m.int8) {
    opt.act_scales = m.int8_options.act_scales;
    opt.float_nodes = m.int8_options.float_node_names;
  }
  return opt;
}

}  // namespace qd::cli
