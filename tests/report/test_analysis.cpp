// Recommendation logic and grouping on hand-made results.
#include <doctest.h>

#include "report/analysis.hpp"

using namespace dptwin::report;
using dptwin::sim::PointResult;

namespace {

// A timed point: tokens/s, cost per M tokens, nodes, step with halved links.
ReportPoint point(const std::string& strategy, int devices, double tokens_per_s, std::optional<double> cost,
                  int nodes = 1, std::optional<double> halved = std::nullopt, double exposed_s = 0.01) {
  ReportPoint p;
  p.result.params = {{"model", "gpt2"}, {"cluster", "dgx-a100"}, {"devices", std::to_string(devices)},
                     {"strategy", strategy}};
  p.result.devices = devices;
  p.result.step_time_s = 1.0;  // same step, so throughput differences come from batch
  p.result.tokens_per_s = tokens_per_s;
  p.result.scaling_efficiency = 0.9;
  p.result.cost_per_million_tokens = cost;
  p.result.breakdown.compute_s = 0.8;
  p.result.breakdown.exposed_comm_s = exposed_s;
  p.result.breakdown.hidden_comm_s = 0.1;
  p.result.memory.peak = 10.0 * 1073741824.0;
  p.result.memory.capacity = 80.0 * 1073741824.0;
  p.device_type = "a100-sxm4-80gb";
  p.precision = "O2 bf16";
  p.micro_batch = 4;
  p.nodes = nodes;
  p.inter_node_gbps = nodes > 1 ? 200 : 0;
  p.price_per_device_hour = 5.12;
  p.halved_step_s = halved;
  return p;
}

ReportPoint oom(const std::string& strategy, int devices) {
  ReportPoint p = point(strategy, devices, 0, std::nullopt);
  p.result.status = "oom";
  p.result.step_time_s.reset();
  p.result.tokens_per_s.reset();
  p.result.memory.oom = true;
  return p;
}

std::vector<size_t> all(const std::vector<ReportPoint>& v) {
  std::vector<size_t> m(v.size());
  for (size_t i = 0; i < v.size(); ++i) m[i] = i;
  return m;
}

}  // namespace

TEST_CASE("fastest is the highest throughput, cheapest the lowest cost per token; OOM never wins") {
  std::vector<ReportPoint> pts = {
      point("dps", 8, 1e6, 0.30),                // cheapest
      point("horovod", 64, 6e6, 0.45, 8, 1.10),  // fastest, 10% slower with halved links
      point("dps", 64, 5e6, 0.40, 8, 1.02),      // least sensitive multi-node point
      oom("dps+amp", 64),                        // would be "fastest" if it were timed
  };
  pts[3].result.tokens_per_s = 9e9;  // a bogus figure on an OOM point must be ignored
  auto rec = recommend(pts, all(pts));
  REQUIRE(rec.size() == 3);
  CHECK(rec[0].kind == "fastest");
  CHECK(rec[0].index == 1u);
  CHECK(rec[0].metric == "6.00M tokens/s");
  CHECK(rec[0].reason.find("runner-up") != std::string::npos);
  CHECK(rec[0].reason.find("16.7% slower") != std::string::npos);  // 1 - 5/6
  CHECK(rec[1].kind == "cheapest");
  CHECK(rec[1].index == 0u);
  CHECK(rec[1].reason.find("costs 33.3% less per token") != std::string::npos);  // 1 - 0.30/0.45
  CHECK(rec[2].kind == "least sensitive to slower links");
  CHECK(rec[2].index == 2u);
  CHECK(rec[2].metric == "+2.0% step time");
  CHECK(rec[2].reason.find("200 -> 100 Gb/s") != std::string::npos);
  CHECK(rec[2].reason.find("most sensitive") != std::string::npos);
  CHECK(rec[0].config == "64 x a100-sxm4-80gb, horovod, micro-batch 4, O2 bf16");
}

TEST_CASE("without prices, multi-node points or any timed point the reasons say so") {
  std::vector<ReportPoint> pts = {point("dps", 4, 1e6, std::nullopt), point("dps", 8, 2e6, std::nullopt)};
  auto rec = recommend(pts, all(pts));
  CHECK(rec[0].index == 1u);
  CHECK_FALSE(rec[1].index.has_value());
  CHECK(rec[1].reason.find("No price") != std::string::npos);
  CHECK_FALSE(rec[2].index.has_value());
  CHECK(rec[2].reason.find("one node") != std::string::npos);

  std::vector<ReportPoint> none = {oom("dps", 8)};
  auto r2 = recommend(none, all(none));
  CHECK_FALSE(r2[0].index.has_value());
  CHECK(r2[0].reason.find("out of memory") != std::string::npos);
}

TEST_CASE("recommend only looks at the members it is given") {
  std::vector<ReportPoint> pts = {point("dps", 8, 1e6, 0.3), point("dps", 64, 9e6, 0.2)};
  auto rec = recommend(pts, {0});
  CHECK(rec[0].index == 0u);
  CHECK(rec[1].index == 0u);
  CHECK(rec[1].reason.find("also the fastest") != std::string::npos);
}

TEST_CASE("slowdown: zero on one node, measured across nodes, unknown when not measured") {
  CHECK(point("dps", 8, 1, 1).slowdown_pct() == 0.0);
  CHECK(*point("dps", 16, 1, 1, 2, 1.25).slowdown_pct() == doctest::Approx(25));
  CHECK_FALSE(point("dps", 16, 1, 1, 2).slowdown_pct().has_value());
  CHECK_FALSE(oom("dps", 16).slowdown_pct().has_value());
}

TEST_CASE("groups by model, cluster and device type; series names carry the varying labels") {
  std::vector<ReportPoint> pts = {point("dps", 8, 1, 1), point("dps", 16, 1, 1), point("horovod", 8, 1, 1)};
  pts[1].result.params.emplace_back("micro_batch", "8");
  pts[0].result.params.emplace_back("micro_batch", "4");
  pts[2].result.params.emplace_back("micro_batch", "4");
  pts[2].device_type = "h100-sxm5-80gb";
  auto groups = group_points(pts);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].title == "gpt2 on dgx-a100 (a100-sxm4-80gb)");
  CHECK(groups[0].members == std::vector<size_t>{0, 1});
  CHECK(series_name(pts, groups[0].members, 0) == "dps mb=4");
  CHECK(series_name(pts, groups[0].members, 1) == "dps mb=8");
  CHECK(series_name(pts, groups[1].members, 2) == "horovod");  // nothing varies within its group
}

TEST_CASE("formatting") {
  CHECK(format_duration(42) == "42 s");
  CHECK(format_duration(5400) == "90.0 min");
  CHECK(format_duration(3 * 3600) == "3.0 h");
  CHECK(format_duration(10 * 86400) == "10.0 days");
  CHECK(format_usd(0.0123) == "$0.0123");
  CHECK(format_usd(5.5) == "$5.50");
  CHECK(format_usd(1234567.0) == "$1.23M");
  CHECK(format_usd(48250) == "$48,250");
  CHECK(format_rate(1500) == "1.5k tokens/s");
}
TEST_CASE("format_count") { CHECK(format_count(30e9) == "30B"); CHECK(format_count(1.5e12) == "1.5T"); CHECK(format_count(512) == "512"); }
