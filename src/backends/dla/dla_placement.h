// Where TensorRT would run each node of a model built for Orin's DLA with GPU fallback: DLA or GPU and why, in which
// precision, the DLA/GPU segments and the transitions between them, the DLA subgraph count against the per-core
// limit, and the I/O formats to ask trtexec for. Pure analysis of a prepared graph (shapes bound): no device.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/dla/dla_target.h"

namespace qd {

struct DlaPlacementOptions {
  bool int8 = false;                        // --precision int8 (else fp16)
  std::map<std::string, float> act_scales;  // tensor name -> INT8 scale (a calibration cache, a QAT model's Q/DQ)
  std::set<std::string> float_nodes;        // nodes the build keeps in FP16 (--fp16-layers, a precision config)
};

enum class Device { kDla, kGpu };
const char* device_name(Device d);

struct NodePlacement {
  std::string node, op;
  Device device = Device::kGpu;
  std::string precision;  // "int8", "fp16"
  std::string reason;     // GPU: why not DLA; DLA: notes (fusions; why fp16 in an INT8 build)
  std::string source;     // the rule's source
  int segment = -1;       // index into DlaPlacement::segments
};

struct Segment {
  Device device = Device::kGpu;
  std::vector<int> nodes;  // indices into DlaPlacement::nodes, graph order
};

struct IoFormat {
  std::string tensor;
  std::string format;  // trtexec spelling: "int8:dla_hwc4", "int8:chw32", "fp16:chw16", "fp32:chw"
  std::string why;
};

struct DlaPlacement {
  std::string profile;  // "dla:10"
  std::string tensorrt, dla;
  std::vector<NodePlacement> nodes;  // graph order
  std::vector<Segment> segments;     // in execution order: each a set of nodes of one device with no path that leaves
                                     // it for the other device and comes back
  int dla_subgraphs = 0, dla_subgraph_limit = 0;
  int dla_to_gpu = 0, gpu_to_dla = 0;  // tensors crossing between the devices
  std::vector<IoFormat> inputs, outputs;

  int dla_nodes() const;
  // trtexec's --inputIOFormats=... --outputIOFormats=... for the recommended formats.
  std::string trtexec_io_flags() const;
};

// `g` prepared (shapes bound and inferred).
DlaPlacement place_on_dla(const Graph& g, const DlaTarget& target, const DlaPlacementOptions& opt);

std::string format_dla_placement(const DlaPlacement& p, bool every_node);
std::string dla_placement_json(const DlaPlacement& p);  // pretty-printed JSON
std::string dla_placement_svg(const DlaPlacement& p, const std::string& title);

}  // namespace qd
