// qdeploy chart SPEC.json -o OUT.svg [--batch N]
// A bar chart (src/eval/svg_chart.h) from a JSON description, for figures built from other commands' JSON output
// (e.g. scripts/precision-speed.py: mAP and latency per precision configuration):
//   {"title": "...", "rows": ["fp16", "int8", ...],
//    "panels": [{"title": "...", "axis_label": "...", "values": [0.739, null, ...], "base": 0.7,
//                "lines": [[0.739, "FP32"]]}, ...]}
// null draws no bar (its text says "n/a"). Every panel needs one value per row.
// Or, given what `qdeploy bench --export-timeline` writes, the kernels of its last run at batch N (default the first
// batch there) as a timeline: a row per CUDA stream, kernels coloured by family (the name up to its template
// arguments).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/file_io.h"
#include "eval/svg_chart.h"

namespace qd::cli {

namespace {

using Json = nlohmann::json;

struct ChartArgs {
  std::string spec, out;
  int batch = 0;  // a timeline's batch (0: the first)
};

Expected<std::string> get_string(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return std::string();
  if (!j[key].is_string()) return invalid(where + ": \"" + key + "\" must be a string");
  return j[key].get<std::string>();
}

Expected<BarChart> parse_chart(const Json& j) {
  if (!j.is_object()) return invalid("the chart spec must be a JSON object");
  BarChart c;
  c.title = QD_TRY(get_string(j, "title", "chart"));
  if (!j.contains("rows") || !j["rows"].is_array() || j["rows"].empty()) {
    return invalid("\"rows\" must be a non-empty array of labels");
  }
  for (const Json& r : j["rows"]) {
    if (!r.is_string()) return invalid("\"rows\" must hold strings");
    c.rows.push_back(r.get<std::string>());
  }
  if (!j.contains("panels") || !j["panels"].is_array() || j["panels"].empty()) {
    return invalid("\"panels\" must be a non-empty array");
  }
  for (size_t k = 0; k < j["panels"].size(); ++k) {
    const Json& pj = j["panels"][k];
    const std::string where = "panel " + std::to_string(k);
    if (!pj.is_object()) return invalid(where + ": must be an object");
    BarPanel p;
    p.title = QD_TRY(get_string(pj, "title", where));
    p.axis_label = QD_TRY(get_string(pj, "axis_label", where));
    if (!pj.contains("values") || !pj["values"].is_array() || pj["values"].size() != c.rows.size()) {
      return invalid(where + ": \"values\" must hold one number (or null) per row (" + std::to_string(c.rows.size()) +
                     ")");
    }
    for (const Json& v : pj["values"]) {
      if (!v.is_null() && !v.is_number()) return invalid(where + ": values must be numbers or null");
      p.values.push_back(v.is_null() ? NAN : v.get<double>());
    }
    if (pj.contains("base")) {
      if (!pj["base"].is_number()) return invalid(where + ": \"base\" must be a number");
      p.base = pj["base"].get<double>();
    }
    if (pj.contains("lines")) {
      if (!pj["lines"].is_array()) return invalid(where + ": \"lines\" must be an array of [value, legend]");
      for (const Json& l : pj["lines"]) {
        if (!l.is_array() || l.size() != 2 || !l[0].is_number() || !l[1].is_string()) {
          return invalid(where + ": each line must be [value, legend]");
        }
        p.lines.push_back({l[0].get<double>(), l[1].get<std::string>()});
      }
    }
    c.panels.push_back(std::move(p));
  }
  return c;
}

// A kernel's family: its name without namespaces and template arguments ("conv_igemm_kernel").
std::string kernel_family(const std::string& name) {
  std::string f = name.substr(0, name.find('<'));
  const size_t colon = f.rfind("::");
  return colon == std::string::npos ? f : f.substr(colon + 2);
}

// `qdeploy bench --export-timeline`'s JSON: [{"batch": N, "runs": [{"kernels": [{"name", "start_us", "duration_us",
// "stream"}, ...]}, ...]}, ...].
bool is_timeline(const Json& j) {
  return j.is_array() && !j.empty() && j[0].is_object() && j[0].contains("runs") && j[0].contains("batch");
}

Expected<TimelineChart> parse_timeline(const Json& j, int batch) {
  const Json* pick = nullptr;
  for (const Json& b : j) {
    if (!b.is_object() || !b.contains("batch") || !b["batch"].is_number_integer()) {
      return invalid("each timeline entry needs an integer \"batch\"");
    }
    if (!pick && (batch == 0 || b["batch"].get<int>() == batch)) pick = &b;
  }
  if (!pick) return invalid("no timeline at batch " + std::to_string(batch));
  const Json& runs = (*pick)["runs"];
  if (!runs.is_array() || runs.empty() || !runs.back().is_object() || !runs.back().contains("kernels") ||
      !runs.back()["kernels"].is_array()) {
    return invalid("\"runs\" must be a non-empty array of {\"kernels\": [...]}");
  }
  const Json& kernels = runs.back()["kernels"];  // the last run's
  TimelineChart c;
  c.title = "Kernels of one run at batch " + std::to_string((*pick)["batch"].get<int>()) + " (" +
            std::to_string(kernels.size()) + " kernels)";
  std::vector<int64_t> streams;
  for (const Json& k : kernels) {
    if (!k.is_object() || !k.contains("name") || !k["name"].is_string() || !k.contains("start_us") ||
        !k["start_us"].is_number() || !k.contains("duration_us") || !k["duration_us"].is_number() ||
        !k.contains("stream") || !k["stream"].is_number_integer()) {
      return invalid("each kernel needs \"name\", \"start_us\", \"duration_us\" and an integer \"stream\"");
    }
    const int64_t stream = k["stream"].get<int64_t>();
    auto it = std::find(streams.begin(), streams.end(), stream);
    if (it == streams.end()) {
      streams.push_back(stream);
      c.rows.push_back("stream " + std::to_string(stream));
      it = streams.end() - 1;
    }
    const std::string name = k["name"].get<std::string>();
    c.spans.push_back({k["start_us"].get<double>(), k["duration_us"].get<double>(),
                       static_cast<size_t>(it - streams.begin()), kernel_family(name), name});
  }
  return c;
}

int run_chart(const ChartArgs& a) {
  auto text = read_file(a.spec);
  if (!text) return report(text.status());
  const Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return report(invalid(a.spec + ": not valid JSON"));
  if (is_timeline(j)) {
    auto t = parse_timeline(j, a.batch);
    if (!t) return report(Status(t.status()).prefix(a.spec));
    if (Status s = write_file_atomic(a.out, svg_timeline_chart(*t)); !s) return report(s);
    std::printf("wrote %s (%zu kernels on %zu streams)\n", a.out.c_str(), t->spans.size(), t->rows.size());
    return 0;
  }
  if (a.batch != 0) return report(invalid("--batch is for timelines (qdeploy bench --export-timeline)"));
  auto chart = parse_chart(j);
  if (!chart) return report(Status(chart.status()).prefix(a.spec));
  if (Status s = write_file_atomic(a.out, svg_bar_chart(*chart)); !s) return report(s);
  std::printf("wrote %s (%zu rows, %zu panels)\n", a.out.c_str(), chart->rows.size(), chart->panels.size());
  return 0;
}

}  // namespace

RunFn add_chart(CLI::App& app) {
  auto a = std::make_shared<ChartArgs>();
  auto* sub = app.add_subcommand(
      "chart", "Bar chart (SVG) from a JSON description, or a timeline from qdeploy bench --export-timeline");
  sub->add_option("spec", a->spec, "Chart description (JSON; see tools/qdeploy/cmd_chart.cpp)")->required();
  sub->add_option("-o,--out", a->out, "Output SVG")->required();
  sub->add_option("--batch", a->batch, "A timeline's batch size (default: its first)");
  return [a] { return run_chart(*a); };
}

}  // namespace qd::cli
