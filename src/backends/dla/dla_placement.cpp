#include "backends/dla/dla_placement.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/xml.h"

namespace qd {

const char* device_name(Device d) { return d == Device::kDla ? "DLA" : "GPU"; }

int DlaPlacement::dla_nodes() const {
  int k = 0;
  for (const auto& n : nodes) k += n.device == Device::kDla;
  return k;
}

std::string DlaPlacement::trtexec_io_flags() const {
  auto join = [](const std::vector<IoFormat>& v) {
    std::string s;
    for (const auto& f : v) s += (s.empty() ? "" : ",") + f.format;
    return s;
  };
  return "--inputIOFormats=" + join(inputs) + " --outputIOFormats=" + join(outputs);
}

namespace {

bool data_input(const Graph& g, int v) { return v >= 0 && !g.is_constant(v); }

}  // namespace

DlaPlacement place_on_dla(const Graph& g, const DlaTarget& target, const DlaPlacementOptions& opt) {
  DlaPlacement p;
  const DlaProfile& prof = target.profile();
  p.profile = target.name();
  p.tensorrt = prof.tensorrt;
  p.dla = prof.dla;
  p.dla_subgraph_limit = prof.max_loadables_per_core;

  auto tensor_precision = [&](int v, bool float_node) {
    return opt.int8 && !float_node && opt.act_scales.count(g.values[v].name) ? TensorPrecision::kInt8
                                                                             : TensorPrecision::kFp16;
  };
  std::vector<int> node_of_value(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs) {
      if (o >= 0) node_of_value[o] = static_cast<int>(i);
    }
  }
  for (const Node& n : g.nodes) {
    const bool float_node = opt.float_nodes.count(n.name) != 0;
    NodeFormats f;
    std::string unscaled;
    for (int v : n.inputs) {
      if (!data_input(g, v)) continue;
      f.inputs.push_back(tensor_precision(v, float_node));
      if (f.inputs.back() != TensorPrecision::kInt8 && unscaled.empty()) unscaled = g.values[v].name;
    }
    for (int v : n.outputs) {
      if (v < 0) continue;
      f.outputs.push_back(tensor_precision(v, float_node));
      if (f.outputs.back() != TensorPrecision::kInt8 && unscaled.empty()) unscaled = g.values[v].name;
    }
    const Support s = target.supports(g, n, f);
    NodePlacement np;
    np.node = n.name;
    np.op = op_name(n.op);
    np.device = s.yes ? Device::kDla : Device::kGpu;
    np.precision = unscaled.empty() ? "int8" : "fp16";
    np.reason = s.reason;
    np.source = s.source;
    // INT8 pooling and concatenation on DLA want one scale for their inputs and output (the reference requantizes).
    if (s.yes && unscaled.empty() && opt.int8 &&
        (n.op == OpType::MaxPool || n.op == OpType::AveragePool || n.op == OpType::Concat)) {
      const float out = opt.act_scales.at(g.values[n.outputs[0]].name);
      for (int v : n.inputs) {
        if (!data_input(g, v)) continue;
        const float in = opt.act_scales.at(g.values[v].name);
        if (in != out) {
          char buf[256];
          std::snprintf(buf, sizeof buf, "INT8 scales differ (input %.6g, output %.6g): DLA wants one scale for %s "
                        "inputs and output (qdeploy qat2ptq gives them one)", in, out,
                        n.op == OpType::Concat ? "a concatenation's" : "a pooling's");
          np.reason = np.reason.empty() ? buf : np.reason + "; " + buf;
          break;
        }
      }
    }
    if (opt.int8 && !unscaled.empty() && s.yes) {
      const std::string why = float_node ? "fp16: kept in float (asked)"
                                         : "fp16: tensor '" + unscaled + "' has no INT8 scale (DLA needs one on "
                                                                         "every tensor of an INT8 layer)";
      np.reason = np.reason.empty() ? why : np.reason + "; " + why;
    }
    p.nodes.push_back(std::move(np));
  }

