// A model as TensorRT (<= 10) and DLA take it: the float graph (a QAT model's Q/DQ pairs removed, its scales carried
// to the tensors between them as qat2ptq does), its INT8 activation scales, the layers kept in float, and the
// prepared copy the DLA rules read. Shared by `inspect --target dla` and `export`.
#pragma once

#include <string>
#include <vector>

#include "backends/dla/dla_placement.h"
#include "build_flags.h"
#include "ir/graph.h"
#include "quant/calib_cache.h"
#include "quant/int8.h"

namespace qd::cli {

struct TrtModel {
  Graph model;      // as imported, without Q/DQ: what a TensorRT <= 10 build reads
  Graph prepared;   // the same, shapes bound (--shapes) and inferred
  bool int8 = false;
  CalibCache cache;                        // every activation scale known, graph order
  Int8Options int8_options;                // the same scales, weight scales (QAT) and exact float node names
  std::vector<std::string> float_nodes;    // kept in float (fp16), graph order
  bool from_qat = false;
};

// --precision fp16|int8 (DLA and TensorRT's INT8 builds run float layers in fp16); with int8, scales from a QAT
// model, --calib-cache and/or --precision-config, and --fp16-layers/--fp32-layers.
Expected<TrtModel> load_trt_model(const std::string& path, const BuildFlags& f);

DlaPlacementOptions dla_options(const TrtModel& m);

}  // namespace qd::cli
