#include "validate/profile_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "core/error.hpp"
#include "sim/compute_model.hpp"
#include "validate/sync_fit.hpp"
#include "validate/metrics.hpp"
#include "topology/device_spec.hpp"

namespace dptwin::validate {

using nlohmann::json;

namespace {

// Weighted least squares of y ≈ a·x1 + b·x2 with weights 1/y² (relative error),
// a, b >= 0 (a coefficient that would go negative is fixed at 0 and the other refitted).
std::pair<double, double> ls2_nonneg(const std::vector<double>& x1, const std::vector<double>& x2,
                                     const std::vector<double>& y) {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double w = 1.0 / std::max(y[i] * y[i], 1e-30);
    s11 += w * x1[i] * x1[i];
    s12 += w * x1[i] * x2[i];
    s22 += w * x2[i] * x2[i];
    s1y += w * x1[i] * y[i];
    s2y += w * x2[i] * y[i];
  }
  const double det = s11 * s22 - s12 * s12;
  double a = 0, b = 0;
  if (std::abs(det) > 1e-12 * std::max(s11 * s22, 1e-300)) {
    a = (s1y * s22 - s2y * s12) / det;
    b = (s2y * s11 - s1y * s12) / det;
  } else {
    a = -1;  // degenerate: fall through to one-parameter fits
  }
  if (a >= 0 && b >= 0) return {a, b};
  // One coefficient at zero: keep the better of the two one-parameter fits.
  const double a_only = s11 > 0 ? std::max(s1y / s11, 0.0) : 0;
  const double b_only = s22 > 0 ? std::max(s2y / s22, 0.0) : 0;
  auto err = [&](double aa, double bb) {
    double e = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double r = (aa * x1[i] + bb * x2[i] - y[i]) / std::max(std::abs(y[i]), 1e-30);
      e += r * r;
    }
    return e;
  };
  return err(a_only, 0) <= err(0, b_only) ? std::pair{a_only, 0.0} : std::pair{0.0, b_only};
}

double rms(const std::vector<double>& rel) {
  if (rel.empty()) return 0;
  double s = 0;
  for (double r : rel) s += r * r;
  return std::sqrt(s / static_cast<double>(rel.size()));
}

}  // namespace

double curve_rms_rel_error(const std::vector<WorkSample>& samples, double launch_s, double peak,
                           const sim::EfficiencyCurve& c) {
  std::vector<double> rel;
  for (const auto& s : samples) {
    const double t = launch_s + s.work / (peak * c.at(s.work));
    rel.push_back((t - s.seconds) / s.seconds);
  }
  return rms(rel);
}

CurveFit fit_efficiency_curve(const std::vector<WorkSample>& samples, double launch_s, double peak, bool fit_peak,
                              double max_cap) {
  DPTWIN_ASSERT(samples.size() >= 2, "an efficiency fit needs two samples");
  std::vector<double> x1, x2, y;
  for (const auto& s : samples) {
    x1.push_back(s.work);
    x2.push_back(1.0);
    // The op's own dispatch is part of its time; keep a floor so tiny ops stay positive.
    y.push_back(std::max(s.seconds - launch_s, 0.05 * s.seconds));
  }
  auto [a, b] = ls2_nonneg(x1, x2, y);
  CurveFit f;
  f.samples = static_cast<int>(samples.size());
  if (!(a > 0)) a = 1.0 / peak;  // no slope: the data are all overhead; keep the datasheet rate
  // a = 1/(peak·max), b = half/(peak·max)  =>  max = 1/(a·peak), half = b/a.
  double mx = 1.0 / (a * peak);
  if (fit_peak && mx > max_cap) {
    peak = 1.0 / (a * max_cap);
    mx = max_cap;
  }
  mx = std::clamp(mx, 0.01, 1.0);
  f.peak = peak;
  f.curve.max = mx;
  f.curve.half_work = std::min(b / a, 1e15);
  f.rms_rel_error = curve_rms_rel_error(samples, launch_s, peak, f.curve);
  return f;
}

namespace {
// A bin sets the fitted peak only when its calls take at least this many
// dispatch costs (see fit_efficiency_table).
constexpr double kPeakMinLaunches = 2.0;
}  // namespace

CurveFit fit_efficiency_table(const std::vector<WorkSample>& samples, double launch_s, double peak, bool fit_peak,
                              double max_cap) {
  DPTWIN_ASSERT(!samples.empty(), "an efficiency table needs samples");
  std::map<int, std::vector<const WorkSample*>> bins;
  for (const auto& s : samples) bins[static_cast<int>(std::floor(std::log(s.work) / std::log(4.0)))].push_back(&s);
  std::vector<std::pair<double, double>> rate;  // (work, bytes-or-FLOP per second)
  double best = 0, best_any = 0;
  for (const auto& [b, xs] : bins) {
    std::vector<double> r, t;
    double logw = 0;
    for (const auto* s : xs) {
      r.push_back(s->work / std::max(s->seconds - launch_s, 0.05 * s->seconds));
      t.push_back(s->seconds);
      logw += std::log(s->work);
    }
    rate.emplace_back(std::exp(logw / static_cast<double>(xs.size())), median(r));
    best_any = std::max(best_any, rate.back().second);
    // A bin whose calls take under twice the dispatch cost has a rate made of
    // the small difference of two similar times: it swung the memory peak
    // 20-43 GB/s between calibrations (1K-element ops, 1.5-4.7 us against 1.6
    // us of dispatch). Such bins keep their table entry but set no peak.
    if (median(t) >= kPeakMinLaunches * launch_s) best = std::max(best, rate.back().second);
  }
  if (!(best > 0)) best = best_any;  // every bin dispatch-bound: the best of them
  if (fit_peak) peak = best / max_cap;
  CurveFit f;
  f.samples = static_cast<int>(samples.size());
  f.peak = peak;
  f.curve.max = 0;
  for (auto [w, r] : rate) {
    const double e = std::clamp(r / peak, 0.001, 1.0);
    f.curve.table.emplace_back(w, e);
    f.curve.max = std::max(f.curve.max, e);
  }
  f.rms_rel_error = curve_rms_rel_error(samples, launch_s, peak, f.curve);
  return f;
}

namespace {

// Fits one regime on samples [lo, hi); returns (regime, squared relative residuals).
std::pair<sim::CommRegime, std::vector<double>> fit_one_regime(const std::vector<CommSample>& s, size_t lo, size_t hi) {
  std::vector<double> x1, x2, y;
  for (size_t i = lo; i < hi; ++i) {
    x1.push_back(s[i].steps);
    x2.push_back(s[i].transfer_s);
    y.push_back(std::max(s[i].seconds - s[i].latency_s, 1e-9));
  }
  auto [alpha, inv_factor] = ls2_nonneg(x1, x2, y);
  sim::CommRegime r;
  r.alpha = Time::from_seconds(alpha);
  r.bandwidth_factor = inv_factor > 0 ? std::clamp(1.0 / inv_factor, 1e-6, 1e4) : 1e4;
  std::vector<double> rel;
  for (size_t i = lo; i < hi; ++i) {
    const double t = s[i].latency_s + r.alpha.seconds() * s[i].steps + s[i].transfer_s / r.bandwidth_factor;
    rel.push_back((t - s[i].seconds) / s[i].seconds);
  }
  return {r, rel};
}

}  // namespace

