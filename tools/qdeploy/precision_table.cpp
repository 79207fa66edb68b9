#include "precision_table.h"

#include <cstdio>

namespace qd::cli {

PrecisionTable precision_table(const Int8Report& r) {
  PrecisionTable t;
  t.int8_macs = r.int8_macs;
  t.total_macs = r.total_macs;
  for (const auto& l : r.layers) {
    t.rows.push_back({l.node, l.op, l.macs, precision_words(l.precision), l.precision.precision == Precision::kInt8});
  }
  return t;
}

Expected<std::shared_ptr<const Int8Report>> int8_report_for(const std::string& model, const BuildFlags& f) {
  auto precision = parse_precision(f.precision);
  if (!precision || *precision != Precision::kInt8) return std::shared_ptr<const Int8Report>();
  auto engine = QD_TRY(build_from_flags(model, f));
  const Int8Report* r = engine->int8_report();
  if (!r) return unsupported("the " + f.device + " engine does not report its INT8 layers");
  return std::make_shared<const Int8Report>(*r);
}

void print_precision_table(const PrecisionTable& t) {
  const double total = t.total_macs > 0 ? static_cast<double>(t.total_macs) : 1.0;
  size_t int8 = 0;
  for (const auto& l : t.rows) int8 += l.int8;
  std::printf("precision per layer (%zu Conv/Gemm/MatMul: %zu int8, %zu float; %.1f%% of MACs in int8):\n",
              t.rows.size(), int8, t.rows.size() - int8, 100.0 * t.int8_macs / total);
  for (const auto& l : t.rows) {
    std::printf("  %-48s %-6s %10.2fM %6.2f%%  %s\n", l.node.c_str(), l.op.c_str(), l.macs / 1e6,
                100.0 * l.macs / total, l.words.c_str());
  }
}

nlohmann::json precision_json(const PrecisionTable& t) {
  nlohmann::json j;
  j["int8_macs"] = t.int8_macs;
  j["total_macs"] = t.total_macs;
  j["layers"] = nlohmann::json::array();
  for (const auto& l : t.rows) {
    j["layers"].push_back({{"name", l.node}, {"op", l.op}, {"macs", l.macs}, {"precision", l.words}});
  }
  return j;
}

}  // namespace qd::cli
