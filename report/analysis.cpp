// report/analysis.cpp — grouping, recommendations and link sensitivity (see analysis.hpp).
#include "report/analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

namespace dptwin::report {
namespace {

bool ok(const ReportPoint& p) { return p.result.status == "ok" && p.result.step_time_s && p.result.tokens_per_s; }

double exposed_share(const sim::PointResult& r) {
  return r.step_time_s && *r.step_time_s > 0 ? r.breakdown.exposed_comm_s / *r.step_time_s : 0;
}

double hidden_fraction(const sim::PointResult& r) {
  const double comm = r.breakdown.exposed_comm_s + r.breakdown.hidden_comm_s;
  return comm > 0 ? r.breakdown.hidden_comm_s / comm : 1;
}

std::string pct(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

// What limits a point, in one sentence: memory headroom and communication share.
std::string limits(const ReportPoint& p) {
  const auto& r = p.result;
  std::string s;
  if (r.memory.capacity > 0)
    s += fmt::format("It uses {:.1f} of {:.1f} GiB per device ({} of memory)", r.memory.peak / 1073741824.0,
                     r.memory.capacity / 1073741824.0, pct(r.memory.peak / r.memory.capacity));
  if (r.memory.capacity > 0 && r.memory.peak / r.memory.capacity > 0.85) s += ", close to the limit";
  s += fmt::format("; exposed communication is {} of its step", pct(exposed_share(r)));
  if (r.breakdown.hidden_comm_s + r.breakdown.exposed_comm_s > 0)
    s += fmt::format(" ({} of its communication is hidden behind compute)", pct(hidden_fraction(r)));
  if (r.scaling_efficiency) s += fmt::format(", scaling efficiency {}", pct(*r.scaling_efficiency));
  return s + ".";
}

}  // namespace

std::optional<double> ReportPoint::slowdown_pct() const {
  if (result.status != "ok" || !result.step_time_s) return std::nullopt;
  if (nodes <= 1) return 0.0;
  if (!halved_step_s) return std::nullopt;
  return (*halved_step_s / *result.step_time_s - 1.0) * 100.0;
}

std::string param(const sim::PointResult& r, const std::string& key) {
  for (const auto& [k, v] : r.params)
    if (k == key) return v;
  return "";
}

std::vector<Group> group_points(const std::vector<ReportPoint>& points) {
  std::vector<Group> groups;
  std::map<std::string, size_t> where;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& r = points[i].result;
    std::string title = fmt::format("{} on {} ({})", param(r, "model"), param(r, "cluster"), points[i].device_type);
    auto [it, fresh] = where.emplace(title, groups.size());
    if (fresh) groups.push_back(Group{title, {}});
    groups[it->second].members.push_back(i);
  }
  return groups;
}

std::string series_name(const std::vector<ReportPoint>& points, const std::vector<size_t>& members, size_t index) {
  static const std::set<std::string> fixed{"model", "cluster", "device_type", "devices", "strategy", "note"};
  std::map<std::string, std::set<std::string>> values;
  for (size_t m : members)
    for (const auto& [k, v] : points[m].result.params)
      if (!fixed.count(k)) values[k].insert(v);
  const auto& r = points[index].result;
  std::string name = param(r, "strategy");
  for (const auto& [k, v] : r.params) {
    if (fixed.count(k) || values[k].size() < 2 || v == "-") continue;
    if (k == "micro_batch") name += " mb=" + v;
    else if (k == "precision") name += " " + v;
    else name += fmt::format(" {}={}", k, v);
  }
  return name;
}

std::string describe_config(const ReportPoint& p) {
  const auto& r = p.result;
  std::string s = fmt::format("{} x {}, {}, micro-batch {}", r.devices, p.device_type, param(r, "strategy"),
                              p.micro_batch);
  if (p.accumulation > 1) s += fmt::format(", accumulation {}", p.accumulation);
  if (!p.precision.empty()) s += ", " + p.precision;
  static const std::set<std::string> shown{"model", "cluster", "device_type", "devices", "strategy", "micro_batch",
                                           "accumulation", "precision", "note"};
  for (const auto& [k, v] : r.params)
    if (!shown.count(k) && v != "-") s += fmt::format(", {} {}", k, v);
  return s;
}

std::vector<Recommendation> recommend(const std::vector<ReportPoint>& points, const std::vector<size_t>& members) {
  std::vector<size_t> good;
  for (size_t m : members)
    if (ok(points[m])) good.push_back(m);
  std::vector<Recommendation> out;

  // ---- fastest: highest throughput
  Recommendation fast{"fastest", std::nullopt, "-", "-", ""};
  if (good.empty()) {
    fast.reason = "No configuration runs: every point is out of memory or infeasible.";
  } else {
    std::vector<size_t> by = good;
    std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) {
      return *points[a].result.tokens_per_s > *points[b].result.tokens_per_s;
    });
    const auto& p = points[by[0]];
    fast.index = by[0];
    fast.config = describe_config(p);
    fast.metric = format_rate(*p.result.tokens_per_s);
    fast.reason = fmt::format("Highest throughput of the {} configurations that run: {} at {:.1f} ms per step.",
                              good.size(), format_rate(*p.result.tokens_per_s), *p.result.step_time_s * 1e3);
    if (by.size() > 1) {
      const auto& q = points[by[1]];
      fast.reason += fmt::format(" The runner-up ({}) is {:.1f}% slower.", describe_config(q),
                                 (1 - *q.result.tokens_per_s / *p.result.tokens_per_s) * 100);
    }
    fast.reason += " " + limits(p);
    if (p.result.time_to_train_s)
      fast.reason += fmt::format(" It trains the token budget in {}.", format_duration(*p.result.time_to_train_s));
  }
  out.push_back(fast);

  // ---- cheapest: lowest cost per million tokens
  Recommendation cheap{"cheapest", std::nullopt, "-", "-", ""};
  std::vector<size_t> priced;
  for (size_t m : good)
    if (points[m].result.cost_per_million_tokens) priced.push_back(m);
  if (good.empty()) {
    cheap.reason = "No configuration runs.";
  } else if (priced.empty()) {
    cheap.reason = "No price is known for these devices: set pricing.per_device_hour in the scenario.";
  } else {
    std::vector<size_t> by = priced;
    std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) {
      const double ca = *points[a].result.cost_per_million_tokens, cb = *points[b].result.cost_per_million_tokens;
      if (ca != cb) return ca < cb;
      return *points[a].result.tokens_per_s > *points[b].result.tokens_per_s;
    });
    const auto& p = points[by[0]];
    cheap.index = by[0];
    cheap.config = describe_config(p);
    cheap.metric = format_usd(*p.result.cost_per_million_tokens) + " per million tokens";
    cheap.reason = fmt::format(
        "Lowest cost per million tokens: {} devices at {} per device-hour produce {}; the cost of a token grows "
        "only as scaling efficiency falls or the device sits idle in communication.",
        p.result.devices, format_usd(p.price_per_device_hour), format_rate(*p.result.tokens_per_s));
    if (fast.index && *fast.index != by[0]) {
      const auto& f = points[*fast.index];
      if (f.result.cost_per_million_tokens)
        cheap.reason += fmt::format(" Compared with the fastest it costs {:.1f}% less per token but runs {:.2f}x slower.",
                                    (1 - *p.result.cost_per_million_tokens / *f.result.cost_per_million_tokens) * 100,
                                    *f.result.tokens_per_s / *p.result.tokens_per_s);
    } else if (fast.index) {
      cheap.reason += " It is also the fastest.";
    }
    cheap.reason += " " + limits(p);
    if (p.result.cost_to_train && p.result.time_to_train_s)
      cheap.reason += fmt::format(" The token budget costs {} and takes {}.", format_usd(*p.result.cost_to_train),
                                  format_duration(*p.result.time_to_train_s));
  }
  out.push_back(cheap);

  // ---- least sensitive to slower links: smallest slowdown with halved inter-node bandwidth
  Recommendation robust{"least sensitive to slower links", std::nullopt, "-", "-", ""};
  std::vector<size_t> multi;
  for (size_t m : good)
    if (points[m].nodes > 1 && points[m].slowdown_pct()) multi.push_back(m);
  if (good.empty()) {
    robust.reason = "No configuration runs.";
  } else if (multi.empty()) {
    robust.reason = "Every configuration that runs fits in one node, so the inter-node links do not matter "
                    "(or the sensitivity was not measured).";
  } else {
    std::vector<size_t> by = multi;
    std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) {
      const double sa = *points[a].slowdown_pct(), sb = *points[b].slowdown_pct();
      if (std::abs(sa - sb) > 0.05) return sa < sb;
      return *points[a].result.tokens_per_s > *points[b].result.tokens_per_s;
    });
    const auto& p = points[by[0]];
    const auto& worst = points[by.back()];
    robust.index = by[0];
    robust.config = describe_config(p);
    robust.metric = fmt::format("{:+.1f}% step time", *p.slowdown_pct());
    robust.reason = fmt::format(
        "Across {} nodes, halving the inter-node bandwidth ({:.0f} -> {:.0f} Gb/s per NIC) slows it by only {:.1f}% "
        "(of {} multi-node configurations measured).",
        p.nodes, p.inter_node_gbps, p.inter_node_gbps / 2, *p.slowdown_pct(), multi.size());
    const double hf = hidden_fraction(p.result);
    if (hf > 0.5)
      robust.reason += fmt::format(" {} of its communication overlaps compute, so slower transfers stay hidden.",
                                   pct(hf));
    else
      robust.reason += fmt::format(" Its communication is small next to its compute (exposed share {}).",
                                   pct(exposed_share(p.result)));
    if (by.size() > 1)
      robust.reason += fmt::format(" The most sensitive is {} ({:+.1f}%, exposed communication {} of its step).",
                                   describe_config(worst), *worst.slowdown_pct(), pct(exposed_share(worst.result)));
  }
  out.push_back(robust);
  return out;
}

