// report/svg.cpp — SVG chart builders (see svg.hpp).
#include "report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dptwin::report {
namespace {

constexpr int kMarginLeft = 78;
constexpr int kMarginTop = 34;
constexpr int kLegendWidth = 190;
constexpr int kLegendRow = 18;

std::string num(double v) { return fmt::format("{:.1f}", v); }

struct Frame {
  double left, top, right, bottom;  // plot area in pixels
};

// Extent of the data, widened so that a flat series still has a range.
std::pair<double, double> extent(const std::vector<double>& vs, bool include_zero) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : vs)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) return {0, 1};
  if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    if (hi == 0) return {0, 1};
    lo = include_zero ? std::min(0.0, lo) : lo * 0.9;
    hi = hi * 1.1;
    if (lo > hi) std::swap(lo, hi);
  }
  return {lo, hi};
}

// Axis ticks and the domain they span.
std::pair<std::vector<double>, Scale> make_axis(const AxisSpec& a, const std::vector<double>& data, double r0,
                                                double r1) {
  std::vector<double> vs = data;
  if (a.min) vs.push_back(*a.min);
  if (a.max) vs.push_back(*a.max);
  Scale s;
  s.r0 = r0, s.r1 = r1, s.log2 = a.log2;
  std::vector<double> ticks;
  if (a.log2) {
    std::vector<double> pos;
    for (double v : vs)
      if (v > 0 && std::isfinite(v)) pos.push_back(v);
    auto [lo, hi] = extent(pos, false);
    if (lo <= 0) lo = 1;
    ticks = log2_ticks(lo, hi);
    s.d0 = ticks.front(), s.d1 = ticks.back();
    if (s.d1 <= s.d0) s.d1 = s.d0 * 2, ticks.push_back(s.d1);
  } else {
    auto [lo, hi] = extent(vs, !a.min);
    if (a.min) lo = *a.min;
    if (a.max) hi = *a.max;
    ticks = nice_ticks(lo, hi);
    s.d0 = ticks.front(), s.d1 = ticks.back();
  }
  return {ticks, s};
}

void axes(std::string& o, const Frame& f, const AxisSpec& xa, const Scale& xs, const std::vector<double>& xt,
          const AxisSpec& ya, const Scale& ys, const std::vector<double>& yt,
          const std::vector<std::string>* x_labels = nullptr, bool rotate = false) {
  // grid + y ticks
  for (double t : yt) {
    double y = ys(t);
    o += fmt::format(R"~(<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e3e3e3"/>)~", num(f.left), num(y),
                     num(f.right), num(y));
    o += fmt::format(R"~(<text class="tick" x="{}" y="{}" text-anchor="end" font-size="11">{}</text>)~",
                     num(f.left - 6), num(y + 4), xml_escape(format_si(t)));
  }
  if (x_labels) {
    for (size_t i = 0; i < x_labels->size(); ++i) {
      double x = xs(static_cast<double>(i));
      if (rotate)
        o += fmt::format(R"~(<text class="tick" x="{0}" y="{1}" text-anchor="end" font-size="10" )~"
                         R"~(transform="rotate(-60 {0} {1})">{2}</text>)~",
                         num(x + 3), num(f.bottom + 12), xml_escape((*x_labels)[i]));
      else
        o += fmt::format(R"~(<text class="tick" x="{}" y="{}" text-anchor="middle" font-size="10">{}</text>)~", num(x),
                         num(f.bottom + 15), xml_escape((*x_labels)[i]));
    }
  } else {
    for (double t : xt) {
      double x = xs(t);
      o += fmt::format(R"~(<line class="tick-mark" x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#555"/>)~", num(x),
                       num(f.bottom), num(f.bottom + 4));
      o += fmt::format(R"~(<text class="tick" x="{}" y="{}" text-anchor="middle" font-size="11">{}</text>)~", num(x),
                       num(f.bottom + 17), xml_escape(format_si(t)));
    }
  }
  o += fmt::format(R"~(<line class="axis" x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333"/>)~", num(f.left),
                   num(f.top), num(f.bottom));
  o += fmt::format(R"~(<line class="axis" x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#333"/>)~", num(f.left),
                   num(f.right), num(f.bottom));
  if (!xa.title().empty())
    o += fmt::format(R"~(<text class="axis-label" x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>)~",
                     num((f.left + f.right) / 2), num(f.bottom + 34), xml_escape(xa.title()));
  o += fmt::format(R"~(<text class="axis-label" x="{0}" y="{1}" text-anchor="middle" font-size="12" )~"
                   R"~(transform="rotate(-90 {0} {1})">{2}</text>)~",
                   num(16), num((f.top + f.bottom) / 2), xml_escape(ya.title()));
}

