// The side-by-side trace of one validation case: measured steps picked and
// shifted, predicted processes renamed and moved above the measured ranks.
#include <doctest/doctest.h>

#include <set>

#include "validate/trace_compare.hpp"

using nlohmann::json;
using namespace dptwin::validate;

namespace {

json exec_result(const std::vector<double>& step_times, int first_measured) {
  json steps = json::array();
  for (size_t i = 0; i < step_times.size(); ++i)
    steps.push_back({{"step", i}, {"measured", static_cast<int>(i) >= first_measured}, {"step_time_s", step_times[i]}});
  return {{"steps", steps}};
}

json span(int rank, int tid, int step, double ts, double dur, const std::string& name) {
  return {{"name", name}, {"ph", "X"}, {"pid", rank}, {"tid", tid}, {"ts", ts}, {"dur", dur}, {"args", {{"step", step}}}};
}

}  // namespace

TEST_CASE("representative_step: the later measured step nearest the median") {
  // Steps 0-1 warm-up; 2 is the first measured (left out: its predecessor is warm-up).
  // Steps 3, 4, 5 take 0.30, 0.10, 0.20 s: the median is step 5's.
  CHECK(representative_step(exec_result({0.9, 0.8, 0.1, 0.30, 0.10, 0.20}, 2)) == 5);
  CHECK(representative_step(exec_result({0.9, 0.2}, 1)) == -1);  // one measured step only
  CHECK(representative_step(json::object()) == -1);
}

TEST_CASE("side_by_side_trace: two measured steps from 0, predicted above the ranks") {
  json measured = {{"traceEvents", json::array()}};
  auto& ev = measured["traceEvents"];
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "rank 0"}}}});
  for (int r = 0; r < 2; ++r)
    for (int s = 2; s <= 5; ++s) {
      ev.push_back(span(r, 0, s, 1000.0 * s + r, 400, "forward"));
      ev.push_back(span(r, 1, s, 1000.0 * s + 500 + r, 100, "allreduce"));
    }
  const json predicted = json::parse(R"({"traceEvents": [
      {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "device 0"}},
      {"name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0, "args": {"sort_index": 0}},
      {"name": "fwd", "ph": "X", "pid": 0, "tid": 0, "ts": 0.0, "dur": 300.0},
      {"name": "fwd", "ph": "X", "pid": 1, "tid": 0, "ts": 0.0, "dur": 300.0}]})");
  const json doc = side_by_side_trace(measured, 4, predicted, "tiny dps x2 fp32 mb8", 0.001, 0.0011);

  std::set<int> measured_steps, measured_pids, predicted_pids;
  double min_ts = 1e30;
  std::set<std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    if (e["pid"].get<int>() < 100000) {
      measured_steps.insert(e["args"]["step"].get<int>());
      measured_pids.insert(e["pid"].get<int>());
      min_ts = std::min(min_ts, e["ts"].get<double>());
    } else {
      predicted_pids.insert(e["pid"].get<int>());
    }
  }
  CHECK(measured_steps == std::set<int>{3, 4});          // the step and the one before it
  CHECK(measured_pids == std::set<int>{0, 1});
  CHECK(min_ts == doctest::Approx(0.0));                 // shifted: step 3 of rank 0 started at 3000 us
  CHECK(predicted_pids == std::set<int>{100000, 100001});
  CHECK(names.count("measured rank 0"));
  CHECK(names.count("measured rank 1"));
  CHECK(names.count("predicted device 0"));
  CHECK_FALSE(names.count("rank 0"));                    // exec's own process names are replaced
  CHECK(doc["otherData"]["case"] == "tiny dps x2 fp32 mb8");
  CHECK(doc["otherData"]["measured_step"] == 4);
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_sort_index" && e["pid"].get<int>() >= 100000)
      CHECK(e["args"]["sort_index"].get<int>() >= 100000);  // predicted listed after the measured ranks
}