  // Segments: a node's level counts the device changes on the longest path to it, so that two nodes of one device
  // at the same level are never separated by a stretch on the other device.
  std::vector<int> level(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs) {
      if (!data_input(g, v) || node_of_value[v] < 0) continue;
      const int q = node_of_value[v];
      level[i] = std::max(level[i], level[q] + (p.nodes[q].device != p.nodes[i].device));
    }
  }
  std::map<std::pair<int, int>, int> seg_of;  // (level, device) -> segment
  std::vector<std::tuple<int, int, int>> order;  // (level, first node, segment)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto key = std::make_pair(level[i], static_cast<int>(p.nodes[i].device));
    auto it = seg_of.find(key);
    if (it == seg_of.end()) {
      it = seg_of.emplace(key, static_cast<int>(p.segments.size())).first;
      p.segments.push_back({p.nodes[i].device, {}});
      order.emplace_back(level[i], static_cast<int>(i), it->second);
    }
    p.segments[it->second].nodes.push_back(static_cast<int>(i));
  }
  std::sort(order.begin(), order.end());
  std::vector<Segment> sorted;
  for (const auto& [lvl, first, s] : order) sorted.push_back(std::move(p.segments[s]));
  p.segments = std::move(sorted);
  for (size_t s = 0; s < p.segments.size(); ++s) {
    for (int i : p.segments[s].nodes) p.nodes[i].segment = static_cast<int>(s);
    p.dla_subgraphs += p.segments[s].device == Device::kDla;
  }

  // Transitions: each tensor counted once per device that reads it across the boundary.
  std::set<std::pair<int, int>> crossing;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs) {
      if (!data_input(g, v) || node_of_value[v] < 0) continue;
      const Device from = p.nodes[node_of_value[v]].device, to = p.nodes[i].device;
      if (from != to && crossing.emplace(v, static_cast<int>(to)).second) {
        (from == Device::kDla ? p.dla_to_gpu : p.gpu_to_dla)++;
      }
    }
    // A fully connected layer on DLA hands its result back through the GPU reshape TensorRT adds after it.
    if (g.nodes[i].op == OpType::Gemm && p.nodes[i].device == Device::kDla) p.dla_to_gpu++;
  }

  // I/O formats (seed 000's table; seed 001: dla_hwc4 for an INT8 input of <= 4 channels read by a convolution).
  for (int v : g.inputs) {
    const Value& val = g.values[v];
    bool dla = false, all_dla_conv = true;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const auto& ins = g.nodes[i].inputs;
      if (std::find(ins.begin(), ins.end(), v) == ins.end()) continue;
      const bool on_dla = p.nodes[i].device == Device::kDla;
      dla = dla || on_dla;
      all_dla_conv = all_dla_conv && on_dla && g.nodes[i].op == OpType::Conv;
    }
    IoFormat f{val.name, "fp32:chw", "read by the GPU"};
    if (dla) {
      const bool int8 = tensor_precision(v, false) == TensorPrecision::kInt8;
      if (int8 && all_dla_conv && val.shape.size() == 4 && val.shape[1] <= 4) {
        f = {val.name, "int8:dla_hwc4",
             std::to_string(val.shape[1]) + " channels read by a convolution: DLA's image input format, the "
                                            "fastest INT8 input"};
      } else if (int8) {
        f = {val.name, "int8:chw32", "INT8 input of a DLA layer"};
      } else {
        f = {val.name, "fp16:chw16", "FP16 input of a DLA layer"};
      }
    }
    p.inputs.push_back(f);
  }
  for (int v : g.outputs) {
    const Value& val = g.values[v];
    const int q = node_of_value[v];
    IoFormat f{val.name, "fp32:chw", "written by the GPU"};
    if (q >= 0 && p.nodes[q].device == Device::kDla && g.nodes[q].op == OpType::Gemm) {
      f.why = "written by the GPU reshape after the DLA fully connected layer";
    } else if (q >= 0 && p.nodes[q].device == Device::kDla) {
      f = {val.name, "fp16:chw16",
           "written by DLA; FP16 keeps the last layer's precision (int8:chw32 is faster and loses accuracy on a "
           "detection head: seed 001)"};
    }
    p.outputs.push_back(f);
  }
  return p;
}

