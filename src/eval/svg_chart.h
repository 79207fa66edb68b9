// Horizontal bar charts as standalone SVG text, for figures in the docs (per-layer sensitivity). One row per
// category, labelled on the left, and one or more panels side by side, each with its own value axis, so that
// measures of different ranges share the row labels. Readable with ~60 rows.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace qd {

struct BarPanel {
  std::string title;                                  // above the panel
  std::string axis_label;                             // under the value axis
  std::vector<double> values;                         // one per row; a non-finite value draws no bar, only its text
  double base = NAN;                                  // bars start here (NaN: at the axis' lower end)
  std::vector<std::pair<double, std::string>> lines;  // dashed reference lines: value, legend text
};

struct BarChart {
  std::string title;
  std::vector<std::string> rows;  // row labels, top to bottom
  std::vector<bool> highlight;    // rows whose bars take the highlight colour (empty: none)
  std::string highlight_legend;   // what the highlight means (shown when some row is highlighted)
  std::vector<BarPanel> panels;
};

// The chart as an SVG document. Every bar is a <rect class="bar">; text is XML-escaped.
std::string svg_bar_chart(const BarChart& chart);

// A timeline (Gantt chart): one row per lane (e.g. a CUDA stream), each span a bar from its start to its end on a
// shared time axis in microseconds, coloured by its group (e.g. a kernel's family) with a legend of the groups; its
// label shows on hover.
struct TimelineSpan {
  double start_us = 0, duration_us = 0;
  size_t row = 0;
  std::string group, label;
};

struct TimelineChart {
  std::string title;
  std::vector<std::string> rows;  // lane labels, top to bottom
  std::vector<TimelineSpan> spans;
};

// The chart as an SVG document. Every span is a <rect class="span">; spans of rows past the labels are left out.
std::string svg_timeline_chart(const TimelineChart& chart);

// A line chart: series of (x, y) points on shared axes, each a polyline in its own colour, named in a legend (e.g.
// memory in use over a soak run's iterations).
struct LineSeries {
  std::string name;
  std::vector<double> x, y;  // the same length; non-finite points are left out
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<LineSeries> series;
};

// The chart as an SVG document. Every series is a <polyline class="series">; text is XML-escaped.
std::string svg_line_chart(const LineChart& chart);

}  // namespace qd