RegimeFit fit_comm_regimes(std::vector<CommSample> samples, int max_regimes, int min_points, double keep_ratio) {
  DPTWIN_ASSERT(!samples.empty(), "a regime fit needs samples");
  std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  const int n = static_cast<int>(samples.size());
  min_points = std::max(1, std::min(min_points, n));
  // Best split into k contiguous regimes, by exhaustive search over breakpoints.
  auto best_with = [&](int k) -> std::pair<double, std::vector<int>> {
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> best_cuts, cuts;
    std::function<void(int, int)> rec = [&](int start, int left) {
      if (left == 1) {
        if (n - start < min_points) return;
        cuts.push_back(n);
        std::vector<double> rel;
        int lo = 0;
        for (int c : cuts) {
          auto part = fit_one_regime(samples, lo, c).second;
          rel.insert(rel.end(), part.begin(), part.end());
          lo = c;
        }
        const double e = rms(rel);
        if (e < best) best = e, best_cuts = cuts;
        cuts.pop_back();
        return;
      }
      for (int c = start + min_points; c <= n - min_points * (left - 1); ++c) {
        cuts.push_back(c);
        rec(c, left - 1);
        cuts.pop_back();
      }
    };
    rec(0, k);
    return {best, best_cuts};
  };
  auto [err, cuts] = best_with(1);
  for (int k = 2; k <= max_regimes && k * min_points <= n; ++k) {
    auto [e2, c2] = best_with(k);
    if (e2 < keep_ratio * err && err - e2 > 0.02) {
      err = e2;
      cuts = c2;
    } else {
      break;
    }
  }
  RegimeFit out;
  out.rms_rel_error = err;
  int lo = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    sim::CommRegime r = fit_one_regime(samples, lo, cuts[i]).first;
    // Boundary: geometric mean of the last size of this regime and the first of the next.
    r.up_to = i + 1 < cuts.size() ? std::sqrt(samples[cuts[i] - 1].bytes * samples[cuts[i]].bytes) : 0;
    r.measured_from = samples[lo].bytes;
    r.measured_to = samples[cuts[i] - 1].bytes;
    out.regimes.push_back(r);
    lo = cuts[i];
  }
  return out;
}

CommSample nominal_comm(const topology::Topology& topo, sim::CollectiveKind kind, sim::Algorithm algorithm, int ranks,
                        double bytes, double measured_seconds) {
  sim::NetworkModel net(topo, sim::NetworkOptions{});
  sim::CollectiveRequest req;
  req.kind = kind;
  req.algorithm = algorithm;
  for (int i = 0; i < ranks; ++i) req.ranks.push_back(i);
  req.bytes = Bytes(bytes);
  CommSample s;
  s.bytes = bytes;
  s.seconds = measured_seconds;
  for (const auto& p : sim::decompose(req, topo)) s.steps += p.repeat;
  const sim::CollectiveCost& c = net.cost(req);
  s.latency_s = c.latency_part.seconds();
  s.transfer_s = (c.duration - c.latency_part).seconds();
  return s;
}

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw InputError({}, "microbenchmark", fmt::format("malformed microbenchmark document: {}", what));
}

double num(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) bad(fmt::format("missing number '{}'", key));
  return j[key].get<double>();
}

// The seconds the fit prices a collective row at: the mean of its rounds'
// medians where the document has it (see fit_profile), else its median.
double priced_seconds(const json& row) { return num(row, row.contains("mean_s") ? "mean_s" : "seconds"); }

std::vector<WorkSample> rows_of(const json& compute, const std::vector<std::string>& ops, const std::string& dtype,
                                const char* work_key) {
  std::vector<WorkSample> out;
  for (const auto& r : compute.at("compute")) {
    const std::string op = r.value("op", "");
    if (std::find(ops.begin(), ops.end(), op) == ops.end() || r.value("dtype", "") != dtype) continue;
    out.push_back({num(r, work_key), num(r, "seconds")});
  }
  return out;
}

sim::Algorithm algorithm_for(sim::CollectiveKind k) {
  // What the strategy builders use on CPU ranks: allreduce as configured for
  // validation (ring), the central parameter server's reduce and broadcast as
  // fan-in / fan-out; allgather as a ring.
  switch (k) {
    case sim::CollectiveKind::Reduce:
    case sim::CollectiveKind::Broadcast: return sim::Algorithm::ParameterServer;
    default: return sim::Algorithm::Ring;
  }
}

}  // namespace

namespace {

// Calls fn(figures, reading, row, section) once for every probe reading of a
// compute document, with the figures it was read next to (a case's "seconds"
// and "min_s"; an autocast row's fp32_s or o1_s; one dispatch figure), the
// row they belong to (null for a dispatch figure) and its section
// ("compute", "optimizer", "autocast_linear", "memcpy" or "dispatch").
template <typename Doc, typename Fn>
void for_each_probed(Doc& doc, Fn&& fn) {
  using Figure = std::conditional_t<std::is_const_v<Doc>, const json*, json*>;
  auto each_row = [&](const char* section) {
    if (!doc.contains(section) || !doc.at(section).is_array()) return;
    for (auto& r : doc.at(section)) {
      if (r.contains("probe")) {
        std::vector<Figure> figs;
        for (const char* k : {"seconds", "min_s"})
          if (r.contains(k)) figs.push_back(&r.at(k));
        fn(figs, r.at("probe"), &r, section);
      }
      for (const char* k : {"fp32", "o1"}) {
        const std::string probe = std::string(k) + "_probe", fig = std::string(k) + "_s";
        if (r.contains(probe) && r.contains(fig)) fn(std::vector<Figure>{&r.at(fig)}, r.at(probe), &r, section);
      }
    }
  };
  for (const char* section : {"compute", "optimizer", "autocast_linear", "memcpy"}) each_row(section);
  // The dispatch figures: every read of them where the suite kept its reads
  // (`dispatch_reads`; `dispatch` repeats one of them), else the one read.
  if (doc.contains("dispatch_reads") && doc.at("dispatch_reads").is_object()) {
    for (auto& [k, reads] : doc.at("dispatch_reads").items())
      for (auto& r : reads)
        if (r.contains("seconds") && r.contains("probe"))
          fn(std::vector<Figure>{&r.at("seconds")}, r.at("probe"), static_cast<Figure>(nullptr), "dispatch");
  } else if (doc.contains("dispatch_probe") && doc.contains("dispatch")) {
    for (auto& [k, pr] : doc.at("dispatch_probe").items())
      if (doc.at("dispatch").contains(k))
        fn(std::vector<Figure>{&doc.at("dispatch").at(k)}, pr, static_cast<Figure>(nullptr), "dispatch");
  }
}

}  // namespace

SpeedReference probe_reference(const std::vector<json>& docs) {
  std::map<std::string, std::vector<double>> xs;
  for (const auto& d : docs)
    for_each_probed(d, [&](const auto&, const json& pr, const auto*, const char*) {
      if (pr.contains("class") && pr.contains("s") && pr.at("s").is_number() && pr.at("s").get<double>() > 0)
        xs[pr.at("class").get<std::string>()].push_back(pr.at("s").get<double>());
    });
  SpeedReference ref;
  for (auto& [c, v] : xs) ref[c] = median(std::move(v));
  return ref;
}

json probe_readings(const std::vector<json>& docs) {
  json out = json::array();
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    if (d.contains("probe_readings")) {
      for (const auto& r : d.at("probe_readings")) out.push_back(r);
      continue;
    }
    for_each_probed(d, [&](const auto&, const json& pr, const auto*, const char*) {
      if (!pr.contains("class") || !pr.contains("s") || !pr.at("s").is_number()) return;
      json r = {{"class", pr.at("class")}, {"s", pr.at("s")}};
      if (docs.size() > 1) r["pass"] = i;
      out.push_back(std::move(r));
    });
  }
  return out;
}

std::string elementwise_form_of(const json& probe) {
  return probe.is_object() ? probe.value("elementwise_form", sim::SpeedProbe{}.elementwise_form)
                           : sim::SpeedProbe{}.elementwise_form;
}

std::string elementwise_probe_form(const json& doc) {
  const json& sr = doc.contains("speed_reference") ? doc.at("speed_reference") : json::object();
  return elementwise_form_of(sr.contains("start") ? sr.at("start") : json::object());
}

