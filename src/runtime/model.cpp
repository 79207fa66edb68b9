#include "runtime/model.h"

#include "onnx/importer.h"
#include "passes/passes.h"

namespace qd {

Expected<std::map<std::string, Shape>> parse_shape_flags(const std::vector<std::string>& flags) {
  std::map<std::string, Shape> out;
  for (const auto& f : flags) {
    const size_t colon = f.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return invalid("bad --shapes value '" + f + "'; write NAME:1x3x640x640");
    }
    auto s = parse_shape(f.substr(colon + 1));
    if (!s) return Status(s.status()).prefix("--shapes " + f);
    out[f.substr(0, colon)] = *s;
  }
  return out;
}

Expected<Graph> load_prepared(const std::string& path, const std::map<std::string, Shape>& shapes) {
  Graph g = QD_TRY(import_onnx_file(path));
  PrepareOptions opt;
  opt.input_shapes = shapes;
  Status st = prepare_graph(g, opt);
  if (!st.is_ok()) return st.prefix(path);
  return g;
}

}  // namespace qd
