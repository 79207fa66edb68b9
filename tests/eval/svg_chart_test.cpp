#include "eval/svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace qd {

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Well-formedness for the XML subset the writer emits: every tag closed in order, attribute values quoted, no raw
// '<' or '&' outside tags and entities.
bool well_formed(const std::string& s, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      const std::string ent = s.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        *why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    size_t end = i + 1;
    bool quoted = false;
    while (end < s.size() && (quoted || s[end] != '>')) {
      if (s[end] == '"') quoted = !quoted;
      if (!quoted && s[end] == '<') {
        *why = "'<' inside a tag at " + std::to_string(end);
        return false;
      }
      ++end;
    }
    if (end >= s.size()) {
      *why = "unterminated tag";
      return false;
    }
    const std::string tag = s.substr(i + 1, end - i - 1);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        *why = "</" + tag.substr(1) + "> closes " + (open.empty() ? "nothing" : open.back());
        return false;
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = end + 1;
  }
  if (!open.empty()) *why = "<" + open.back() + "> not closed";
  return open.empty();
}

}  // namespace

TEST(SvgChart, OneBarPerRowAndPanelAndWellFormed) {
  BarChart c;
  c.title = "sensitivity of \"net\" <fp32 & int8>";
  c.rows = {"/model.0/conv/Conv", "a<b&c", "a very long layer name that goes on and on /model.24/m.2/Conv"};
  c.highlight = {false, true, false};
  c.highlight_legend = "kept in float";
  BarPanel a, b;
  a.title = "in float";
  a.axis_label = "SNR (dB)";
  a.values = {21.5, 30.25, 22.0};
  a.base = 21.0;
  a.lines = {{21.0, "all INT8"}, {25.0, "target"}};
  b.title = "alone INT8";
  b.axis_label = "SNR (dB)";
  b.values = {40.0, NAN, INFINITY};  // not measured, identical outputs: text, no bar
  c.panels = {a, b};
  const std::string svg = svg_bar_chart(c);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(count(svg, "class=\"bar\""), 4u);
  EXPECT_EQ(count(svg, "#e45756\"><title>"), 1u);  // the highlighted row's bar in the first panel
  EXPECT_NE(svg.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_NE(svg.find("&quot;net&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">n/a<"), std::string::npos);
  EXPECT_NE(svg.find(">inf<"), std::string::npos);
  EXPECT_NE(svg.find("/model.24/m.2/Conv</text>"), std::string::npos);  // long names keep their tail
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
}

TEST(SvgChart, SixtyRowsGetSixtyBars) {
  BarChart c;
  BarPanel p;
  for (int i = 0; i < 60; ++i) {
    c.rows.push_back("/model." + std::to_string(i) + "/conv/Conv");
    p.values.push_back(20 + 0.1 * i);
  }
  c.panels = {p};
  const std::string svg = svg_bar_chart(c);
  EXPECT_EQ(count(svg, "class=\"bar\""), 60u);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why;
}

// A span per kernel in its stream's row, coloured by group (one legend entry each, in order of appearance); spans of
// rows past the labels are left out; the axis reaches past the last end.
TEST(SvgTimeline, OneSpanPerKernelColouredByGroup) {
  TimelineChart c;
  c.title = "kernels <batch 32>";
  c.rows = {"stream 7", "stream 9"};
  c.spans = {{0, 100, 0, "conv_igemm_kernel", "conv_igemm_kernel<128, 64>"},
             {50, 30, 1, "slice_concat_kernel", "slice & concat"},
             {120, 40, 0, "conv_igemm_kernel", "conv_igemm_kernel<64, 64>"},
             {10, 10, 5, "lost", "a row without a label"}};
  const std::string svg = svg_timeline_chart(c);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(count(svg, "class=\"span\""), 3u);
  EXPECT_EQ(count(svg, "fill=\"#4c78a8\""), 3u);  // two conv spans and their legend swatch
  EXPECT_EQ(count(svg, "fill=\"#f58518\""), 2u);  // the decode and its swatch
  EXPECT_EQ(svg.find("lost"), std::string::npos);
  EXPECT_NE(svg.find("kernels &lt;batch 32&gt;"), std::string::npos);
  EXPECT_NE(svg.find("slice &amp; concat: 30.0 us from 50.0"), std::string::npos);
  EXPECT_NE(svg.find(">160<"), std::string::npos);  // a tick at the last end (20 us steps)
  EXPECT_NE(svg.find(">stream 9<"), std::string::npos);
}

// A polyline per series with its finite points only, a legend entry each, axes covering the data.
TEST(SvgLineChart, OnePolylinePerSeries) {
  LineChart c;
  c.title = "memory <soak>";
  c.x_label = "runs";
  c.y_label = "MiB";
  c.series = {{"device", {0, 1000, 2000}, {510, 512, 512}}, {"host & RSS", {0, 1000, 2000}, {80, NAN, 81}}};
  const std::string svg = svg_line_chart(c);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(count(svg, "class=\"series\""), 2u);
  EXPECT_NE(svg.find("memory &lt;soak&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">host &amp; RSS<"), std::string::npos);
  EXPECT_NE(svg.find(">2000<"), std::string::npos);  // the x axis reaches the last run
  EXPECT_NE(svg.find(">600<"), std::string::npos);   // the y axis from 0 past 512
  const size_t host = svg.find("points=\"", svg.find("class=\"series\"", svg.find("class=\"series\"") + 1));
  const std::string pts = svg.substr(host, svg.find('"', host + 8) - host);
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 2) << pts;  // the NaN point is left out
}

}  // namespace qd
