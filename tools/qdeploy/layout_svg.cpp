#include "layout_svg.h"

#include <cstdio>
#include <set>

#include "core/xml.h"
#include "ops/op.h"

namespace qd::cli {

std::string layout_svg(const Graph& g, const LayoutPlan& p, const std::string& title) {
  const double left = 10, width = 1100, top = 40, row_h = 34;
  const size_t n = g.nodes.size();
  const double w = n ? width / static_cast<double>(n) : width;
  std::set<int> reading;  // nodes that read a reformatted value
  for (const auto& r : p.reformats) reading.insert(r.readers.begin(), r.readers.end());
  char buf[512];
  std::string o;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n",
                left * 2 + width, top + row_h + 50);
  o += buf;
  o += "<title>" + xml_escape(title) + "</title>\n";
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s: %d of %zu nodes on fast layers, "
                "%zu reformats</text>\n",
                left, xml_escape(title).c_str(), p.count(Layout::kFast), n, p.reformats.size());
  o += buf;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    const bool fast = p.fast(static_cast<int>(i));
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"node\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
                  "stroke=\"white\" stroke-width=\"0.3\"><title>",
                  left + i * w, top, w, row_h, fast ? "#76b900" : "#b0b0b0");
    o += buf + xml_escape(node.name + " (" + op_name(node.op) + "): " + (fast ? "fast layers" : "ONNX form")) +
         "</title></rect>\n";
    if (reading.count(static_cast<int>(i))) {
      std::snprintf(buf, sizeof buf,
                    "<rect class=\"reformat\" x=\"%.2f\" y=\"%.0f\" width=\"2\" height=\"%.0f\" fill=\"#d62728\"/>\n",
                    left + i * w, top - 4, row_h + 8);
      o += buf;
    }
  }
  std::snprintf(buf, sizeof buf,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"#76b900\"/><text x=\"%.0f\" y=\"%.0f\">"
                "fast layers</text><rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"#b0b0b0\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">ONNX form</text><rect x=\"%.0f\" y=\"%.0f\" width=\"3\" height=\"12\" "
                "fill=\"#d62728\"/><text x=\"%.0f\" y=\"%.0f\">reads a reformat</text>\n",
                left, top + row_h + 20, left + 16, top + row_h + 30, left + 120, top + row_h + 20, left + 136,
                top + row_h + 30, left + 240, top + row_h + 20, left + 248, top + row_h + 30);
  o += buf;
  o += "</svg>\n";
  return o;
}

}  // namespace qd::cli