namespace {

std::string segment_span(const DlaPlacement& p, const Segment& s) {
  const std::string& a = p.nodes[s.nodes.front()].node;
  if (s.nodes.size() == 1) return a;
  return a + " .. " + p.nodes[s.nodes.back()].node;
}

}  // namespace

std::string format_dla_placement(const DlaPlacement& p, bool every_node) {
  std::string o;
  char buf[512];
  o += "DLA placement: " + p.profile + " (" + p.tensorrt + ", " + p.dla + "), GPU fallback on\n";
  const int dla = p.dla_nodes();
  std::snprintf(buf, sizeof buf, "nodes: %zu (%d on DLA, %zu on GPU)\n", p.nodes.size(), dla, p.nodes.size() - dla);
  o += buf;
  std::snprintf(buf, sizeof buf,
                "segments: %zu; DLA subgraphs: %d (limit %d per core%s); transitions: %d DLA->GPU, %d GPU->DLA\n",
                p.segments.size(), p.dla_subgraphs, p.dla_subgraph_limit,
                p.dla_subgraphs > p.dla_subgraph_limit ? ": OVER THE LIMIT, the build fails" : "", p.dla_to_gpu,
                p.gpu_to_dla);
  o += buf;
  for (size_t s = 0; s < p.segments.size(); ++s) {
    const Segment& seg = p.segments[s];
    std::snprintf(buf, sizeof buf, "  #%-3zu %s %4zu node%s  ", s, device_name(seg.device), seg.nodes.size(),
                  seg.nodes.size() == 1 ? " " : "s");
    o += buf + segment_span(p, seg) + "\n";
  }
  bool header = false;
  for (const auto& n : p.nodes) {
    if (n.device != Device::kGpu) continue;
    if (!header) o += "on the GPU, and why:\n";
    header = true;
    std::snprintf(buf, sizeof buf, "  %-44s %-22s ", n.node.c_str(), n.op.c_str());
    o += buf + n.reason + "\n";
  }
  if (every_node) {
    o += "every node (segment, device, precision, notes; source):\n";
    for (const auto& n : p.nodes) {
      std::snprintf(buf, sizeof buf, "  #%-3d %s %-4s %-44s %-22s ", n.segment, device_name(n.device),
                    n.precision.c_str(), n.node.c_str(), n.op.c_str());
      o += buf + n.reason + (n.source.empty() ? "" : "  [" + n.source + "]") + "\n";
    }
  }
  o += "I/O formats: " + p.trtexec_io_flags() + "\n";
  for (const auto& f : p.inputs) o += "  input  " + f.tensor + ": " + f.format + " (" + f.why + ")\n";
  for (const auto& f : p.outputs) o += "  output " + f.tensor + ": " + f.format + " (" + f.why + ")\n";
  return o;
}

std::string dla_placement_json(const DlaPlacement& p) {
  nlohmann::json j;
  j["target"] = p.profile;
  j["tensorrt"] = p.tensorrt;
  j["dla"] = p.dla;
  j["dla_nodes"] = p.dla_nodes();
  j["gpu_nodes"] = static_cast<int>(p.nodes.size()) - p.dla_nodes();
  j["dla_subgraphs"] = p.dla_subgraphs;
  j["dla_subgraph_limit"] = p.dla_subgraph_limit;
  j["transitions"] = {{"dla_to_gpu", p.dla_to_gpu}, {"gpu_to_dla", p.gpu_to_dla}};
  j["nodes"] = nlohmann::json::array();
  for (const auto& n : p.nodes) {
    j["nodes"].push_back({{"name", n.node}, {"op", n.op}, {"device", device_name(n.device)},
                          {"precision", n.precision}, {"reason", n.reason}, {"source", n.source},
                          {"segment", n.segment}});
  }
  j["segments"] = nlohmann::json::array();
  for (const auto& s : p.segments) {
    nlohmann::json names = nlohmann::json::array();
    for (int i : s.nodes) names.push_back(p.nodes[i].node);
    j["segments"].push_back({{"device", device_name(s.device)}, {"nodes", names}});
  }
  for (const auto* list : {&p.inputs, &p.outputs}) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : *list) a.push_back({{"tensor", f.tensor}, {"format", f.format}, {"why", f.why}});
    j[list == &p.inputs ? "input_formats" : "output_formats"] = a;
  }
  j["trtexec_io_flags"] = p.trtexec_io_flags();
  return j.dump(2);
}

