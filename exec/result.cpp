// exec/result.cpp — see result.hpp.
#include "exec/result.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace dptwin::exec {
namespace {

using json = nlohmann::json;

double ns_to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Per (rank, step): seconds per compute phase, comm busy time, comm bytes.
struct StepPhases {
  std::map<std::string, double> compute;  // forward, backward, wait, optimizer, data, step
  double comm_s = 0;
  int64_t comm_bytes = 0;
  int comm_ops = 0;
  int64_t step_end_ns = -1;  // end of the rank's "step" span (the ranks' common clock)
};

std::map<int, StepPhases> phases_of(const RankReport& r) {
  std::map<int, StepPhases> out;
  for (const auto& s : r.spans) {
    if (s.step < 0) continue;
    auto& p = out[s.step];
    const double d = ns_to_s(s.end_ns - s.start_ns);
    if (s.stream == "comm") {
      p.comm_s += d;
      p.comm_bytes += s.bytes;
      ++p.comm_ops;
    } else {
      p.compute[s.name] += d;
      if (s.name == "step") p.step_end_ns = std::max(p.step_end_ns, s.end_ns);
    }
  }
  return out;
}

// The last rank's end of `step` (-1 when a rank did not record it).
int64_t last_end_ns(const std::vector<std::map<int, StepPhases>>& phases, int step) {
  int64_t end = -1;
  for (const auto& ph : phases) {
    const auto it = ph.find(step);
    if (it == ph.end() || it->second.step_end_ns < 0) return -1;
    end = std::max(end, it->second.step_end_ns);
  }
  return end;
}

}  // namespace

json to_json(const RankReport& r) {
  json steps = json::array();
  for (const auto& s : r.steps)
    steps.push_back({{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm}, {"skipped", s.skipped}});
  json spans = json::array();
  for (const auto& s : r.spans)
    spans.push_back({s.name, s.stream, s.step, s.launch_ns, s.start_ns, s.end_ns, s.bytes});
  return {{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"peak_rss_bytes", r.peak_rss_bytes},
          {"device_peak_bytes", r.device_peak_bytes},
          {"param_checksum", r.param_checksum}, {"steps", steps}, {"spans", spans}};
}

