// The planner: candidate space, constraints (memory, days, budget) and explanations.
#include <doctest.h>

#include <sstream>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "report/planner.hpp"

using namespace dptwin::report;

namespace {

PlanRequest small_gpt2() {
  PlanRequest r;
  r.model = "gpt2";
  r.tokens = 10e9;
  r.clusters = {"dgx-a100"};
  r.max_devices = 16;
  r.strategies = {"dps", "dps+amp"};
  r.precisions = {"fp32", "bf16"};
  r.micro_batches = {4, 8};
  return r;
}

}  // namespace

TEST_CASE("the candidate space: powers of two, strategies by precision, bf16 only where supported") {
  PlanRequest r = normalized(small_gpt2());
  auto specs = plan_candidates(r);
  // counts 1, 2, 4, 8, 16 x (dps fp32 + dps+amp bf16) x micro-batch 4, 8
  CHECK(specs.size() == 5 * 2 * 2);
  PlanRequest v = normalized(small_gpt2());
  v.clusters = {};
  v.device_types = {"v100-sxm2-16gb"};  // no bf16 on V100: only dps fp32 remains
  auto vs = plan_candidates(v);
  CHECK(vs.size() == 5 * 1 * 2);
  CHECK(vs[0].cluster.name == "hal-v100");  // the preset built around that device
}

TEST_CASE("a feasible plan honours the limits and names the fastest and the cheapest") {
  PlanRequest r = small_gpt2();
  r.max_days = 30;
  r.budget_usd = 20000;
  auto plan = run_plan(r, 2);
  REQUIRE_FALSE(plan.feasible.empty());
  for (size_t i : plan.feasible) {
    const auto& res = plan.points[i].result;
    CHECK(res.status == "ok");
    CHECK(*res.time_to_train_s <= 30 * 86400.0);
    CHECK(*res.cost_to_train <= 20000.0);
  }
  REQUIRE(plan.fastest.has_value());
  REQUIRE(plan.cheapest.has_value());
  const auto& f = plan.points[*plan.fastest].result;
  for (size_t i : plan.feasible) CHECK(*plan.points[i].result.time_to_train_s >= *f.time_to_train_s);
  const auto& c = plan.points[*plan.cheapest].result;
  for (size_t i : plan.feasible) CHECK(*plan.points[i].result.cost_to_train >= *c.cost_to_train);
  CHECK(f.devices == 16);  // more devices, faster: the space ends at 16
  CHECK(plan.fastest_why.find("outside the search space") != std::string::npos);
  CHECK(plan.fastest_why.find("Limits:") != std::string::npos);
  CHECK(plan.cheapest_why.find("Cheapest feasible") != std::string::npos);
  std::ostringstream out;
  write_plan(out, normalized(r), plan);
  CHECK(out.str().find("FASTEST") != std::string::npos);
  CHECK(out.str().find("CHEAPEST") != std::string::npos);
  CHECK(out.str().find("top ") != std::string::npos);
}

TEST_CASE("a budget too small leaves no feasible plan, with a clear message") {
  PlanRequest r = small_gpt2();
  r.budget_usd = 1;  // one dollar for 10B tokens
  auto plan = run_plan(r, 2);
  CHECK(plan.feasible.empty());
  CHECK_FALSE(plan.fastest.has_value());
  CHECK(plan.over_budget > 0);
  CHECK(plan.no_plan.find("No feasible configuration") != std::string::npos);
  CHECK(plan.no_plan.find("over the $1.00 budget") != std::string::npos);
  CHECK(plan.no_plan.find("the budget would have to be at least") != std::string::npos);  // the nearest miss
  CHECK(plan.no_plan.find("Within the budget the fastest") == std::string::npos);
  PlanRequest both = r;
  both.max_days = 365;
  auto p2 = run_plan(both, 2);
  CHECK(p2.no_plan.find("the budget would have to be at least") != std::string::npos);
  std::ostringstream out;
  write_plan(out, normalized(r), plan);
  CHECK(out.str().find("No feasible configuration") != std::string::npos);
}

TEST_CASE("memory limits exclude gpt2-xl in fp32 on 16 GB V100s") {
  PlanRequest r;
  r.model = "gpt2-xl";
  r.tokens = 1e9;
  r.device_types = {"v100-sxm2-16gb"};
  r.precisions = {"fp32"};
  r.strategies = {"dps", "horovod"};
  r.max_devices = 8;
  r.micro_batches = {1, 2};
  auto plan = run_plan(r, 2);
  CHECK(plan.points.size() == 4 * 2 * 2);  // 1..8 devices x 2 strategies x 2 micro-batches
  CHECK(plan.oom == plan.points.size());
  CHECK(plan.feasible.empty());
  CHECK(plan.no_plan.find("does not fit in memory") != std::string::npos);
  for (const auto& v : plan.verdict) CHECK(v == "out of memory");
}

TEST_CASE("bad requests are input errors naming the flag") {
  PlanRequest r = small_gpt2();
  r.model = "gpt2-xxl";
  CHECK_THROWS_WITH_AS(normalized(r), doctest::Contains("--model"), dptwin::InputError);
  r = small_gpt2();
  r.tokens = 0;
  CHECK_THROWS_WITH_AS(normalized(r), doctest::Contains("--tokens"), dptwin::InputError);
  r = small_gpt2();
  r.precisions = {"fp8"};
  CHECK_THROWS_WITH_AS(normalized(r), doctest::Contains("--precision"), dptwin::InputError);
  r = small_gpt2();
  r.device_types = {"tpu-v5"};
  CHECK_THROWS_WITH_AS(normalized(r), doctest::Contains("--device-types"), dptwin::InputError);
  r = small_gpt2();
  r.clusters = {"dgx-z100"};
  CHECK_THROWS_WITH_AS(normalized(r), doctest::Contains("--clusters"), dptwin::InputError);
}

TEST_CASE("plan YAML: lists or comma-separated text; unknown keys are errors") {
  auto r = parse_plan(dptwin::load_yaml_string(
      "model: gpt2\ntokens: 10e9\ndays: 7\nbudget: 50000\nclusters: dgx-a100, dgx-h100\nprecision: [bf16]\n"
      "micro_batch: [4, 8]\nmax_devices: 64\n",
      "plan.yaml"));
  auto n = normalized(r);
  CHECK(n.clusters == std::vector<std::string>{"dgx-a100", "dgx-h100"});
  CHECK(*n.max_days == 7);
  CHECK(*n.budget_usd == 50000);
  CHECK(n.micro_batches == std::vector<int>{4, 8});
  CHECK_THROWS_WITH_AS(parse_plan(dptwin::load_yaml_string("model: gpt2\ntokens: 1e9\nbugdet: 5\n", "plan.yaml")),
                       doctest::Contains("bugdet"), dptwin::InputError);
}
