// The build options' INT8 part as quant/ takes it (quant/int8_options.h), so that engines load their INT8 options
// from BuildOptions without quant/ depending on the runtime.
#pragma once

#include "quant/int8_options.h"
#include "runtime/engine.h"

namespace qd {

inline Int8Sources int8_sources(const BuildOptions& opt) {
  Int8Sources s;
  s.mode = opt.int8_mode == "fake" ? Int8Mode::kFake : opt.int8_mode == "dla" ? Int8Mode::kExactDla : Int8Mode::kExact;
  s.calib_cache = opt.calib_cache;
  s.precision_config = opt.precision_config;
  s.float_layers = opt.fp32_layers;
  s.float_layers.insert(s.float_layers.end(), opt.fp16_layers.begin(), opt.fp16_layers.end());
  return s;
}

inline Expected<Int8Options> load_int8_options(Graph& g, const BuildOptions& opt) {
  return load_int8_options(g, int8_sources(opt));
}

}  // namespace qd
