#include "quant/int8_options.h"

#include "quant/calib_cache.h"
#include "quant/precision_config.h"
#include "quant/qdq.h"

namespace qd {

Expected<Int8Options> load_int8_options(Graph& g, const Int8Sources& opt) {
  Int8Options int8;
  int8.mode = opt.mode;
  if (has_qdq(g)) {
    // Explicit quantization (a QAT model): the scales come from its Q/DQ pairs; a cache may add more.
    QdqScales q = QD_TRY(strip_qdq(g));
    int8.act_scales = q.act_scales;
    int8.act_zero_points = q.act_zero_points;
    int8.weight_scales = q.weight_scales;
  } else if (opt.calib_cache.empty() && opt.precision_config.empty()) {
    return invalid("--precision int8 needs activation scales: --calib-cache FILE (from qdeploy calibrate), "
                   "--precision-config FILE.json (from qdeploy qat2ptq), or a model with "
                   "QuantizeLinear/DequantizeLinear (QAT)");
  }
  if (!opt.calib_cache.empty()) {
    CalibCache cache = QD_TRY(read_calib_cache(opt.calib_cache));
    Status names = check_cache_names(cache, g);
    if (!names.is_ok()) return names.prefix(opt.calib_cache);
    for (const auto& [name, s] : cache.scales) int8.act_scales.emplace(name, s);
  }
  int8.float_nodes = opt.float_layers;
  // Its scales override the cache's; its fp16/fp32 nodes join the float layers.
  if (!opt.precision_config.empty()) QD_RETURN_IF_ERROR(apply_precision_config(opt.precision_config, g, &int8));
  return int8;
}

}  // namespace qd