sim::SpeedStates speed_states(const json& doc, const SpeedReference& ref, int points) {
  // A reading's level: its pass's median reading of its class where the
  // readings name their pass, else `ref`. A pass that sat in another state of
  // the host for its minutes moves its level, not the spread of the states
  // (the level is the run's to measure: validate --run-states).
  const json readings = probe_readings({doc});
  std::map<std::pair<std::string, int>, std::vector<double>> by_pass;
  for (const auto& pr : readings)
    if (pr.contains("pass") && pr.at("s").get<double>() > 0)
      by_pass[{pr.at("class").get<std::string>(), pr.at("pass").get<int>()}].push_back(pr.at("s").get<double>());
  std::map<std::pair<std::string, int>, double> level;
  for (auto& [k, v] : by_pass) level[k] = median(std::move(v));
  std::map<std::string, std::vector<double>> ratios;
  for (const auto& pr : readings) {
    const std::string cls = pr.at("class").get<std::string>();
    const auto it = ref.find(cls);
    const double reading = pr.at("s").get<double>();
    if (it == ref.end() || !(reading > 0) || !(it->second > 0)) continue;
    const double at = pr.contains("pass") ? level.at({cls, pr.at("pass").get<int>()}) : it->second;
    ratios[cls].push_back(std::clamp(reading / at, 0.2, 5.0));
  }
  sim::SpeedStates s;
  s.cores = doc.value("cores", 0);
  for (auto& [cls, v] : ratios) {
    std::vector<double>* out = s.of(cls);
    if (!out || v.size() < 8) continue;
    std::sort(v.begin(), v.end());
    for (int i = 0; i < points; ++i) {  // the quantile at (i + 0.5) / points, interpolated
      const double at = (i + 0.5) / points * static_cast<double>(v.size() - 1);
      const size_t lo = static_cast<size_t>(at);
      const size_t hi = std::min(lo + 1, v.size() - 1);
      out->push_back(v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo)));
    }
  }
  return s;
}

json normalized_to_speed(const json& doc, const SpeedReference& ref) {
  if (doc.contains("normalized_to") || ref.empty()) return doc;
  json out = doc;
  bool any = false;
  const auto dispatch_ref = ref.find("dispatch");
  // Fused GELU calls, rescaled once the plain dispatch is at the reference
  // (below): their figures and their class's and dispatch ratios.
  std::vector<std::tuple<json*, double, double>> by_parts;
  for_each_probed(out, [&](const std::vector<json*>& figures, const json& pr, const json* row, std::string_view section) {
    if (!pr.contains("class") || !pr.contains("s")) return;
    const auto it = ref.find(pr.at("class").get<std::string>());
    const double reading = pr.at("s").is_number() ? pr.at("s").get<double>() : 0;
    if (it == ref.end() || !(reading > 0)) return;
    const double by_class = std::clamp(it->second / reading, 0.2, 5.0);
    // A short call follows the dispatch speed in part (dispatch_share):
    // the dispatch reading taken next to the case, where the suite kept it.
    const double dispatch_reading = pr.contains("dispatch_s") && pr.at("dispatch_s").is_number()
                                        ? pr.at("dispatch_s").get<double>()
                                        : 0;
    const bool blend = dispatch_reading > 0 && dispatch_ref != ref.end() && it != dispatch_ref;
    const double by_dispatch = blend ? std::clamp(dispatch_ref->second / dispatch_reading, 0.2, 5.0) : by_class;
    const bool gelu = blend && row && row->contains("op") && row->at("op") == "activation";
    // Its kind: a host copy by its section, a GEMM by its class's probe
    // (autocast rows' fp32 and O1 passes too), else a memory-class call of
    // its row's dtype.
    const std::string& cls = it->first;
    const bool half = row && row->contains("dtype") && row->at("dtype") != "fp32";
    const sim::CallKind kind = section == "memcpy"    ? sim::CallKind::HostCopy
                               : cls == "matmul"      ? sim::CallKind::GemmFp32
                               : cls == "matmul_bf16" ? sim::CallKind::GemmHalf
                               : half                 ? sim::CallKind::MemoryHalf
                                                      : sim::CallKind::MemoryFp32;
    for (json* figure : figures) {
      if (!figure->is_number()) continue;
      const double t = figure->get<double>(), share = blend ? dispatch_share(kind, t) : 0.0;
      if (gelu) by_parts.emplace_back(figure, by_class, by_dispatch);
      else *figure = t * std::pow(by_class, 1.0 - share) * std::pow(by_dispatch, share);
      any = true;
    }
  });
  // A dispatch figure read several times: the median of its reads, each at the
  // common speed now.
  if (out.contains("dispatch_reads") && out.at("dispatch_reads").is_object())
    for (const auto& [k, reads] : out.at("dispatch_reads").items()) {
      std::vector<double> xs;
      for (const auto& r : reads)
        if (r.contains("seconds") && r.at("seconds").is_number()) xs.push_back(r.at("seconds").get<double>());
      if (!xs.empty()) out["dispatch"][k] = median(std::move(xs));
    }
  // A fused GELU call is the plain dispatch, which the fit takes off it, and
  // a kernel that follows its class however short
  // (sim::DeviceProfile::slow_down_by_class): the dispatch part by the
  // dispatch ratio, the rest by the class's.
  const json* d = out.contains("dispatch") && out.at("dispatch").is_object() ? &out.at("dispatch") : nullptr;
  const double plain = d && d->contains("plain_s") && d->at("plain_s").is_number() ? d->at("plain_s").get<double>() : 0.0;
  for (auto [figure, by_class, by_dispatch] : by_parts) {
    const double t = figure->get<double>(), dispatch_here = plain / by_dispatch;  // the plain dispatch at this reading
    *figure = plain + std::max(t - dispatch_here, 0.05 * t) * by_class;
  }
  if (any) out["normalized_to"] = ref;
  return out;
}

std::vector<json> normalized_to_comm_state(const std::vector<json>& passes) {
  std::vector<double> states;
  for (const auto& d : passes) {
    const double s = d.value("/comm_state/seconds"_json_pointer, 0.0);
    if (!(s > 0) || !d.contains("collectives")) return passes;
    states.push_back(s);
  }
  if (states.size() < 2) return passes;
  const double ref = median(states);
  std::vector<json> out = passes;
  for (size_t i = 0; i < out.size(); ++i) {
    const double f = std::clamp(ref / states[i], 0.2, 5.0);
    for (auto& r : out[i].at("collectives")) {
      sim::CollectiveKind k;
      if (!sim::parse_collective_kind(r.value("kind", ""), k)) continue;  // ps_round: not a table
      for (const char* key : {"mean_s", "seconds", "min_s"})
        if (r.contains(key) && r.at(key).is_number()) r[key] = r.at(key).get<double>() * f;
      for (const char* key : {"reads_s", "rounds_s"})
        if (r.contains(key) && r.at(key).is_array())
          for (auto& x : r[key])
            if (x.is_number()) x = x.get<double>() * f;
    }
    out[i]["comm_state"]["seconds"] = ref;
    out[i]["normalized_to_state"] = ref;
  }
  return out;
}

std::optional<CommStateExponent> comm_state_exponent(const std::vector<json>& passes) {
  // One pass: (probe seconds, {(kind, bytes): mean over its rounds}).
  struct Pass {
    double state = 0;
    std::map<std::pair<std::string, double>, double> figures;
  };
  std::vector<Pass> ps;
  for (const auto& d : passes) {
    if (!d.contains("comm_state") || !d.contains("collectives")) continue;
    Pass p;
    p.state = num(d.at("comm_state"), "seconds");
    for (const auto& r : d.at("collectives")) {
      sim::CollectiveKind k;
      if (!sim::parse_collective_kind(r.value("kind", ""), k)) continue;  // ps_round: not a table
      const double t = priced_seconds(r);
      if (t > 0) p.figures[{r.at("kind").get<std::string>(), num(r, "bytes")}] = t;
    }
    if (p.state > 0 && !p.figures.empty()) ps.push_back(std::move(p));
  }
  double sxx = 0, sxy = 0;
  int pairs = 0;
  for (size_t a = 0; a < ps.size(); ++a)
    for (size_t b = a + 1; b < ps.size(); ++b) {
      const double x = std::log(ps[b].state / ps[a].state);
      for (const auto& [key, ta] : ps[a].figures) {
        auto it = ps[b].figures.find(key);
        if (it == ps[b].figures.end()) continue;
        sxx += x * x;
        sxy += x * std::log(it->second / ta);
        ++pairs;
      }
    }
  // Less than 1% between the passes' probes says nothing about the slope.
  if (pairs == 0 || sxx < pairs * std::pow(std::log(1.01), 2)) return std::nullopt;
  return CommStateExponent{std::clamp(sxy / sxx, 0.0, 1.0), pairs};
}