RankReport rank_report_from_json(const json& j) {
  RankReport r;
  r.rank = j.at("rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.pid = j.at("pid").get<int>();
  r.peak_rss_bytes = j.at("peak_rss_bytes").get<int64_t>();
  r.device_peak_bytes = j.value("device_peak_bytes", int64_t{0});
  r.param_checksum = j.at("param_checksum").get<double>();
  for (const auto& s : j.at("steps"))
    r.steps.push_back({s.at("step").get<int>(), s.at("loss").get<double>(), s.at("lr").get<double>(),
                       s.at("grad_norm").get<double>(), s.at("skipped").get<bool>()});
  for (const auto& s : j.at("spans")) {
    Span sp;
    sp.name = s[0].get<std::string>();
    sp.stream = s[1].get<std::string>();
    sp.step = s[2].get<int>();
    sp.launch_ns = s[3].get<int64_t>();
    sp.start_ns = s[4].get<int64_t>();
    sp.end_ns = s[5].get<int64_t>();
    sp.bytes = s[6].get<int64_t>();
    r.spans.push_back(std::move(sp));
  }
  return r;
}

Stats compute_stats(std::vector<double> xs) {
  Stats s;
  s.n = static_cast<int>(xs.size());
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  s.min = xs.front();
  s.max = xs.back();
  s.median = quantile(xs, 0.5);
  s.p10 = quantile(xs, 0.1);
  s.p90 = quantile(xs, 0.9);
  s.mean = std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
  double var = 0;
  for (double x : xs) var += (x - s.mean) * (x - s.mean);
  s.stdev = xs.size() > 1 ? std::sqrt(var / static_cast<double>(xs.size() - 1)) : 0.0;
  return s;
}

json to_json(const Stats& s) {
  return {{"median", s.median}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
          {"p10", s.p10},       {"p90", s.p90},   {"stdev", s.stdev}, {"n", s.n}};
}

json make_result(const RunInfo& info, const std::vector<RankReport>& reports) {
  std::vector<std::map<int, StepPhases>> phases;
  for (const auto& r : reports) phases.push_back(phases_of(r));
  const size_t n_steps = reports.empty() ? 0 : reports[0].steps.size();

  // A step's time is the time between the moments the last rank finished the
  // step before and this one: the period at which the job completes steps,
  // the figure the simulator predicts and throughput follows. A rank's own
  // span (data to zero_grad) can be longer: ranks time-sharing cores stagger,
  // one that waits for a core before its optimizer starts its next step late
  // and runs it shorter, so the largest span of a step overstates the period
  // (4 ranks on 2 cores: tiny Horovod 34.8 ms largest span, 28.2 ms period).
  // The largest span stays in the result as step_span_s; a step without a
  // recorded predecessor (the first of a run) is timed by it.
  json steps = json::array();
  std::vector<double> step_times, step_spans, losses;
  std::map<std::string, std::vector<double>> phase_samples;  // mean over ranks, measured steps
  for (size_t k = 0; k < n_steps; ++k) {
    const int step = reports[0].steps[k].step;
    double loss = 0, step_span = 0;
    json per_rank = json::array();
    std::map<std::string, double> phase_sum;
    for (size_t r = 0; r < reports.size(); ++r) {
      if (k < reports[r].steps.size()) loss += reports[r].steps[k].loss;
      const auto it = phases[r].find(step);
      StepPhases p = it == phases[r].end() ? StepPhases{} : it->second;
      step_span = std::max(step_span, p.compute["step"]);
      json pr = {{"rank", reports[r].rank}, {"comm_s", p.comm_s}, {"comm_bytes", p.comm_bytes}, {"comm_ops", p.comm_ops}};
      for (const char* name : {"step", "data", "forward", "backward", "wait", "optimizer"}) {
        pr[std::string(name) + "_s"] = p.compute[name];
        phase_sum[name] += p.compute[name];
      }
      phase_sum["comm"] += p.comm_s;
      per_rank.push_back(pr);
    }
    loss /= static_cast<double>(reports.size());
    losses.push_back(loss);
    const int64_t end = last_end_ns(phases, step), prev_end = last_end_ns(phases, step - 1);
    const double step_time = end >= 0 && prev_end >= 0 && end > prev_end ? ns_to_s(end - prev_end) : step_span;
    const auto& s0 = reports[0].steps[k];
    steps.push_back({{"step", step}, {"loss", loss}, {"lr", s0.lr}, {"grad_norm", s0.grad_norm},
                     {"skipped", s0.skipped}, {"step_time_s", step_time}, {"step_span_s", step_span},
                     {"measured", step >= info.warmup_steps}, {"ranks", per_rank}});
    if (step >= info.warmup_steps) {
      step_times.push_back(step_time);
      step_spans.push_back(step_span);
      for (const auto& [name, v] : phase_sum) phase_samples[name].push_back(v / static_cast<double>(reports.size()));
    }
  }

  const Stats st = compute_stats(step_times);
  json summary;
  summary["measured_steps"] = st.n;
  summary["step_time_s"] = to_json(st);
  summary["step_span_s"] = to_json(compute_stats(step_spans));
  summary["tokens_per_step"] = info.tokens_per_step;
  summary["tokens_per_s"] = st.median > 0 ? static_cast<double>(info.tokens_per_step) / st.median : 0.0;
  summary["tokens_per_s_mean"] = st.mean > 0 ? static_cast<double>(info.tokens_per_step) / st.mean : 0.0;
  json ph;
  for (const auto& [name, v] : phase_samples) ph[name + "_s"] = to_json(compute_stats(v));
  summary["phases"] = ph;
  int64_t peak = 0, device_peak = 0;
  json rss = json::array();
  for (const auto& r : reports) {
    peak = std::max(peak, r.peak_rss_bytes);
    device_peak = std::max(device_peak, r.device_peak_bytes);
    rss.push_back(r.peak_rss_bytes);
  }
  summary["peak_rss_bytes"] = peak;
  summary["peak_rss_bytes_per_rank"] = rss;
  summary["device_peak_bytes"] = device_peak;
  summary["loss_first"] = losses.empty() ? 0.0 : losses.front();
  summary["loss_last"] = losses.empty() ? 0.0 : losses.back();
  bool identical = true;
  for (const auto& r : reports)
    identical = identical && std::abs(r.param_checksum - reports[0].param_checksum) <=
                                 1e-6 * std::max(1.0, std::abs(reports[0].param_checksum));
  summary["replicas_identical"] = identical;

  json comm_ops = json::array();
  for (const auto& r : reports)
    for (const auto& s : r.spans)
      if (s.stream == "comm")
        comm_ops.push_back({{"rank", r.rank}, {"step", s.step}, {"name", s.name}, {"bytes", s.bytes},
                            {"launch_s", ns_to_s(s.launch_ns)}, {"start_s", ns_to_s(s.start_ns)},
                            {"end_s", ns_to_s(s.end_ns)}});
  json ranks = json::array();
  for (const auto& r : reports)
    ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"peak_rss_bytes", r.peak_rss_bytes},
                     {"device_peak_bytes", r.device_peak_bytes}, {"param_checksum", r.param_checksum}});

  json result = {{"schema", "dptwin.exec.result/1"},
                 {"versions", info.versions},
                 {"config", info.config},
                 {"world", info.world},
                 {"clock", info.clock},
                 {"parameters", info.parameters},
                 {"corpus", info.corpus},
                 {"warmup_steps", info.warmup_steps},
                 {"summary", summary},
                 {"steps", steps},
                 {"ranks", ranks},
                 {"comm_ops", comm_ops}};
  if (!info.comm_state_s.empty())
    result["comm_state"] = {{"kind", "allreduce"},
                            {"bytes", info.comm_state_bytes},
                            {"readings_s", info.comm_state_s},
                            {"seconds", compute_stats(info.comm_state_s).median}};
  return result;
}

json make_chrome_trace(const std::vector<RankReport>& reports) {
  json events = json::array();
  for (const auto& r : reports) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r.rank}, {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", 1}, {"args", {{"name", "comm"}}}});
    for (const auto& s : r.spans) {
      if (s.name == "step") continue;  // steps are implied by the phases
      json args = {{"step", s.step}};
      if (s.stream == "comm") {
        args["bytes"] = s.bytes;
        args["launch_us"] = static_cast<double>(s.launch_ns) * 1e-3;
      }
      events.push_back({{"name", s.name}, {"cat", s.stream}, {"ph", "X"}, {"pid", r.rank},
                        {"tid", s.stream == "comm" ? 1 : 0}, {"ts", static_cast<double>(s.start_ns) * 1e-3},
                        {"dur", static_cast<double>(s.end_ns - s.start_ns) * 1e-3}, {"args", args}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace dptwin::exec
