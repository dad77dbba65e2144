#include <doctest.h>

#include "sim/simulate.hpp"
#include "sim_test_util.hpp"

using namespace dptwin;
using namespace dptwin::sim;
using dptwin::sim::testing::make_point;

TEST_CASE("gpt2-xl with fp32 AdamW does not fit a 16 GB V100 and is reported OOM, not timed") {
  PointResult r = simulate_point(make_point("gpt2-xl", "hal-v100", 4, StrategyKind::Dps, 1));
  CHECK(r.status == "oom");
  CHECK(r.memory.oom);
  // weights + gradients + two Adam moments: 16 bytes per parameter = 24.9 GB alone.
  CHECK(r.memory.weights + r.memory.gradients + r.memory.optimizer_state == doctest::Approx(16.0 * 1557611200));
  CHECK(r.memory.peak > r.memory.capacity);
  CHECK_FALSE(r.step_time_s);
  CHECK_FALSE(r.tokens_per_s);
  CHECK(r.message.find("GiB") != std::string::npos);
}

TEST_CASE("the paper's model fits at the paper's batch sizes on a 16 GB V100") {
  struct Case {
    StrategyKind k;
    int batch;
  };
  for (Case c : {Case{StrategyKind::Single, 4}, Case{StrategyKind::Sps, 1}, Case{StrategyKind::Dps, 2},
                 Case{StrategyKind::Horovod, 4}, Case{StrategyKind::DpsAmp, 4}, Case{StrategyKind::HorovodAmp, 4}}) {
    PointResult r = simulate_point(make_point("paper", "hal-v100", 4, c.k, c.batch));
    CAPTURE(to_string(c.k));
    CHECK(r.status == "ok");
    CHECK(r.memory.peak < r.memory.capacity);
    CHECK(r.memory.peak > 2e9);
  }
}

TEST_CASE("communication buffers follow each strategy") {
  PointResult dps = simulate_point(make_point("paper", "hal-v100", 4, StrategyKind::Dps, 2));
  PointResult hvd = simulate_point(make_point("paper", "hal-v100", 4, StrategyKind::Horovod, 2));
  // DDP copies every gradient into buckets (gradient_as_bucket_view=false).
  CHECK(dps.memory.comm_buffers == doctest::Approx(4.0 * 106331904));
  // Horovod keeps one fusion buffer of at most the threshold (128 MiB).
  CHECK(hvd.memory.comm_buffers == doctest::Approx(128.0 * 1024 * 1024));
}
