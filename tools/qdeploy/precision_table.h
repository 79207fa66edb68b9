// inspect --precision int8: which Conv/Gemm/MatMul layers run in INT8 and which stay in float, with their share of the MACs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "quant/int8.h"

namespace qd::cli {

// The table as printed: one row per layer, its precision in words (the precision plan's, or a plan file's layers).
struct PrecisionRow {
  std::string node, op;
  int64_t macs = 0;
  std::string words;
  bool int8 = false;
};
struct PrecisionTable {
  std::vector<PrecisionRow> rows;
  int64_t int8_macs = 0, total_macs = 0;
};
PrecisionTable precision_table(const Int8Report& r);

// The INT8 report of MODEL built with the flags; null when they do not ask for --precision int8.
Expected<std::shared_ptr<const Int8Report>> int8_report_for(const std::string& model, const BuildFlags& f);
void print_precision_table(const PrecisionTable& t);
nlohmann::json precision_json(const PrecisionTable& t);

}  // namespace qd::cli