double inter_node_gbps(const sim::PointSpec& spec) {
  if (spec.cluster.inter_node_bandwidth) return spec.cluster.inter_node_bandwidth->value() * 8 / 1e9;
  const int per_node = std::max(1, spec.cluster.devices_per_node);
  int n = 2 * per_node;
  const int cap = spec.cluster.max_devices();
  if (cap > 0 && n > cap) return 0;
  const topology::Topology topo = topology::build_topology(spec.cluster, n);
  for (int l = 0; l < topo.num_links(); ++l) {
    const auto& link = topo.link(l);
    if (topo.vertex(link.from).kind == topology::VertexKind::Nic &&
        topo.vertex(link.to).kind == topology::VertexKind::Switch)
      return link.bandwidth.value() * 8 / 1e9;
  }
  return 0;
}

std::vector<ReportPoint> make_report_points(const std::vector<sim::PointSpec>& specs,
                                            std::vector<sim::PointResult> results, bool sensitivity, int threads) {
  std::vector<ReportPoint> points(results.size());
  std::map<std::string, double> bw_cache;  // cluster name + device -> Gb/s
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& s = specs[i];
    auto& p = points[i];
    p.result = std::move(results[i]);
    p.device_type = s.cluster.device.name;
    p.micro_batch = s.micro_batch;
    p.accumulation = s.options.accumulation;
    const PrecisionMode pm = sim::precision_of(s.strategy, s.options);
    p.precision = !pm.mixed() ? "fp32"
                              : fmt::format("{} {}", pm.amp == AmpLevel::O1 ? "O1" : "O2",
                                            pm.half == DType::BF16 ? "bf16" : "fp16");
    p.nodes = s.cluster.nodes_for(std::max(1, p.result.devices));
    p.price_per_device_hour = s.pricing.per_device_hour.value_or(s.cluster.device.price_per_hour);
    if (p.nodes > 1) {
      const std::string key = fmt::format("{}|{}|{}", s.cluster.name, s.cluster.file,
                                          s.cluster.inter_node_bandwidth ? s.cluster.inter_node_bandwidth->value() : 0);
      auto it = bw_cache.find(key);
      if (it == bw_cache.end()) it = bw_cache.emplace(key, inter_node_gbps(s)).first;
      p.inter_node_gbps = it->second;
    }
  }
  if (!sensitivity) return points;
  std::vector<sim::PointSpec> slow;
  std::vector<size_t> which;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!ok(points[i]) || points[i].nodes <= 1 || points[i].inter_node_gbps <= 0) continue;
    sim::PointSpec s = specs[i];
    s.cluster.inter_node_bandwidth = gbit_per_s(points[i].inter_node_gbps / 2);
    s.sim.trace = false;
    slow.push_back(std::move(s));
    which.push_back(i);
  }
  const auto slow_results = sim::simulate_all(slow, threads);
  for (size_t k = 0; k < which.size(); ++k)
    if (slow_results[k].step_time_s) points[which[k]].halved_step_s = slow_results[k].step_time_s;
  return points;
}

std::string format_duration(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 3 * 86400) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

std::string format_usd(double usd) {
  if (usd < 0.1) return fmt::format("${:.4f}", usd);
  if (usd < 10) return fmt::format("${:.2f}", usd);
  if (usd < 1e6) {
    std::string digits = fmt::format("{:.0f}", usd), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return "$" + out;
  }
  return fmt::format("${:.2f}M", usd / 1e6);
}

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M tokens/s", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k tokens/s", tokens_per_s / 1e3);
  return fmt::format("{:.0f} tokens/s", tokens_per_s);
}

std::string format_count(double n) {
  auto g = [](double v) { return fmt::format("{:.3g}", v); };
  if (n >= 1e12) return g(n / 1e12) + "T";
  if (n >= 1e9) return g(n / 1e9) + "B";
  if (n >= 1e6) return g(n / 1e6) + "M";
  if (n >= 1e4) return g(n / 1e3) + "k";
  return g(n);
}

}  // namespace dptwin::report