namespace {

const char* fill(Device d) { return d == Device::kDla ? "#76b900" : "#6c8ebf"; }

}  // namespace

std::string dla_placement_svg(const DlaPlacement& p, const std::string& title) {
  const double left = 150, width = 900, row_h = 34;
  const double total_w = left + width + 20;
  char buf[512];
  std::string o;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n",
                total_w, 40 + 2 * (row_h + 16) + 40);
  o += buf;
  o += "<title>" + xml_escape(title) + "</title>\n";
  std::snprintf(buf, sizeof buf,
                "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s: %d of %zu nodes on DLA, %d DLA "
                "subgraphs (limit %d), %d+%d transitions</text>\n",
                xml_escape(title).c_str(), p.dla_nodes(), p.nodes.size(), p.dla_subgraphs, p.dla_subgraph_limit,
                p.dla_to_gpu, p.gpu_to_dla);
  o += buf;
  // Row 1: every node in graph order.
  double y = 40;
  o += "<text x=\"10\" y=\"" + std::to_string(y + row_h / 2 + 4) + "\">nodes (graph order)</text>\n";
  const double w = p.nodes.empty() ? width : width / p.nodes.size();
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& n = p.nodes[i];
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"node\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
                  "stroke=\"white\" stroke-width=\"0.3\"><title>",
                  left + i * w, y, w, row_h, fill(n.device));
    o += buf + xml_escape(n.node + " (" + n.op + "): " + device_name(n.device) + " " + n.precision +
                          (n.reason.empty() ? "" : "; " + n.reason)) +
         "</title></rect>\n";
  }
  // Row 2: the segments in execution order, widths by node count.
  y += row_h + 16;
  o += "<text x=\"10\" y=\"" + std::to_string(y + row_h / 2 + 4) + "\">segments (execution)</text>\n";
  double x = left;
  for (size_t s = 0; s < p.segments.size(); ++s) {
    const Segment& seg = p.segments[s];
    const double sw = width * seg.nodes.size() / std::max<size_t>(1, p.nodes.size());
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"segment\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
                  "stroke=\"black\" stroke-width=\"0.8\"><title>",
                  x, y, sw, row_h, fill(seg.device));
    o += buf + xml_escape("#" + std::to_string(s) + " " + device_name(seg.device) + ", " +
                          std::to_string(seg.nodes.size()) + " nodes: " + segment_span(p, seg)) +
         "</title></rect>\n";
    if (sw > 28) {
      std::snprintf(buf, sizeof buf, "<text x=\"%.2f\" y=\"%.0f\" fill=\"white\" text-anchor=\"middle\">%s</text>\n",
                    x + sw / 2, y + row_h / 2 + 4, device_name(seg.device));
      o += buf;
    }
    x += sw;
  }
  y += row_h + 24;
  std::snprintf(buf, sizeof buf,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">DLA"
                "</text><rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%.0f\" "
                "y=\"%.0f\">GPU fallback</text>\n",
                left, y - 11, fill(Device::kDla), left + 20, y, left + 70, y - 11, fill(Device::kGpu), left + 90, y);
  o += buf;
  o += "</svg>\n";
  return o;
}

}  // namespace qd
