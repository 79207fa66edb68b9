#include "eval/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/xml.h"

namespace qd {

namespace {

constexpr double kRowH = 16, kBarH = 11, kPanelW = 340, kPanelGap = 40, kTop = 64, kBottom = 56, kRight = 24;
constexpr double kCharW = 6.2;  // average advance of the 11px sans-serif labels, for layout only
constexpr size_t kMaxLabel = 44;
const char* const kBarColor = "#4c78a8";
const char* const kHighlightColor = "#e45756";
const char* const kLineColors[] = {"#333333", "#54a24b", "#b279a2"};

std::string esc(const std::string& s) { return xml_escape(s); }

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// Long layer names keep their distinctive tail ("…/model.24/m.2/Conv").
std::string shorten(const std::string& s) {
  if (s.size() <= kMaxLabel) return s;
  return "\xe2\x80\xa6" + s.substr(s.size() - (kMaxLabel - 1));
}

// Tick label: as few digits as the step needs.
std::string tick_text(double v, double step) {
  const int digits = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, std::fabs(v) < step * 1e-6 ? 0.0 : v);
  return b;
}

struct Axis {
  double lo = 0, hi = 1, step = 0.2;
};

// A 1-2-5 step giving about `ticks` ticks over [lo, hi] (a finite range).
Axis nice_range(double lo, double hi, int ticks) {
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double raw = (hi - lo) / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

// About 5 ticks over the finite values (and the base and reference lines).
Axis nice_axis(const BarPanel& p) {
  double lo = INFINITY, hi = -INFINITY;
  auto take = [&](double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  };
  for (double v : p.values) take(v);
  for (const auto& l : p.lines) take(l.first);
  take(p.base);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  return nice_range(lo, hi, 5);
}

// The document's opening: its size, a white background, the title.
std::string svg_head(double width, double height, const std::string& title) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
         "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
         "<text x=\"" + num(width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" +
         esc(title) + "</text>\n";
}

// Row labels right-aligned before `left` (their baseline `baseline` below the row's top), with a light band on every
// other row so that a bar is easy to follow to its name.
std::string row_labels(const std::vector<std::string>& rows, double left, double width, double row_h,
                       double baseline) {
  std::string s;
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = kTop + r * row_h;
    if (r % 2 == 1) {
      s += "<rect x=\"4\" y=\"" + num(y) + "\" width=\"" + num(width - 8) + "\" height=\"" + num(row_h) +
           "\" fill=\"#f2f2f2\"/>\n";
    }
    s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(y + baseline) + "\" text-anchor=\"end\">" +
         esc(shorten(rows[r])) + "</text>\n";
  }
  return s;
}

// A value axis of `w` pixels from x0 under rows of total height plot_h: grid lines, tick labels, the axis line and its
// label.
std::string value_axis(const Axis& ax, double x0, double w, double plot_h, const std::string& label) {
  const auto xof = [&](double v) { return x0 + (v - ax.lo) / (ax.hi - ax.lo) * w; };
  std::string s;
  const int ticks = static_cast<int>(std::lround((ax.hi - ax.lo) / ax.step));
  for (int t = 0; t <= ticks; ++t) {
    const double v = ax.lo + t * ax.step;
    const double x = xof(v);
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" + num(kTop + plot_h) +
         "\" stroke=\"#dddddd\"/>\n";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(kTop + plot_h + 14) + "\" text-anchor=\"middle\">" +
         tick_text(v, ax.step) + "</text>\n";
  }
  s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(kTop + plot_h) + "\" x2=\"" + num(x0 + w) + "\" y2=\"" +
       num(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  s += "<text x=\"" + num(x0 + w / 2) + "\" y=\"" + num(kTop + plot_h + 32) + "\" text-anchor=\"middle\">" +
       esc(label) + "</text>\n";
  return s;
}

}  // namespace

std::string svg_bar_chart(const BarChart& c) {
  size_t label_chars = 8;
  for (const auto& r : c.rows) label_chars = std::max(label_chars, std::min(r.size(), kMaxLabel));
  const double left = 16 + label_chars * kCharW;
  const double width = left + c.panels.size() * (kPanelW + kPanelGap) - kPanelGap + kRight;
  const double plot_h = c.rows.size() * kRowH;
  size_t legend_lines = 0;
  for (const auto& p : c.panels) legend_lines = std::max(legend_lines, p.lines.size());
  const bool highlighted = std::find(c.highlight.begin(), c.highlight.end(), true) != c.highlight.end();
  // Under the plot: tick labels, axis label, one legend line per reference line, then the highlight legend.
  const double legend_y = kTop + plot_h + kBottom - 8 + 13 * legend_lines;
  const double height = legend_y + (highlighted ? 22 : 4);

  std::string s = svg_head(width, height, c.title) + row_labels(c.rows, left, width, kRowH, kRowH - 4);
  for (size_t p = 0; p < c.panels.size(); ++p) {
    const BarPanel& panel = c.panels[p];
    const Axis ax = nice_axis(panel);
    const double x0 = left + p * (kPanelW + kPanelGap);
    auto xof = [&](double v) { return x0 + (std::clamp(v, ax.lo, ax.hi) - ax.lo) / (ax.hi - ax.lo) * kPanelW; };
    s += "<g>\n<text x=\"" + num(x0 + kPanelW / 2) + "\" y=\"" + num(kTop - 24) +
         "\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"bold\">" + esc(panel.title) + "</text>\n";
    s += value_axis(ax, x0, kPanelW, plot_h, panel.axis_label);
    // Bars.
    const double base = std::isfinite(panel.base) ? panel.base : ax.lo;
    for (size_t r = 0; r < c.rows.size() && r < panel.values.size(); ++r) {
      const double v = panel.values[r];
      const double y = kTop + r * kRowH + (kRowH - kBarH) / 2;
      if (!std::isfinite(v)) {
        s += "<text x=\"" + num(xof(base) + 3) + "\" y=\"" + num(y + kBarH - 2) + "\" fill=\"#666666\">" +
             (std::isnan(v) ? "n/a" : v > 0 ? "inf" : "-inf") + "</text>\n";
        continue;
      }
      const double xa = std::min(xof(base), xof(v)), xb = std::max(xof(base), xof(v));
      const bool hl = r < c.highlight.size() && c.highlight[r];
      char val[32];
      std::snprintf(val, sizeof val, "%.4g", v);
      s += "<rect class=\"bar\" x=\"" + num(xa) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(xb - xa, 0.5)) +
           "\" height=\"" + num(kBarH) + "\" fill=\"" + (hl ? kHighlightColor : kBarColor) + "\"><title>" +
           esc(c.rows[r]) + ": " + val + "</title></rect>\n";
    }
    // Reference lines, with their legend under the axis label.
    for (size_t l = 0; l < panel.lines.size(); ++l) {
      const auto& [v, text] = panel.lines[l];
      if (!std::isfinite(v)) continue;
      const char* color = kLineColors[l % 3];
      s += "<line x1=\"" + num(xof(v)) + "\" y1=\"" + num(kTop - 6) + "\" x2=\"" + num(xof(v)) + "\" y2=\"" +
           num(kTop + plot_h) + "\" stroke=\"" + color + "\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n";
      s += "<text x=\"" + num(x0 + kPanelW / 2) + "\" y=\"" + num(kTop + plot_h + 48 + 13 * l) +
           "\" text-anchor=\"middle\" fill=\"" + color + "\">- - " + esc(text) + "</text>\n";
    }
    s += "</g>\n";
  }
  if (highlighted) {
    s += "<rect x=\"16\" y=\"" + num(legend_y + 2) + "\" width=\"10\" height=\"10\" fill=\"" + kHighlightColor +
         "\"/>\n<text x=\"32\" y=\"" + num(legend_y + 11) + "\">" + esc(c.highlight_legend) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

namespace {
constexpr double kLaneH = 26, kSpanH = 18, kTimelineW = 960;
const char* const kGroupColors[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2",
                                    "#b279a2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac"};
}  // namespace

std::string svg_timeline_chart(const TimelineChart& c) {
  size_t label_chars = 6;
  for (const auto& r : c.rows) label_chars = std::max(label_chars, std::min(r.size(), kMaxLabel));
  const double left = 16 + label_chars * kCharW;
  const double width = left + kTimelineW + kRight;
  const double plot_h = c.rows.size() * kLaneH;
  double end = 0;
  std::vector<std::string> groups;  // in order of first appearance: each group's colour
  for (const TimelineSpan& sp : c.spans) {
    if (sp.row >= c.rows.size()) continue;
    end = std::max(end, sp.start_us + sp.duration_us);
    if (std::find(groups.begin(), groups.end(), sp.group) == groups.end()) groups.push_back(sp.group);
  }
  const Axis ax = nice_range(0, std::max(end, 1.0), 10);
  auto xof = [&](double v) { return left + (std::clamp(v, ax.lo, ax.hi) - ax.lo) / (ax.hi - ax.lo) * kTimelineW; };
  const double legend_y = kTop + plot_h + 44;
  const double height = legend_y + 16 * ((groups.size() + 2) / 3) + 8;
  const auto color = [&](const std::string& g) {
    const size_t i = std::find(groups.begin(), groups.end(), g) - groups.begin();
    return kGroupColors[i % (sizeof kGroupColors / sizeof kGroupColors[0])];
  };

  std::string s = svg_head(width, height, c.title) + row_labels(c.rows, left, width, kLaneH, kLaneH / 2 + 4) +
                  value_axis(ax, left, kTimelineW, plot_h, "time (us)");
  for (const TimelineSpan& sp : c.spans) {
    if (sp.row >= c.rows.size()) continue;
    const double xa = xof(sp.start_us), xb = xof(sp.start_us + sp.duration_us);
    char when[64];
    std::snprintf(when, sizeof when, ": %.1f us from %.1f", sp.duration_us, sp.start_us);
    s += "<rect class=\"span\" x=\"" + num(xa) + "\" y=\"" + num(kTop + sp.row * kLaneH + (kLaneH - kSpanH) / 2) +
         "\" width=\"" + num(std::max(xb - xa, 0.5)) + "\" height=\"" + num(kSpanH) + "\" fill=\"" + color(sp.group) +
         "\" stroke=\"white\" stroke-width=\"0.5\"><title>" + esc(sp.label) + when + "</title></rect>\n";
  }
  for (size_t g = 0; g < groups.size(); ++g) {  // three to a line
    const double x = left + (g % 3) * (kTimelineW / 3), y = legend_y + 16 * (g / 3);
    s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"10\" height=\"10\" fill=\"" + color(groups[g]) +
         "\"/>\n<text x=\"" + num(x + 16) + "\" y=\"" + num(y + 9) + "\">" + esc(shorten(groups[g])) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

std::string svg_line_chart(const LineChart& c) {
  constexpr double kPlotW = 560, kPlotH = 260, kLeft = 72;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const LineSeries& sr : c.series) {
    for (size_t i = 0; i < std::min(sr.x.size(), sr.y.size()); ++i) {
      if (!std::isfinite(sr.x[i]) || !std::isfinite(sr.y[i])) continue;
      x_lo = std::min(x_lo, sr.x[i]), x_hi = std::max(x_hi, sr.x[i]);
      y_lo = std::min(y_lo, sr.y[i]), y_hi = std::max(y_hi, sr.y[i]);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  const Axis ax = nice_range(x_lo, x_hi, 8), ay = nice_range(std::min(0.0, y_lo), y_hi, 5);
  auto xof = [&](double v) { return kLeft + (v - ax.lo) / (ax.hi - ax.lo) * kPlotW; };
  auto yof = [&](double v) { return kTop + kPlotH - (v - ay.lo) / (ay.hi - ay.lo) * kPlotH; };
  const double legend_y = kTop + kPlotH + 48;
  const double width = kLeft + kPlotW + kRight, height = legend_y + 16 * c.series.size() + 8;
  std::string s = svg_head(width, height, c.title) + value_axis(ax, kLeft, kPlotW, kPlotH, c.x_label);
  const int ticks = static_cast<int>(std::lround((ay.hi - ay.lo) / ay.step));
  for (int t = 0; t <= ticks; ++t) {
    const double v = ay.lo + t * ay.step, y = yof(v);
    s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + kPlotW) + "\" y2=\"" + num(y) +
         "\" stroke=\"#dddddd\"/>\n<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" +
         tick_text(v, ay.step) + "</text>\n";
  }
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(kLeft) + "\" y2=\"" +
       num(kTop + kPlotH) + "\" stroke=\"black\"/>\n<text transform=\"translate(16 " + num(kTop + kPlotH / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + esc(c.y_label) + "</text>\n";
  for (size_t k = 0; k < c.series.size(); ++k) {
    const LineSeries& sr = c.series[k];
    const char* color = kGroupColors[k % (sizeof kGroupColors / sizeof kGroupColors[0])];
    std::string pts;
    for (size_t i = 0; i < std::min(sr.x.size(), sr.y.size()); ++i) {
      if (std::isfinite(sr.x[i]) && std::isfinite(sr.y[i])) pts += num(xof(sr.x[i])) + "," + num(yof(sr.y[i])) + " ";
    }
    s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"" +
         pts + "\"><title>" + esc(sr.name) + "</title></polyline>\n";
    const double y = legend_y + 16 * k;
    s += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(y) + "\" width=\"10\" height=\"10\" fill=\"" + color +
         "\"/>\n<text x=\"" + num(kLeft + 16) + "\" y=\"" + num(y + 9) + "\">" + esc(sr.name) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace qd
