#include "plan/plugin_list.h"

#include <set>

#include "ops/plugin_registry.h"

namespace qd {

std::string encode_plugin_list(const Graph& g) {
  std::set<std::string> lines;
  for (const Node& n : g.nodes) {
    if (const PluginOp* p = plugin_op(n.op)) lines.insert(p->qualified + "\t" + p->source);
  }
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

Status check_plugin_list(const PlanFile& plan) {
  const PlanSection* sec = plan.find("plugins");
  if (!sec) return Status::ok();
  std::string missing;
  size_t pos = 0;
  while (pos < sec->data.size()) {
    size_t end = sec->data.find('\n', pos);
    if (end == std::string::npos) return invalid("plan section 'plugins': the last line is not terminated");
    const std::string line = sec->data.substr(pos, end - pos);
    pos = end + 1;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) return invalid("plan section 'plugins': malformed line");
    const std::string op = line.substr(0, tab), source = line.substr(tab + 1);
    if (find_plugin_op(op)) continue;
    missing += "\n  " + op + (source == "built in" ? " (built into the qdeploy that wrote the plan)"
                                                  : " (the plan was built with --plugin " + source + ")");
  }
  if (missing.empty()) return Status::ok();
  return unsupported("the plan uses plugin ops that are not registered:" + missing +
                     "\nload the plugin libraries that declare them with --plugin LIB.so");
}

}  // namespace qd
