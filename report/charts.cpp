// report/charts.cpp — the report's charts (see charts.hpp).
#include "report/charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace dptwin::report {
namespace {

constexpr double kGiB = 1073741824.0;

bool timed(const ReportPoint& p) { return p.result.status == "ok" && p.result.step_time_s.has_value(); }

double m_step_ms(const ReportPoint& p) { return *p.result.step_time_s * 1e3; }
double m_tokens(const ReportPoint& p) { return p.result.tokens_per_s.value_or(NAN); }
double m_eff(const ReportPoint& p) { return p.result.scaling_efficiency ? *p.result.scaling_efficiency * 100 : NAN; }
double m_cost(const ReportPoint& p) { return p.result.cost_per_million_tokens.value_or(NAN); }
double m_ttt_h(const ReportPoint& p) { return p.result.time_to_train_s ? *p.result.time_to_train_s / 3600 : NAN; }
double m_slow(const ReportPoint& p) {
  return p.nodes > 1 && p.slowdown_pct() ? *p.slowdown_pct() : NAN;
}

LineChartSpec devices_chart(const std::string& title, const std::string& label, const std::string& unit) {
  LineChartSpec s;
  s.title = title;
  s.x = AxisSpec{"devices", "", true, {}, {}};
  s.y = AxisSpec{label, unit, false, {}, {}};
  return s;
}

// Points of the group to show as bars: all when few, else per series the
// smallest, a middle and the largest device count.
std::vector<size_t> bar_points(const std::vector<ReportPoint>& points, const Group& g, bool include_untimed) {
  std::vector<size_t> chosen;
  std::map<std::string, std::vector<size_t>> by_series;
  std::vector<std::string> order;
  std::set<std::pair<std::string, int>> seen;
  for (size_t m : g.members) {
    if (!include_untimed && !timed(points[m])) continue;
    const std::string s = series_name(points, g.members, m);
    if (!seen.insert({s, points[m].result.devices}).second) continue;
    if (!by_series.count(s)) order.push_back(s);
    by_series[s].push_back(m);
  }
  size_t total = 0;
  for (auto& [s, v] : by_series) total += v.size();
  for (const auto& s : order) {
    auto v = by_series[s];
    std::stable_sort(v.begin(), v.end(),
                     [&](size_t a, size_t b) { return points[a].result.devices < points[b].result.devices; });
    if (total <= 36 || v.size() <= 3) {
      chosen.insert(chosen.end(), v.begin(), v.end());
    } else {
      chosen.push_back(v.front());
      chosen.push_back(v[v.size() / 2]);
      chosen.push_back(v.back());
    }
  }
  return chosen;
}

std::string bar_label(const std::vector<ReportPoint>& points, const Group& g, size_t m) {
  return fmt::format("{} @{}", series_name(points, g.members, m), points[m].result.devices);
}

}  // namespace

std::vector<Series> series_of(const std::vector<ReportPoint>& points, const Group& g,
                              double (*metric)(const ReportPoint&)) {
  std::vector<Series> out;
  std::map<std::string, size_t> where;
  std::set<std::pair<std::string, int>> seen;
  for (size_t m : g.members) {
    const auto& p = points[m];
    if (!timed(p)) continue;
    const double y = metric(p);
    if (!std::isfinite(y)) continue;
    const std::string name = series_name(points, g.members, m);
    if (!seen.insert({name, p.result.devices}).second) continue;  // `single` repeats at every grid count
    auto [it, fresh] = where.emplace(name, out.size());
    if (fresh) out.push_back(Series{name, {}});
    out[it->second].points.emplace_back(static_cast<double>(std::max(1, p.result.devices)), y);
  }
  // One colour per series across all charts of the group: by order of first appearance.
  std::map<std::string, size_t> order;
  for (size_t m : g.members) order.emplace(series_name(points, g.members, m), order.size());
  for (auto& s : out) {
    std::stable_sort(s.points.begin(), s.points.end());
    s.color = palette_color(order[s.name]);
  }
  return out;
}

std::string chart_step_time(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Step time vs devices", "step time", "ms");
  s.series = series_of(points, g, m_step_ms);
  return line_chart(s);
}

std::string chart_throughput(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Throughput vs devices", "throughput", "tokens/s");
  s.series = series_of(points, g, m_tokens);
  return line_chart(s);
}

std::string chart_efficiency(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Scaling efficiency vs devices", "scaling efficiency", "%");
  s.series = series_of(points, g, m_eff);
  s.y.min = 0;
  s.reference_y = 100;
  s.reference_label = "linear scaling";
  return line_chart(s);
}