FitReport fit_profile(const json& compute_in, const std::vector<json>& comm, const std::string& backend,
                      const topology::ClusterSpec& cluster) {
  if (compute_in.value("schema", "") != "dptwin.microbench/1" || compute_in.value("mode", "") != "compute")
    bad("the first document is not a dptwin-microbench compute document");
  const json compute = normalized_to_speed(compute_in, probe_reference({compute_in}));
  FitReport rep;
  sim::DeviceProfile& p = rep.profile;
  p = sim::default_profile(cluster.device);
  json& diag = rep.diagnostics;
  diag["threads"] = compute.value("threads", 1);

  const json& d = compute.at("dispatch");
  const double launch_plain = num(d, "plain_s");
  // Autograd ops: the forward op records a node, backward runs it: per kernel on
  // average half of a (forward + backward) pair of the chain benchmark.
  const double launch = d.contains("backward_chain_s") ? num(d, "backward_chain_s") / 2 : num(d, "autograd_s");
  p.launch_overhead = Time::from_seconds(launch);
  p.step_overhead = Time::from_seconds(d.contains("backward_fixed_s") ? num(d, "backward_fixed_s") : 0);
  diag["dispatch"] = {{"plain_s", launch_plain}, {"launch_overhead_s", launch}};

  auto record = [&](const char* name, const CurveFit& f) {
    diag[name] = {{"max", f.curve.max}, {"half_work", f.curve.half_work}, {"table", f.curve.table}, {"peak", f.peak},
                  {"rms_rel_error", f.rms_rel_error}, {"samples", f.samples}};
  };
  // Dense matmul: fp32 fixes the fp32 peak and the curve; bf16 gets its own peak under the same curve.
  auto mm32 = rows_of(compute, {"matmul"}, "fp32", "flops");
  if (mm32.size() < 2) bad("fewer than two fp32 matmul samples");
  CurveFit mm = fit_efficiency_table(mm32, launch_plain, p.spec.fp32_peak.value(), true);
  p.spec.fp32_peak = FlopRate(mm.peak);
  p.matmul = mm.curve;
  record("matmul_fp32", mm);
  auto peak_under = [&](const std::vector<WorkSample>& xs, const sim::EfficiencyCurve& c) {
    std::vector<double> peaks;
    for (const auto& s : xs) peaks.push_back(s.work / (std::max(s.seconds - launch_plain, 0.05 * s.seconds) * c.at(s.work)));
    return median(peaks);
  };
  // bf16 GEMMs get their own measured table and peak (see DeviceProfile::matmul_half).
  auto mm16 = rows_of(compute, {"matmul"}, "bf16", "flops");
  if (mm16.size() >= 2) {
    CurveFit mh = fit_efficiency_table(mm16, launch_plain, p.spec.bf16_peak.value(), true);
    p.spec.bf16_peak = FlopRate(mh.peak);
    p.matmul_half = mh.curve;
    record("matmul_bf16", mh);
  } else if (!mm16.empty()) {
    p.spec.bf16_peak = FlopRate(peak_under(mm16, p.matmul));
  }
  // Batched matmul (attention) relative to the same peaks.
  auto bm32 = rows_of(compute, {"batched_matmul"}, "fp32", "flops");
  if (bm32.size() >= 2) {
    CurveFit bm = fit_efficiency_table(bm32, launch_plain, p.spec.fp32_peak.value(), false);
    p.batched_matmul = bm.curve;
    record("batched_matmul_fp32", bm);
    auto bm16 = rows_of(compute, {"batched_matmul"}, "bf16", "flops");
    if (bm16.size() >= 2) {
      CurveFit bh = fit_efficiency_table(bm16, launch_plain, p.spec.bf16_peak.value(), false);
      p.batched_matmul_half = bh.curve;
      record("batched_matmul_bf16", bh);
    }
  }
  // Memory-bound ops (elementwise, layernorm, softmax; both dtypes): bandwidth and curve.
  // fp32 only: O1 runs layernorm and softmax in fp32; the per-bin median over
  // op kinds (add, scale, tanh, layernorm, softmax) is the typical memory-class op.
  auto mem = rows_of(compute, {"elementwise", "layernorm", "softmax"}, "fp32", "bytes");
  if (mem.size() < 2) bad("fewer than two memory-bound samples");
  CurveFit mf = fit_efficiency_table(mem, launch_plain, p.spec.memory_bandwidth.value(), true);
  p.spec.memory_bandwidth = Bandwidth(mf.peak);
  p.memory = mf.curve;
  record("memory", mf);
  auto mem16 = rows_of(compute, {"elementwise", "layernorm", "softmax"}, "bf16", "bytes");
  if (!mem16.empty()) {
    CurveFit mh = fit_efficiency_table(mem16, launch_plain, mf.peak, false);
    p.memory_half = mh.curve;
    record("memory_half", mh);
  }

  // Fused activation (tanh-GELU) forward and backward, fp32 and bf16: its own
  // efficiency tables against the fp32 peak by FLOPs (compute bound on CPUs).
  for (auto [pass, dtype, curve, name] :
       {std::tuple{"forward", "fp32", &p.activation, "activation"},
        std::tuple{"backward", "fp32", &p.activation_backward, "activation_backward"},
        std::tuple{"forward", "bf16", &p.activation_half, "activation_half"},
        std::tuple{"backward", "bf16", &p.activation_half_backward, "activation_half_backward"}}) {
    std::vector<WorkSample> xs;
    for (const auto& r : compute.at("compute"))
      if (r.value("op", "") == "activation" && r.value("pass", "") == pass && r.value("dtype", "") == dtype)
        xs.push_back({num(r, "flops"), num(r, "seconds")});
    if (xs.size() < 2) continue;  // older documents: the op stays memory-priced
    CurveFit f = fit_efficiency_table(xs, launch_plain, p.spec.fp32_peak.value(), false);
    *curve = f.curve;
    record(name, f);
  }

  // AdamW: kernels per tensor from the dispatch-bound cases (small tensors).
  if (compute.contains("optimizer")) {
    std::vector<double> ks;
    for (const auto& r : compute.at("optimizer")) {
      const double per_tensor = num(r, "params") / num(r, "tensors");
      if (per_tensor <= 4096) ks.push_back(num(r, "seconds") / num(r, "tensors") / launch);
    }
    if (!ks.empty()) p.optimizer_kernels_per_tensor = std::clamp(static_cast<int>(std::lround(median(ks))), 1, 1000);
    // Bytes per parameter: the value whose per-tensor passes (the simulator's
    // own pricing on the memory curve fitted above) best match every AdamW case,
    // in squared log error; a log grid from 4 to 2,000 bytes.
    const json& cases = compute.at("optimizer");
    double best = p.optimizer_bytes_per_param, best_err = std::numeric_limits<double>::infinity();
    for (double b = 4; b <= 2000; b *= 1.02) {
      double err = 0;
      for (const auto& r : cases) {
        const double tensors = num(r, "tensors");
        const double per_tensor = b * num(r, "params") / tensors;
        const double pred = tensors * sim::tensor_pass_time(per_tensor, p.optimizer_kernels_per_tensor, p).seconds();
        err += std::pow(std::log(pred / num(r, "seconds")), 2);
      }
      if (err < best_err) best_err = err, best = b;
    }
    if (!cases.empty()) p.optimizer_bytes_per_param = best;
    diag["optimizer"] = {{"kernels_per_tensor", p.optimizer_kernels_per_tensor},
                         {"bytes_per_param", p.optimizer_bytes_per_param},
                         {"rms_log_error", cases.empty() ? 0.0 : std::sqrt(best_err / cases.size())}};
  }
  // O1 linears: a Conv1D forward + backward under bf16 autocast is three bf16
  // GEMMs plus the casts around them (fp32 weight and input to bf16, gradients
  // back to fp32); its time per GEMM gives the `matmul_o1` table against the
  // bf16 peak by per-GEMM FLOPs. The ratio to fp32 stays as a diagnostic.
  // Its fp32 pass, the same way against the fp32 peak, gives `matmul_linear`:
  // fp32 linears on one module's operands (warm, as in training) rather than the
  // GEMM table's pool of cold ones.
  if (compute.contains("autocast_linear")) {
    std::vector<WorkSample> o1, fp32;
    for (const auto& r : compute.at("autocast_linear")) {
      diag["autocast_linear_ratio"].push_back({{"shape", r.at("shape")}, {"o1_over_fp32", num(r, "o1_s") / num(r, "fp32_s")}});
      o1.push_back({num(r, "flops"), num(r, "o1_s") / 3});
      fp32.push_back({num(r, "flops"), num(r, "fp32_s") / 3});
    }
    if (o1.size() >= 2) {
      CurveFit f = fit_efficiency_table(o1, launch_plain, p.spec.bf16_peak.value(), false);
      p.matmul_o1 = f.curve;
      record("matmul_o1", f);
      CurveFit g = fit_efficiency_table(fp32, launch_plain, p.spec.fp32_peak.value(), false);
      p.matmul_linear = g.curve;
      record("matmul_linear", g);
    }
  }
  // The speed probe around the compute suite (geometric mean of before and
  // after): the machine's speed these figures belong to (drift compensation).
  if (compute.contains("normalized_to")) {
    // Every figure is at the probe readings' median speed: that is the reference.
    const json& n = compute.at("normalized_to");
    auto at = [&](const char* k) { return n.contains(k) ? n.at(k).get<double>() : 0.0; };
    p.speed_reference = {at("matmul"), at("elementwise"), at("dispatch"), at("matmul_bf16"),
                         elementwise_probe_form(compute)};
    diag["speed_reference"] = n;
    // ... and the readings' spread around it: a step of N ranks runs at its slowest core's pace.
    p.speed_states = speed_states(compute, n.get<SpeedReference>());
    const sim::SpeedStates& s = p.speed_states;
    for (const char* k : sim::SpeedStates::kClasses)
      if (const auto* q = s.of(k); !q->empty())
        diag["speed_states_slowest_of"][k] = {sim::expected_slowest(*q, 1), sim::expected_slowest(*q, 2),
                                              sim::expected_slowest(*q, 4)};
  } else if (compute.contains("speed_reference")) {
    const json& sr = compute.at("speed_reference");
    auto both = [&](const char* k) {
      double prod = 1;
      int count = 0;
      for (const char* when : {"start", "end"})
        if (sr.contains(when)) prod *= num(sr.at(when), k), ++count;
      return count ? std::pow(prod, 1.0 / count) : 0.0;
    };
    p.speed_reference = {both("matmul_s"), both("elementwise_s"), both("dispatch_s"), 0.0,
                         elementwise_probe_form(compute)};
    diag["speed_reference"] = sr;
  }
  if (compute.contains("memcpy") && !compute.at("memcpy").empty()) {
    const json& big = compute.at("memcpy").back();
    p.host_memcpy = Bandwidth(num(big, "bytes") / num(big, "seconds"));
  }

  // Core sharing and overlap from the comm documents' probes.
  const json* solo = compute.contains("concurrency") ? &compute.at("concurrency") : nullptr;
  std::map<int, double> sharing;
  if (solo) sharing[1] = 1.0;
  double overlap = -1;
  // The overlap probe's stall by rank count: how much of an allreduce in flight
  // waits for its ranks' compute (see DeviceProfile::comm_stall_by_ranks).
  std::map<int, double> stall_by_ranks, stall_one_by_ranks;
  std::map<int, double> loop_by_ranks;
  std::map<int, sim::DeviceProfile::SyncCost> sync_by_ranks;
  std::map<int, double> rank_skew;  // speed_states.rank_skew by ranks
  int skew_cores = 0;               // the cores of the comm runs that measured it
  std::map<int, std::map<int, double>> skeleton_burst;  // ranks -> matmuls -> burst_s
  std::map<int, std::map<int, double>> skeleton_cycle;  // ranks -> matmuls -> cycle_s
  std::map<int, std::pair<int, double>> skeleton_alone;  // ranks -> (matmuls, burst with one rank per core bursting)
  std::map<int, std::pair<int, double>> skeleton_sharing;  // ranks -> (ranks bursting, burst ratio), one run
  std::map<int, double> comm_reference;  // ranks -> the comm-state probe's seconds
  int overlap_ranks = 1 << 30;
  rep.profile.network.clear();
  auto topo_for = [&](int n) { return topology::build_topology(cluster, n); };
  json& ndiag = diag["network"] = json::array();
  for (const json& doc : comm) {
    if (doc.value("schema", "") != "dptwin.microbench/1" || doc.value("mode", "") != "comm")
      bad("a comm document is not a dptwin-microbench comm document");
    if (doc.value("backend", "") != backend) continue;
    const int n = doc.value("ranks", 1);
    if (solo && doc.contains("concurrency")) {
      const json& c = doc.at("concurrency");
      // Loop time of the same matmul / add / dispatch probes on n ranks at once vs
      // the compute run's single process. (The comm run's back-to-back
      // `sharing_factor` probe is kept as a diagnostic: on this 2-vCPU machine it
      // reads ~2x at 2 ranks where training runs show ~1.35x; see README.)
      const double f = (num(c, "matmul_s") / num(*solo, "matmul_s") + num(c, "elementwise_s") / num(*solo, "elementwise_s") +
                        num(c, "dispatch_s") / num(*solo, "dispatch_s")) / 3.0;
      if (c.contains("sharing_factor")) diag["sharing_probe"][std::to_string(n)] = num(c, "sharing_factor");
      sharing[n] = std::max(1.0, f);
    }
    if (doc.contains("overlap") && n < overlap_ranks) {
      const json& o = doc.at("overlap");
      // The median of paired ratios where the probe has it (less noisy than a
      // ratio of two medians: two calibrations in a row read 0.42 and 0.69).
      overlap = std::max(0.0, o.contains("slowdown") ? num(o, "slowdown")
                                                     : num(o, "compute_with_comm_s") / num(o, "compute_alone_s") - 1.0);
      overlap_ranks = n;
    }
    for (auto [field, by, probe] : {std::tuple{"stall", &stall_by_ranks, "comm_stall_probe"},
                                    std::tuple{"stall_one", &stall_one_by_ranks, "comm_stall_one_probe"}})
      if (doc.contains("overlap") && doc.at("overlap").contains(field)) {
        (*by)[n] = std::clamp(num(doc.at("overlap"), field), 0.0, 1.0);
        diag[probe][std::to_string(n)] = (*by)[n];
      }
    if (doc.contains("horovod_loop")) {
      const json& h = doc.at("horovod_loop");
      diag["background_loop_probe"][std::to_string(n)] = num(h, "slowdown");
      loop_by_ranks[n] = std::clamp(num(h, "slowdown"), 0.0, 10.0);
      diag["negotiation_probe_s"][std::to_string(n)] = num(h, "negotiation_s");
      // The negotiation while the ranks compute (diagnostic; see validate/README,
      // known gap 6): its median and trimmed mean.
      if (h.contains("negotiation_busy_mean_s"))
        diag["negotiation_busy_probe_s"][std::to_string(n)] = {{"median", num(h, "negotiation_busy_s")},
                                                               {"trimmed_mean", num(h, "negotiation_busy_mean_s")}};
    }
    if (doc.contains("sync") && n > 1) {
      // The step-skeleton probe (exec/microbench: bench_sync), two burst lengths.
      // The simulator delays a collective where the ranks meet (none
      // computing) by lag x (W / 100 ms)^0.5 (a random walk: each scheduler slice adds an
      // independent deviation; the exponent the two bursts imply is only
      // recorded, two noisy medians cannot pin it) and adds `latency` to each
      // collective entered from compute.
      // In the skeleton two of its three collectives follow compute (the mask
      // broadcast the optimizer stand-in, the allreduce the burst), so
      // `latency` is half the skeleton's extra time over the same collectives
      // alone, less the spread of the bursts' starts: a rank that leaves the
      // scalar broadcast late (its wake-up waits for a core) arrives late at
      // the allreduce, which the lag already prices. At 4 ranks on 2 cores that
      // late start is most of the extra time (4-5 of 7-10 ms an iteration).
      // Documents without the figure: the whole extra time.
      const json& y = doc.at("sync");
      if (!y.contains("skeletons") || !y.at("skeletons").is_array() || y.at("skeletons").empty())
        bad("a sync probe without skeletons");
      double lag = 0, latency = 0;
      std::vector<std::pair<double, double>> bursts;  // (burst, skew)
      for (const json& k : y.at("skeletons")) {
        // The skew's trimmed mean where the document has it: the skew is
        // bimodal (a rank held for a scheduler tick or not), and the median
        // jumps between the modes from one calibration to the next (4-rank long
        // burst, five runs in a row: medians 4.7-13.3 ms, means 6.4-11.4 ms).
        const double burst = num(k, "burst_s"),
                     skew = std::max(0.0, num(k, k.contains("arrival_skew_mean_s") ? "arrival_skew_mean_s" : "arrival_skew_s"));
        if (burst <= 0) bad("a sync skeleton with a non-positive burst");
        lag += skew * std::sqrt(0.1 / burst);
        skeleton_burst[n][k.value("matmuls", 0)] = burst;
        if (k.contains("cycle_s")) skeleton_cycle[n][k.value("matmuls", 0)] = num(k, "cycle_s");
        latency += std::max(0.0, num(k, k.contains("extra_less_spread_s") ? "extra_less_spread_s" : "extra_s")) / 2.0;
        bursts.emplace_back(burst, skew);
      }
      if (y.contains("core_sharing")) {
        const json& cs = y.at("core_sharing");
        // The pairs' 10% trimmed mean where the document has it: single pairs
        // read 1.24-2.44 at 4 ranks on 2 cores (four runs of 24 pairs in a row:
        // medians 1.70-1.80), and a median of such a spread moves more than a mean.
        skeleton_sharing[n] = {std::max(1, cs.value("ranks_bursting", 1)),
                               num(cs, cs.contains("ratio_trimmed_mean") ? "ratio_trimmed_mean" : "ratio")};
        if (cs.contains("burst_one_per_core_s") && cs.contains("matmuls"))
          skeleton_alone[n] = {cs.value("matmuls", 0), num(cs, "burst_one_per_core_s")};
      }
      const double m = static_cast<double>(bursts.size());
      sim::DeviceProfile::SyncCost c;
      c.ranks = n;
      c.lag = Time::from_seconds(std::min(lag / m, 1.0));
      c.exponent = 0.5;
      c.latency = Time::from_seconds(std::min(latency / m, 1.0));
      // A core per rank: the skew grows in proportion to the burst (the
      // cores' speed difference), not as a random walk, and which core is
      // slower is the host's state (SpeedStates::rank_skew). Over the 42
      // 2-rank passes of bench/corpus a fit skew = a b + c sqrt(b) to the
      // two bursts gave a > 0 in every one and c <= 0 in 12; the pass-to-pass
      // change followed the compute passes' core levels (rsb11: the first
      // calibration's core 0 40% slower on dispatch, skew 1.6-2.1 ms after a
      // 39 ms burst against 0.3-0.8 ms in the next). The fraction is the
      // least-squares a of skew = a b through the origin, clamped to [0, 1].
      // "A core per rank" as for the sharing figures below (ranks x threads
      // <= cores); unbound ranks that fit count too (the scheduler keeps
      // two ranks on two cores apart: nn30's 2-rank fractions 3.8% / 2.7%).
      const int cores = doc.value("cores", 0), threads = std::max(1, doc.value("threads", 1));
      double sbb = 0, sbs = 0;
      for (auto [b, s] : bursts) sbb += b * b, sbs += b * s;
      if (n * threads <= cores && bursts.size() >= 2 && sbb > 0) {
        rank_skew[n] = std::clamp(sbs / sbb, 0.0, 1.0);
        skew_cores = cores;
        c.lag = Time::zero();
        diag["rank_skew"][std::to_string(n)] = {{"fraction", rank_skew[n]},
                                                {"random_walk_lag_s", std::min(lag / m, 1.0)}};
      }
      sync_by_ranks[n] = c;
      diag["sync_probe"][std::to_string(n)] = y;
      if (bursts.size() >= 2 && bursts.front().second > 0 && bursts.back().second > 0 &&
          bursts.back().first != bursts.front().first)
        diag["sync_probe_exponent"][std::to_string(n)] =
            std::log(bursts.back().second / bursts.front().second) / std::log(bursts.back().first / bursts.front().first);
    }
    if (n < 2) continue;
    if (doc.contains("comm_state")) {
      // The comm-state probe's median reading over the run: the state the
      // tables below were measured in (DeviceProfile::comm_reference).
      const double s = num(doc.at("comm_state"), "seconds");
      if (s > 0) comm_reference[n] = s;
      // How far the tables followed it from pass to pass (calibrate's
      // comm_state_exponent): a diagnostic, too unsteady to price with.
      if (doc.at("comm_state").contains("exponent_fit"))
        diag["comm_state_exponent"][std::to_string(n)] = {{"exponent", num(doc.at("comm_state"), "exponent_fit")},
                                                          {"points", doc.at("comm_state").value("exponent_pairs", 0)}};
      diag["comm_state_probe"][std::to_string(n)] = doc.at("comm_state");
    }
    const topology::Topology topo = topo_for(n);
    std::map<sim::CollectiveKind, std::vector<CommSample>> by_kind;
    for (const auto& r : doc.at("collectives")) {
      sim::CollectiveKind k;
      if (!sim::parse_collective_kind(r.value("kind", ""), k)) continue;  // ps_round etc.: diagnostics only
      // The mean of the rounds' medians where the document has it: with ranks
      // time-sliced on shared cores a round lands in one of two modes (4-rank
      // reduce of 256 KiB: 2.0 ms in one calibration's rounds, 5.3 ms in the
      // next's), and the median of three rounds picks a mode. Refitting rb15's
      // two calibrations both ways: 21.4% -> 15.7% apart at one state.
      by_kind[k].push_back(nominal_comm(topo, k, algorithm_for(k), n, num(r, "bytes"), priced_seconds(r)));
    }
    for (auto& [k, samples] : by_kind) {
      const std::string kind = sim::to_string(k);
      RegimeFit f = fit_comm_regimes(samples);
      sim::CommCalibration c;
      c.collective = kind;
      c.ranks = n;
      c.regimes = f.regimes;
      c.algorithm = algorithm_for(k);
      p.network.push_back(c);
      json regs = json::array();
      for (const auto& g : f.regimes)
        regs.push_back({{"up_to", g.up_to}, {"alpha_s", g.alpha.seconds()}, {"bandwidth_factor", g.bandwidth_factor},
                        {"measured", {g.measured_from, g.measured_to}}});
      ndiag.push_back({{"collective", kind}, {"ranks", n}, {"samples", samples.size()},
                       {"rms_rel_error", f.rms_rel_error}, {"regimes", regs}});
    }
  }
  if (overlap >= 0) p.overlap_slowdown = std::min(overlap, 10.0);
  p.comm_reference.assign(comm_reference.begin(), comm_reference.end());
  p.comm_stall_by_ranks.assign(stall_by_ranks.begin(), stall_by_ranks.end());
  p.comm_stall_one_by_ranks.assign(stall_one_by_ranks.begin(), stall_one_by_ranks.end());
  // The Horovod-loop probe by rank count: the compute mix with and without a
  // loop doing a small allreduce every cycle on its own channel. Here it reads
  // +43% / +29% at 2 / 4 ranks where horovod training's forward + backward run
  // 1.1-1.4x dps's in the same validation runs.
  // Core sharing: ranks x threads time-share the machine's cores, factor
  // max(1, ranks·threads / cores) for that many compute tasks running at
  // once. The simulator applies it task by task, only while the tasks overlap
  // (SharingMode::ByExecutor), so the factor is the time-slicing one.
  //
  // Until 2026-12-05 the factor beyond the cores came from the step
  // skeleton's bursts (every rank bursting vs two; 1.56-1.93 at 4 ranks on 2
  // cores over the calibrations here): a whole-burst ratio, which includes the
  // bursts' partial overlap that the executor prices a second time. Such a
  // profile put 4-rank compute 8% under training's forward + backward (vd39,
  // median) and the 4-rank steps 14.5% low. The skeleton's figures and the
  // tight-loop probe stay diagnostics (host_sharing_skeleton, host_sharing_probe).
  const int cores = std::max(1, compute.value("cores", 1));
  const int threads = std::max(1, compute.value("threads", 1));
  auto slices = [&](int n) { return std::max(1.0, static_cast<double>(n) * threads / cores); };
  int per_core = 0;  // the largest skeleton rank count with a core per rank
  for (const auto& [n, b] : skeleton_burst)
    if (n * threads <= cores) per_core = n;
  for (auto& [n, f] : sharing) {
    const std::string key = std::to_string(n);
    diag["host_sharing_probe"][key] = f;
    f = slices(n);
    if (f <= 1.0) continue;
    // The skeleton's reading: the n-rank run's own pairs, else the burst at n
    // ranks over the burst at the largest count with a core per rank.
    if (auto it = skeleton_sharing.find(n); it != skeleton_sharing.end() && it->second.second > 0) {
      diag["host_sharing_skeleton"][key] = it->second.second * slices(it->second.first);
      continue;
    }
    if (per_core == 0 || !skeleton_burst.count(n)) continue;
    const auto& mine = skeleton_burst.at(n);
    const auto& ref = skeleton_burst.at(per_core);
    for (auto it = mine.rbegin(); it != mine.rend(); ++it)
      if (auto r = ref.find(it->first); r != ref.end() && r->second > 0) {
        diag["host_sharing_skeleton"][key] = it->second / r->second * slices(per_core);
        break;
      }
  }
  p.host_sharing.assign(sharing.begin(), sharing.end());
  if (p.host_sharing.size() < 2) p.host_sharing.clear();
  diag["overlap_slowdown"] = p.overlap_slowdown;
  if (!loop_by_ranks.empty()) {
    p.background_loop_by_ranks.assign(loop_by_ranks.begin(), loop_by_ranks.end());
    p.background_loop_slowdown = p.background_loop_by_ranks.front().second;
  }
  diag["background_loop_slowdown"] = p.background_loop_slowdown;
  // With more ranks than cores, the latency the simulator needs beside the
  // measured lag to run the step skeleton in its measured cycles
  // (fit_sync_to_cycles; sync_fit.hpp says why), where the documents have
  // cycles and a skeleton with a core per rank; else, and where every rank has
  // a core, the probe's components above.
  for (auto& [n, cost] : sync_by_ranks) {
    const std::string key = std::to_string(n);
    diag["rank_sync_components"][key] = {{"lag_s", cost.lag.seconds()}, {"latency_s", cost.latency.seconds()}};
    if (n * threads <= cores || per_core == 0) continue;
    const auto cycles = skeleton_cycle.find(n);
    const auto alone = skeleton_burst.find(per_core);
    if (cycles == skeleton_cycle.end() || alone == skeleton_burst.end()) continue;
    // A burst alone: the skeleton with a core per rank's; rescaled, where the
    // n-rank run has one, to that run's own burst with one rank per core
    // bursting (core_sharing), which read the machine in the same minutes as
    // the cycles: two calibrations in a row read the 2-rank bursts 3% apart
    // and their 4-rank runs' 0.02% apart (rsb5), and a burst 3% off moves
    // the fitted lag by a third.
    double scale = 1;
    if (const auto same = skeleton_alone.find(n); same != skeleton_alone.end())
      if (const auto ref = alone->second.find(same->second.first); ref != alone->second.end() && ref->second > 0 &&
                                                                 same->second.second > 0)
        scale = same->second.second / ref->second;
    std::vector<std::pair<sim::SyncSkeleton, double>> probes;  // skeleton, measured cycle
    for (const auto& [matmuls, cycle] : cycles->second) {
      const auto b = alone->second.find(matmuls);
      if (b == alone->second.end() || !(b->second > 0) || !(cycle > 0)) continue;
      sim::SyncSkeleton sk;
      sk.ranks = n;
      sk.burst = Time::from_seconds(b->second * scale);
      sk.optimizer = skeleton_optimizer(p);
      probes.emplace_back(sk, cycle);
    }
    if (probes.empty()) continue;
    const topology::Topology topo = topo_for(n);
    const SyncCycleFit f = fit_sync_to_cycles(p, topo, probes, cost);
    json sk = json::array();
    const auto with_components = simulated_sync_cycles(p, topo, probes, cost);
    for (size_t i = 0; i < probes.size(); ++i)
      sk.push_back({{"burst_alone_s", probes[i].first.burst.seconds()},
                    {"measured_cycle_s", probes[i].second},
                    {"simulated_cycle_components_s", with_components[i]},
                    {"simulated_cycle_s", f.simulated_s[i]}});
    diag["sync_cycle_fit"][key] = {{"skeletons", sk},
                                   {"rms_rel_error", f.rms_rel_error},
                                   {"burst_scale", scale},
                                   {"latency_at_zero", f.cost.latency == Time::zero()}};
    cost = f.cost;
  }
  p.speed_states.rank_skew.assign(rank_skew.begin(), rank_skew.end());
  if (p.speed_states.cores == 0) p.speed_states.cores = skew_cores;  // compute documents without probe readings
  p.sync_by_ranks.clear();
  for (const auto& [n, c] : sync_by_ranks) {
    p.sync_by_ranks.push_back(c);
    diag["rank_sync"].push_back(
        {{"ranks", n}, {"lag_s", c.lag.seconds()}, {"exponent", c.exponent}, {"latency_s", c.latency.seconds()}});
  }
  diag["host_sharing"] = json::array();
  for (auto [r, f] : p.host_sharing) diag["host_sharing"].push_back({{"ranks", r}, {"factor", f}});
  return rep;
}

