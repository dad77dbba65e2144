#include "validate/trace_compare.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

namespace dptwin::validate {

using json = nlohmann::json;

namespace {

// Predicted processes sit above every measured rank.
constexpr int kPredictedPidBase = 100000;

json meta(const std::string& name, int pid, json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", std::move(args)}};
}

}  // namespace

int representative_step(const json& exec_result) {
  std::vector<std::pair<double, int>> steps;  // (step time, step)
  if (!exec_result.contains("steps")) return -1;
  for (const auto& s : exec_result.at("steps"))
    if (s.value("measured", false) && s.contains("step_time_s")) steps.emplace_back(s.at("step_time_s"), s.at("step"));
  if (steps.size() < 2) return -1;
  const int first = std::min_element(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.second < b.second; })->second;
  std::vector<std::pair<double, int>> later;
  for (const auto& s : steps)
    if (s.second != first) later.push_back(s);
  std::sort(later.begin(), later.end());
  return later[later.size() / 2].second;
}

json side_by_side_trace(const json& measured, int step, const json& predicted, const std::string& label,
                        double measured_step_s, double predicted_step_s) {
  json events = json::array();
  // Measured: the two steps, shifted so that the earlier one starts at 0.
  std::vector<const json*> kept;
  double t0 = std::numeric_limits<double>::infinity();
  std::set<int> ranks;
  const json measured_events = measured.value("traceEvents", json::array());  // `kept` points into it
  for (const auto& e : measured_events) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("step")) continue;
    const int s = e["args"]["step"];
    if (s != step && s != step - 1) continue;
    kept.push_back(&e);
    t0 = std::min(t0, e.value("ts", 0.0));
    ranks.insert(e.value("pid", 0));
  }
  for (int r : ranks) {
    events.push_back(meta("process_name", r, {{"name", "measured rank " + std::to_string(r)}}));
    events.push_back(meta("process_sort_index", r, {{"sort_index", r}}));
    for (int tid : {0, 1}) {
      json m = meta("thread_name", r, {{"name", tid == 0 ? "compute" : "comm"}});
      m["tid"] = tid;
      events.push_back(std::move(m));
    }
  }
  for (const json* e : kept) {
    json x = *e;
    x["ts"] = e->value("ts", 0.0) - t0;
    events.push_back(std::move(x));
  }
  // Predicted: every event, pids moved above the measured ranks, names prefixed.
  for (const auto& e : predicted.value("traceEvents", json::array())) {
    json x = e;
    x["pid"] = kPredictedPidBase + e.value("pid", 0);
    if (x.value("ph", "") == "M" && x.value("name", "") == "process_name")
      x["args"]["name"] = "predicted " + e["args"].value("name", std::string{});
    if (x.value("ph", "") == "M" && x.value("name", "") == "process_sort_index")
      x["args"]["sort_index"] = kPredictedPidBase + e["args"].value("sort_index", 0);
    events.push_back(std::move(x));
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"case", label},
            {"measured_step", step},
            {"measured_step_s", measured_step_s},
            {"predicted_step_s", predicted_step_s},
            {"note", "measured: steps measured_step-1 and measured_step of one run; predicted: the simulator's "
                     "two steps (warm-up, steady); both shifted to start at 0"}}}};
}

}  // namespace dptwin::validate
