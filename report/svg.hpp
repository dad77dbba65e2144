// report/svg.hpp — small, pure SVG chart builders for the offline HTML report.
//
//   line_chart(spec)  x/y axes with ticks, units and a legend; one polyline (or
//                     markers only) per series; optional reference line
//   bar_chart(spec)   stacked vertical bars with a legend of layers; optional
//                     horizontal reference (e.g. device memory) and marked bars (OOM)
//
// Output is a self-contained `<svg>` element: no scripts, no external fonts,
// styles or links, so the report renders offline. Elements carry classes that
// tests and the report's CSS rely on: `axis`, `tick`, `axis-label`, `title`,
// `legend-entry`, `series`, `marker`, `bar`, `oom`, `reference`.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dptwin::report {

// XML-escapes text for element content and attribute values (& < > " ').
std::string xml_escape(const std::string& text);

// Compact number for tick labels: 0, 0.5, 12, 1.5k, 20M, 3G (SI suffixes, no unit).
std::string format_si(double v);

// "Nice" linear tick values covering [lo, hi] (1, 2, 5 x 10^k steps), about
// `target` of them, first <= lo and last >= hi.  REQUIRES: hi >= lo.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// Powers of two covering [lo, hi] (lo > 0): 1, 2, 4, ... for device-count axes.
std::vector<double> log2_ticks(double lo, double hi);

// Colour of series / layer i (a fixed, colour-blind-friendly palette, cycled).
std::string palette_color(size_t i);

// Maps a data value to a pixel coordinate, linearly or on a log2 scale.
struct Scale {
  double d0 = 0, d1 = 1;  // data domain
  double r0 = 0, r1 = 1;  // pixel range
  bool log2 = false;
  double operator()(double v) const;
};

struct AxisSpec {
  std::string label;               // "devices", "step time"
  std::string unit;                // shown in parentheses: "ms", "tokens/s" ("" = none)
  bool log2 = false;               // log2 scale with power-of-two ticks (device counts)
  std::optional<double> min, max;  // forced domain; default: from the data (linear axes include 0)
  std::string title() const { return unit.empty() ? label : label + " (" + unit + ")"; }
};

struct Series {
  std::string name;                               // legend entry
  std::vector<std::pair<double, double>> points;  // (x, y); drawn in the given order
  std::string color = {};                         // "" = palette_color of its position among drawn series
};

struct LineChartSpec {
  std::string title;
  AxisSpec x, y;
  std::vector<Series> series;
  bool lines = true;                        // false: markers only (scatter)
  std::optional<double> reference_y;        // horizontal dashed line (e.g. 100 % efficiency)
  std::string reference_label;
  bool diagonal = false;                    // dashed y = x line (predicted vs measured)
  int width = 640, height = 380;
};

// An SVG line chart. Series with no points are left out of plot and legend.
// With no points at all, the chart shows "no data" between its axes.
std::string line_chart(const LineChartSpec& spec);

struct Bar {
  std::string label;           // category label under the bar
  std::vector<double> values;  // one value per layer (stacked bottom-up); >= 0
  bool marked = false;         // drawn hatched-red with `mark_text` above it (OOM)
};

struct BarChartSpec {
  std::string title;
  AxisSpec y;                        // value axis (linear)
  std::vector<std::string> layers;   // legend entries, one per stacked value
  std::vector<Bar> bars;
  std::optional<double> reference;   // horizontal dashed line (e.g. capacity)
  std::string reference_label;
  std::string mark_text = "OOM";
  int width = 640, height = 380;
};

// An SVG stacked bar chart; bar labels are rotated when they do not fit.
std::string bar_chart(const BarChartSpec& spec);

}  // namespace dptwin::report