std::string chart_cost(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Cost per million tokens vs devices", "cost", "USD per million tokens");
  s.series = series_of(points, g, m_cost);
  return line_chart(s);
}

std::string chart_time_to_train(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Time to train the token budget vs devices", "time to train", "hours");
  s.series = series_of(points, g, m_ttt_h);
  return line_chart(s);
}

std::string chart_sensitivity(const std::vector<ReportPoint>& points, const Group& g) {
  auto s = devices_chart("Slowdown with inter-node bandwidth halved", "step time increase", "%");
  s.series = series_of(points, g, m_slow);
  return line_chart(s);
}

bool any_cost(const std::vector<ReportPoint>& points, const Group& g) {
  return std::any_of(g.members.begin(), g.members.end(),
                     [&](size_t m) { return points[m].result.cost_per_million_tokens.has_value(); });
}
bool any_time_to_train(const std::vector<ReportPoint>& points, const Group& g) {
  return std::any_of(g.members.begin(), g.members.end(),
                     [&](size_t m) { return points[m].result.time_to_train_s.has_value(); });
}
bool any_sensitivity(const std::vector<ReportPoint>& points, const Group& g) {
  return std::any_of(g.members.begin(), g.members.end(),
                     [&](size_t m) { return points[m].nodes > 1 && points[m].halved_step_s.has_value(); });
}

std::string chart_breakdown(const std::vector<ReportPoint>& points, const Group& g) {
  BarChartSpec s;
  s.title = "Step time breakdown (critical device)";
  s.y = AxisSpec{"time per step", "ms", false, {}, {}};
  s.layers = {"compute", "exposed comm", "hidden comm", "optimizer", "overhead"};
  for (size_t m : bar_points(points, g, false)) {
    const auto& b = points[m].result.breakdown;
    s.bars.push_back(Bar{bar_label(points, g, m),
                         {b.compute_s * 1e3, b.exposed_comm_s * 1e3, b.hidden_comm_s * 1e3, b.optimizer_s * 1e3,
                          b.overhead_s * 1e3},
                         false});
  }
  s.width = 1180;
  s.height = 420;
  return bar_chart(s);
}

std::string chart_memory(const std::vector<ReportPoint>& points, const Group& g) {
  BarChartSpec s;
  s.title = "Peak memory per device vs capacity";
  s.y = AxisSpec{"memory per device", "GiB", false, {}, {}};
  s.layers = {"weights", "gradients", "optimizer + master", "activations + workspace", "buffers + reserve"};
  double capacity = 0;
  for (size_t m : bar_points(points, g, true)) {
    const auto& mem = points[m].result.memory;
    capacity = std::max(capacity, mem.capacity);
    s.bars.push_back(Bar{bar_label(points, g, m),
                         {mem.weights / kGiB, mem.gradients / kGiB, (mem.optimizer_state + mem.master_weights) / kGiB,
                          (mem.activations + mem.workspace) / kGiB,
                          (mem.comm_buffers + mem.gathered_outputs + mem.framework_reserve) / kGiB},
                         mem.oom || points[m].result.status == "oom"});
  }
  if (capacity > 0) {
    s.reference = capacity / kGiB;
    s.reference_label = fmt::format("capacity {:.1f} GiB", capacity / kGiB);
  }
  s.width = 1180;
  s.height = 420;
  return bar_chart(s);
}

std::string chart_validation_scatter(const ValidationResult& v) {
  LineChartSpec s;
  s.title = "Predicted vs measured step time";
  s.x = AxisSpec{"measured step time", "ms", false, {}, {}};
  s.y = AxisSpec{"predicted step time", "ms", false, {}, {}};
  s.lines = false;
  s.diagonal = true;
  Series within{"|error| <= 10%", {}}, outside{"|error| > 10%", {}};
  for (const auto& c : v.cases)
    (std::abs(c.error_pct) <= 10 ? within : outside)
        .points.emplace_back(c.measured_step_s * 1e3, c.predicted_step_s * 1e3);
  s.series = {within, outside};
  return line_chart(s);
}

std::string chart_validation_errors(const ValidationResult& v) {
  BarChartSpec s;
  s.title = "Prediction error per case (|predicted - measured| / measured)";
  s.y = AxisSpec{"absolute error", "%", false, {}, {}};
  s.layers = {"under-predicted", "over-predicted"};
  for (const auto& c : v.cases)
    s.bars.push_back(Bar{c.label, {c.error_pct < 0 ? -c.error_pct : 0, c.error_pct >= 0 ? c.error_pct : 0}, false});
  s.width = 1180;
  return bar_chart(s);
}

}  // namespace dptwin::report
