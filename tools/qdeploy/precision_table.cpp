#include "precision_table.h"

#include <cstdio>

namespace qd::cli {

Expected<std::shared_ptr<const Int8Report>> int8_report_for(const std::string& model, const BuildFlags& f) {
  if (f.precision != "int8") return std::shared_ptr<const Int8Report>();
  auto engine = QD_TRY(build_from_flags(model, f));
  const Int8Report* r = engine->int8_report();
  if (!r) return unsupported("the " + f.device + " engine does not report its INT8 layers");
  return std::make_shared<const Int8Report>(*r);
}

void print_precision_table(const Int8Report& r) {
  const double total = r.total_macs > 0 ? static_cast<double>(r.total_macs) : 1.0;
  std::printf("precision per layer (%zu Conv/Gemm: %zu int8, %zu float; %.1f%% of MACs in int8):\n", r.layers.size(),
              r.int8_nodes.size(), r.layers.size() - r.int8_nodes.size(), 100.0 * r.int8_macs / total);
  for (const auto& l : r.layers) {
    std::printf("  %-48s %-6s %10.2fM %6.2f%%  %s\n", l.node.c_str(), l.op.c_str(), l.macs / 1e6,
                100.0 * l.macs / total, l.precision.c_str());
  }
}

nlohmann::json precision_json(const Int8Report& r) {
  nlohmann::json j;
  j["int8_macs"] = r.int8_macs;
  j["total_macs"] = r.total_macs;
  j["layers"] = nlohmann::json::array();
  for (const auto& l : r.layers) {
    j["layers"].push_back({{"name", l.node}, {"op", l.op}, {"macs", l.macs}, {"precision", l.precision}});
  }
  return j;
}

}  // namespace qd::cli