namespace {
std::string fmt_time(Time t) { return fmt::format("{:.4g} us", t.seconds() * 1e6); }
}  // namespace

std::string profile_yaml(const sim::DeviceProfile& p, const std::string& name, const std::string& source,
                         const std::string& backend) {
  std::string y;
  y += fmt::format("# dptwin device profile, fitted by `dptwin calibrate` from microbenchmarks only.\n");
  y += fmt::format("# Use it as `calibration: {}.yaml` in a scenario or with --profile.\n", name);
  y += fmt::format("name: {}\n", name);
  y += fmt::format("description: \"{} on {} (backend {})\"\n", p.spec.name, source, backend);
  y += fmt::format("source: \"{}\"\n", source);
  if (const auto& w = p.calibrated_with; !w.empty())
    y += fmt::format("calibrated_with: {{threads: {}, bind: {}, backend: {}, cluster: \"{}\"}}   # how its ranks ran\n",
                     w.threads, w.bind, w.backend, w.cluster);
  y += "device:\n";
  y += fmt::format("  fp32_peak: {:.6g} GFLOP/s\n", p.spec.fp32_peak.value() / 1e9);
  y += fmt::format("  bf16_peak: {:.6g} GFLOP/s\n", p.spec.bf16_peak.value() / 1e9);
  y += fmt::format("  memory_bandwidth: {:.6g} GB/s\n", p.spec.memory_bandwidth.value() / 1e9);
  auto curve = [&](const char* k, const sim::EfficiencyCurve& c) {
    if (c.table.empty()) {
      y += fmt::format("  {}: {{max: {:.6g}, half_work: {:.6g}}}\n", k, c.max, c.half_work);
      return;
    }
    y += fmt::format("  {}:\n    table:                # [work (FLOPs or bytes), efficiency]\n", k);
    for (auto [w, e] : c.table) y += fmt::format("      - [{:.6g}, {:.6g}]\n", w, e);
  };
  curve("matmul", p.matmul);
  curve("batched_matmul", p.batched_matmul);
  curve("memory", p.memory);
  if (!p.memory_half.table.empty()) curve("memory_half", p.memory_half);
  if (!p.matmul_half.table.empty()) curve("matmul_half", p.matmul_half);
  if (!p.batched_matmul_half.table.empty()) curve("batched_matmul_half", p.batched_matmul_half);
  if (!p.matmul_o1.table.empty()) curve("matmul_o1", p.matmul_o1);
  if (!p.matmul_linear.table.empty()) curve("matmul_linear", p.matmul_linear);
  for (auto [k, c] : {std::pair{"activation", &p.activation}, std::pair{"activation_backward", &p.activation_backward},
                      std::pair{"activation_half", &p.activation_half},
                      std::pair{"activation_half_backward", &p.activation_half_backward}})
    if (!c->table.empty()) curve(k, *c);
  y += fmt::format("  launch_overhead: {}\n", fmt_time(p.launch_overhead));
  y += fmt::format("  step_overhead: {}\n", fmt_time(p.step_overhead));
  y += fmt::format("  overlap_slowdown: {:.4g}\n", p.overlap_slowdown);
  if (p.background_loop_by_ranks.empty()) {
    y += fmt::format("  background_loop_slowdown: {:.4g}\n", p.background_loop_slowdown);
  } else {
    y += "  background_loop_slowdown:   # by ranks on the machine\n";
    for (auto [r, x] : p.background_loop_by_ranks) y += fmt::format("    - {{ranks: {}, slowdown: {:.4g}}}\n", r, x);
  }
  for (const auto& [key, list, what] :
       {std::tuple{"comm_stall", &p.comm_stall_by_ranks, "the share of a collective that waits while its ranks compute, by ranks on the machine"},
        std::tuple{"comm_stall_one", &p.comm_stall_one_by_ranks, "the same while one rank computes and the others idle"}}) {
    if (list->empty()) continue;
    y += fmt::format("  {}:   # {}\n", key, what);
    for (auto [r, x] : *list) y += fmt::format("    - {{ranks: {}, stall: {:.3g}}}\n", r, x);
  }
  if (!p.sync_by_ranks.empty()) {
    y += "  rank_sync:   # the slowest rank's lag after 100 ms of compute, its growth, extra collective latency\n";
    for (const auto& c : p.sync_by_ranks)
      y += fmt::format("    - {{ranks: {}, lag: {}, exponent: {:.3g}, latency: {}}}\n", c.ranks, fmt_time(c.lag), c.exponent,
                       fmt_time(c.latency));
  }
  y += fmt::format("  optimizer_kernels_per_tensor: {}\n", p.optimizer_kernels_per_tensor);
  y += fmt::format("  optimizer_bytes_per_param: {:.4g}\n", p.optimizer_bytes_per_param);
  y += fmt::format("  host_memcpy: {:.6g} GB/s\n", p.host_memcpy.value() / 1e9);
  if (!p.host_sharing.empty()) {
    y += "  host_sharing:\n";
    for (auto [r, f] : p.host_sharing) y += fmt::format("    - {{ranks: {}, factor: {:.4g}}}\n", r, f);
  }
  if (p.ranks_share_machine) y += "  ranks_share_machine: true\n";
  if (!p.speed_reference.empty())
    y += fmt::format(
        "  speed_reference: {{matmul: {}, {}elementwise: {}, elementwise_form: {}, dispatch: {}}}   # the machine's speed "
        "meanwhile\n",
        fmt_time(Time::from_seconds(p.speed_reference.matmul_s)),
        p.speed_reference.matmul_bf16_s > 0
            ? fmt::format("matmul_bf16: {}, ", fmt_time(Time::from_seconds(p.speed_reference.matmul_bf16_s)))
            : std::string(),
        fmt_time(Time::from_seconds(p.speed_reference.elementwise_s)), p.speed_reference.elementwise_form,
        fmt_time(Time::from_seconds(p.speed_reference.dispatch_s)));
  if (!p.speed_states.empty() || !p.speed_states.rank_skew.empty()) {
    const sim::SpeedStates& s = p.speed_states;
    y += "  speed_states:   # the probe readings' quantiles / speed_reference; a step of N ranks runs at its slowest core's pace\n";
    if (s.cores > 0) y += fmt::format("    cores: {}\n", s.cores);
    for (const char* k : sim::SpeedStates::kClasses) {
      const std::vector<double>* q = s.of(k);
      if (q->empty()) continue;
      std::vector<std::string> xs;
      for (double x : *q) xs.push_back(fmt::format("{:.4g}", x));
      y += fmt::format("    {}: [{}]\n", k, fmt::join(xs, ", "));
    }
    if (!s.rank_skew.empty()) {
      y += "    rank_skew:   # N ranks with a core each: the last arrives this fraction of its compute after the mean one\n";
      for (auto [n, f] : s.rank_skew) y += fmt::format("      - {{ranks: {}, fraction: {:.4g}}}\n", n, f);
    }
  }
  if (!p.network.empty()) {
    y += "network:\n";
    y += fmt::format("  backend: {}\n", backend);
    if (!p.comm_reference.empty()) {
      y += "  state_reference:   # a 4 KiB allreduce meanwhile, by ranks (the host's communication state);"
           " exponent, where set: how far the tables follow it (1 without)\n";
      for (auto [n, s] : p.comm_reference) {
        auto e = std::find_if(p.comm_state_exponent.begin(), p.comm_state_exponent.end(),
                              [n = n](const auto& x) { return x.first == n; });
        const std::string b = e != p.comm_state_exponent.end() ? fmt::format(", exponent: {:.3f}", e->second) : "";
        y += fmt::format("    - {{ranks: {}, allreduce_4k: {}{}}}\n", n, fmt_time(Time::from_seconds(s)), b);
      }
    }
    y += "  tables:\n";
    for (const auto& t : p.network) {
      y += fmt::format("    - collective: {}\n", t.collective.empty() ? "\"\"" : t.collective);
      if (!t.link_kind.empty()) y += fmt::format("      link_kind: {}\n", t.link_kind);
      if (t.ranks > 0) y += fmt::format("      ranks: {}\n", t.ranks);
      if (t.algorithm) y += fmt::format("      algorithm: {}   # the regimes' alphas are per step of it\n", sim::to_string(*t.algorithm));
      y += "      regimes:\n";
      for (const auto& g : t.regimes) {
        y += "        - {";
        if (g.up_to > 0) y += fmt::format("up_to: {:.0f}, ", g.up_to);
        y += fmt::format("alpha: {}, bandwidth_factor: {:.6g}", fmt_time(g.alpha), g.bandwidth_factor);
        if (g.measured_from > 0) y += fmt::format(", measured: [{:.0f}, {:.0f}]", g.measured_from, g.measured_to);
        y += "}\n";
      }
    }
  }
  return y;
}

}  // namespace dptwin::validate