void legend(std::string& o, double x, double y, const std::vector<std::string>& names, bool boxes,
            const std::vector<std::string>& colors = {}) {
  for (size_t i = 0; i < names.size(); ++i) {
    double yy = y + static_cast<double>(i) * kLegendRow;
    o += R"~(<g class="legend-entry">)~";
    if (boxes)
      o += fmt::format(R"~(<rect x="{}" y="{}" width="12" height="12" fill="{}"/>)~", num(x), num(yy - 10),
                       palette_color(i));
    else
      o += fmt::format(R"~(<line x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="{3}" stroke-width="3"/>)~", num(x),
                       num(x + 14), num(yy - 4), i < colors.size() ? colors[i] : palette_color(i));
    o += fmt::format(R"~(<text x="{}" y="{}" font-size="11">{}</text>)~", num(x + 19), num(yy), xml_escape(names[i]));
    o += "</g>";
  }
}

std::string open_svg(int w, int h, const std::string& title) {
  std::string o = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )~"
      R"~(font-family="sans-serif" role="img">)~",
      w, h);
  o += fmt::format(R"~(<title>{}</title>)~", xml_escape(title));
  o += fmt::format(R"~(<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>)~", w, h);
  o += fmt::format(R"~(<text class="title" x="{}" y="20" font-size="14" font-weight="bold">{}</text>)~", kMarginLeft,
                   xml_escape(title));
  return o;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string o;
  o.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string format_si(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  const char* suffix = "";
  double s = v;
  if (a >= 1e12) s = v / 1e12, suffix = "T";
  else if (a >= 1e9) s = v / 1e9, suffix = "G";
  else if (a >= 1e6) s = v / 1e6, suffix = "M";
  else if (a >= 1e4) s = v / 1e3, suffix = "k";
  std::string t = fmt::format("{:.3g}", s);
  if (t.find('e') != std::string::npos) t = fmt::format("{:g}", s);
  return t + suffix;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  const double first = std::floor(lo / step + 1e-9) * step;
  std::vector<double> t;
  for (double v = first; v < hi + step * 0.999; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  if (t.size() < 2) t.push_back(first + step);
  return t;
}

std::vector<double> log2_ticks(double lo, double hi) {
  double a = std::pow(2.0, std::floor(std::log2(lo) + 1e-9));
  const double b = std::pow(2.0, std::ceil(std::log2(hi) - 1e-9));
  std::vector<double> t;
  for (; a <= b * 1.0000001; a *= 2) t.push_back(a);
  if (t.size() < 2) t.push_back(t.back() * 2);
  return t;
}

std::string palette_color(size_t i) {
  static const char* colors[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                 "#D55E00", "#332288", "#999933", "#882255", "#44AA99"};
  return colors[i % (sizeof(colors) / sizeof(colors[0]))];
}

double Scale::operator()(double v) const {
  double t;
  if (log2) t = (std::log2(v) - std::log2(d0)) / (std::log2(d1) - std::log2(d0));
  else t = (v - d0) / (d1 - d0);
  return r0 + t * (r1 - r0);
}

std::string line_chart(const LineChartSpec& spec) {
  std::vector<const Series*> shown;
  std::vector<double> xs, ys;
  for (const auto& s : spec.series) {
    if (s.points.empty()) continue;
    shown.push_back(&s);
    for (auto [x, y] : s.points) xs.push_back(x), ys.push_back(y);
  }
  if (spec.reference_y) ys.push_back(*spec.reference_y);
  if (spec.diagonal) {
    std::vector<double> both = xs;
    both.insert(both.end(), ys.begin(), ys.end());
    xs = ys = both;
  }
  const Frame f{double(kMarginLeft), double(kMarginTop), double(spec.width - kLegendWidth),
                double(spec.height - 48)};
  auto [xt, xsc] = make_axis(spec.x, xs, f.left, f.right);
  auto [yt, ysc] = make_axis(spec.y, ys, f.bottom, f.top);

  std::string o = open_svg(spec.width, spec.height, spec.title);
  axes(o, f, spec.x, xsc, xt, spec.y, ysc, yt);
  if (shown.empty())
    o += fmt::format(R"~(<text class="no-data" x="{}" y="{}" text-anchor="middle" font-size="13" fill="#777">)~"
                     R"~(no data</text>)~",
                     num((f.left + f.right) / 2), num((f.top + f.bottom) / 2));
  if (spec.reference_y) {
    double y = ysc(*spec.reference_y);
    o += fmt::format(R"~(<line class="reference" x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#c00" )~"
                     R"~(stroke-dasharray="6 4"/>)~",
                     num(f.left), num(f.right), num(y));
    if (!spec.reference_label.empty())
      o += fmt::format(R"~(<text class="reference-label" x="{}" y="{}" text-anchor="end" font-size="10" )~"
                       R"~(fill="#c00">{}</text>)~",
                       num(f.right - 2), num(y - 4), xml_escape(spec.reference_label));
  }
  if (spec.diagonal) {
    o += fmt::format(R"~(<line class="reference" x1="{}" y1="{}" x2="{}" y2="{}" stroke="#888" )~"
                     R"~(stroke-dasharray="5 4"/>)~",
                     num(xsc(xsc.d0)), num(ysc(xsc.d0)), num(xsc(std::min(xsc.d1, ysc.d1))),
                     num(ysc(std::min(xsc.d1, ysc.d1))));
  }
  std::vector<std::string> names, colors;
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto& s = *shown[i];
    const std::string c = s.color.empty() ? palette_color(i) : s.color;
    names.push_back(s.name);
    colors.push_back(c);
    o += fmt::format(R"~(<g class="series" data-name="{}">)~", xml_escape(s.name));
    if (spec.lines && s.points.size() > 1) {
      std::string pts;
      for (auto [x, y] : s.points) pts += fmt::format("{},{} ", num(xsc(x)), num(ysc(y)));
      pts.pop_back();
      o += fmt::format(R"~(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)~", c, pts);
    }
    for (auto [x, y] : s.points)
      o += fmt::format(R"~(<circle class="marker" cx="{}" cy="{}" r="{}" fill="{}"><title>{}: {}, {}</title>)~"
                       R"~(</circle>)~",
                       num(xsc(x)), num(ysc(y)), spec.lines ? 3 : 4.5, c, xml_escape(s.name), format_si(x),
                       format_si(y));
    o += "</g>";
  }
  legend(o, f.right + 16, f.top + 8, names, false, colors);
  o += "</svg>";
  return o;
}

