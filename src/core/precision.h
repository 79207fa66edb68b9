// The arithmetic a build runs in (BuildOptions::precision) and a node runs in (quant/precision_plan.h). Words
// ("fp32", "fp16", "int8") exist only where a person or a file reads them: flags, plan files, reports.
#pragma once

#include <string>

#include "core/status.h"

namespace qd {

enum class Precision { kFp32, kFp16, kInt8 };

// "fp32", "fp16" or "int8": the words of --precision and of a plan file's header and build options.
const char* precision_name(Precision p);
// The enum of one of those words; any other word is an error that lists them (the --precision flag's message).
Expected<Precision> parse_precision(const std::string& word);

}  // namespace qd
