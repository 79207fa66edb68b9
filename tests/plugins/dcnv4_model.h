// A one-node DCNv4 model (ONNX, built with the generated protobuf classes) for the plugin tests.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_builder.h"

namespace qd::test {

// value [n, h, w, g*d] and offset_mask [n, h, w, p] -> DCNv4 "dcn" (3x3, pad 1, stride 1) -> y. `extra` adds or
// overrides INT attributes.
inline onnx::ModelProto dcnv4_model(int64_t n, int64_t h, int64_t w, int64_t g, int64_t d, int64_t p,
                                    const std::vector<std::pair<std::string, int64_t>>& extra = {},
                                    int64_t domain_version = 1) {
  onnx::ModelProto m = onnxb::empty_model(17);
  auto* op = m.add_opset_import();
  op->set_domain("ai.qdeploy");
  op->set_version(domain_version);
  auto* gr = m.mutable_graph();
  onnxb::add_input(gr, "value", {n, h, w, g * d});
  onnxb::add_input(gr, "offset_mask", {n, h, w, p});
  auto* node = onnxb::add_node(gr, "DCNv4", {"value", "offset_mask"}, {"y"}, "dcn");
  node->set_domain("ai.qdeploy");
  onnxb::attr_int(node, "group", g);
  onnxb::attr_int(node, "group_channels", d);
  onnxb::attr_float(node, "offset_scale", 1.f);
  for (const auto& [name, v] : extra) {
    bool set = false;
    for (auto& a : *node->mutable_attribute()) {
      if (a.name() == name) {
        a.set_i(v);
        set = true;
      }
    }
    if (!set) onnxb::attr_int(node, name, v);
  }
  onnxb::add_output(gr, "y");
  return m;
}

}  // namespace qd::test
