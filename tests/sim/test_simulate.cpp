#include <doctest.h>

#include "sim/simulate.hpp"
#include "sim_test_util.hpp"

using namespace dptwin;
using namespace dptwin::sim;
using dptwin::sim::testing::make_point;

TEST_CASE("every output field is filled for an ok point, with prices and a token budget") {
  PointSpec p = make_point("paper", "hal-v100", 8, StrategyKind::Horovod, 4);
  p.pricing.per_device_hour = 3.0;
  p.token_budget = 1e9;
  PointResult r = simulate_point(p);
  REQUIRE(r.status == "ok");
  CHECK(*r.step_time_s > 0);
  CHECK(*r.samples_per_s == doctest::Approx(32 / *r.step_time_s));
  CHECK(*r.mfu > 0.0);
  CHECK(*r.mfu < 1.0);
  // cost per million tokens = 8 devices x 3 USD/h x (1e6 / tokens_per_s) / 3600 s/h.
  CHECK(*r.cost_per_million_tokens == doctest::Approx(8 * 3.0 * (1e6 / *r.tokens_per_s) / 3600.0));
  CHECK(*r.time_to_train_s == doctest::Approx(1e9 / *r.tokens_per_s));
  CHECK(*r.cost_to_train == doctest::Approx(8 * 3.0 * *r.time_to_train_s / 3600.0));
  double sum = r.breakdown.compute_s + r.breakdown.exposed_comm_s + r.breakdown.optimizer_s + r.breakdown.overhead_s;
  CHECK(sum == doctest::Approx(*r.step_time_s).epsilon(0.01));
  CHECK(r.events > 0);
}

TEST_CASE("simulate_all runs points in parallel and keeps their order") {
  std::vector<PointSpec> pts;
  for (int n : {1, 2, 4}) pts.push_back(make_point("tiny", "hal-v100", n, StrategyKind::Dps, 1));
  size_t calls = 0;
  auto rs = simulate_all(pts, 2, [&](size_t done, size_t total) {
    ++calls;
    CHECK(done <= total);
  });
  REQUIRE(rs.size() == 3);
  CHECK(calls == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(rs[i].devices == pts[i].devices);
  CHECK(*rs[0].step_time_s == *simulate_point(pts[0]).step_time_s);
}