std::string bar_chart(const BarChartSpec& spec) {
  std::vector<double> tops;
  for (const auto& b : spec.bars) {
    double sum = 0;
    for (double v : b.values) sum += std::max(0.0, v);
    tops.push_back(sum);
  }
  if (spec.reference) tops.push_back(*spec.reference);
  const size_t n = spec.bars.size();
  size_t longest = 0;
  for (const auto& b : spec.bars) longest = std::max(longest, b.label.size());
  const Frame f0{double(kMarginLeft), double(kMarginTop), double(spec.width - kLegendWidth), 0};
  const double slot = n ? (f0.right - f0.left) / static_cast<double>(n) : 1;
  const bool rotate = static_cast<double>(longest) * 6.2 > slot;
  const double label_room = rotate ? std::min(200.0, static_cast<double>(longest) * 5.6 * 0.87 + 22) : 48;
  const Frame f{f0.left, f0.top, f0.right, spec.height - label_room};
  auto [yt, ysc] = make_axis(spec.y, tops, f.bottom, f.top);
  Scale xsc{-0.5, static_cast<double>(n) - 0.5, f.left, f.right, false};
  if (n == 0) xsc.d1 = 0.5;
  std::vector<std::string> labels;
  for (const auto& b : spec.bars) labels.push_back(b.label);

  std::string o = open_svg(spec.width, spec.height, spec.title);
  axes(o, f, AxisSpec{}, xsc, {}, spec.y, ysc, yt, &labels, rotate);
  if (n == 0)
    o += fmt::format(R"~(<text class="no-data" x="{}" y="{}" text-anchor="middle" font-size="13" fill="#777">)~"
                     R"~(no data</text>)~",
                     num((f.left + f.right) / 2), num((f.top + f.bottom) / 2));
  const double bw = std::max(2.0, slot * 0.7);
  for (size_t i = 0; i < n; ++i) {
    const auto& b = spec.bars[i];
    const double cx = xsc(static_cast<double>(i));
    double base = 0;
    o += fmt::format(R"~(<g class="bar{}" data-label="{}">)~", b.marked ? " oom" : "", xml_escape(b.label));
    for (size_t k = 0; k < b.values.size(); ++k) {
      const double v = std::max(0.0, b.values[k]);
      if (v <= 0) continue;
      const double y1 = ysc(base + v), y0 = ysc(base);
      const std::string fill = b.marked ? "#f3b0b0" : palette_color(k);
      const std::string layer = k < spec.layers.size() ? spec.layers[k] : "";
      o += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="{}" stroke-width="{}">)~"
                       R"~(<title>{} {}: {} {}</title></rect>)~",
                       num(cx - bw / 2), num(y1), num(bw), num(std::max(0.5, y0 - y1)), fill,
                       b.marked ? "#c00" : "#ffffff", b.marked ? 1.2 : 0.5, xml_escape(b.label), xml_escape(layer), format_si(v),
                       xml_escape(spec.y.unit));
      base += v;
    }
    if (b.marked)
      o += fmt::format(R"~(<text class="oom-label" x="{}" y="{}" text-anchor="middle" font-size="10" )~"
                       R"~(font-weight="bold" fill="#c00">{}</text>)~",
                       num(cx), num(ysc(base) - 4), xml_escape(spec.mark_text));
    o += "</g>";
  }
  if (spec.reference) {
    const double y = ysc(*spec.reference);
    o += fmt::format(R"~(<line class="reference" x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#c00" stroke-width="1.5" )~"
                     R"~(stroke-dasharray="6 4"/>)~",
                     num(f.left), num(f.right), num(y));
    if (!spec.reference_label.empty())
      o += fmt::format(R"~(<text class="reference-label" x="{}" y="{}" text-anchor="end" font-size="10" )~"
                       R"~(fill="#c00">{}</text>)~",
                       num(f.right - 2), num(y - 4), xml_escape(spec.reference_label));
  }
  legend(o, f.right + 16, f.top + 8, spec.layers, true);
  o += "</svg>";
  return o;
}

}  // namespace dptwin::report
