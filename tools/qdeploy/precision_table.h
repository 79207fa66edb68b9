// inspect --precision int8: which Conv/Gemm layers run in INT8 and which stay in float, with their share of the MACs.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "quant/int8.h"

namespace qd::cli {

// The INT8 report of MODEL built with the flags; null when they do not ask for --precision int8.
Expected<std::shared_ptr<const Int8Report>> int8_report_for(const std::string& model, const BuildFlags& f);
void print_precision_table(const Int8Report& r);
nlohmann::json precision_json(const Int8Report& r);

}  // namespace qd::cli
