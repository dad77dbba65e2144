#include <doctest.h>

#include <cmath>
#include <vector>

#include "sim/engine.hpp"
#include "sim/executor.hpp"

using namespace dptwin;
using namespace dptwin::sim;

TEST_CASE("events run in time order, ties in scheduling order") {
  Simulation sim;
  std::vector<int> order;
  sim.schedule_at(Time::us(5), [&] { order.push_back(3); });
  sim.schedule_at(Time::us(1), [&] { order.push_back(1); });
  sim.schedule_at(Time::us(1), [&] {
    order.push_back(2);
    // An event may schedule more events, relative to the current time.
    sim.schedule_in(Time::us(10), [&] { order.push_back(4); });
  });
  CHECK(sim.run() == 4);
  CHECK(order == std::vector<int>{1, 2, 3, 4});
  CHECK(sim.now() == Time::us(11));
  CHECK(sim.events_processed() == 4);
}

TEST_CASE("events own move-only state") {
  Simulation sim;
  auto p = std::make_unique<int>(7);
  int seen = 0;
  sim.schedule_at(Time::ns(1), [q = std::move(p), &seen] { seen = *q; });
  sim.run();
  CHECK(seen == 7);
}

TEST_CASE("jitter is deterministic per seed and exactly 1 without noise") {
  Simulation a(42), b(42), c(43);
  CHECK(a.jitter_factor(0.0) == 1.0);
  double x = a.jitter_factor(0.1), y = b.jitter_factor(0.1), z = c.jitter_factor(0.1);
  CHECK(x == y);
  CHECK(x != z);
}

TEST_CASE("a stream runs its tasks in order; dependencies cross streams") {
  Simulation sim;
  Executor ex(sim, 1, {});
  int32_t n = ex.name_id("t");
  // compute: A (10 us) then B (5 us). comm: C (3 us) waits for A.
  TaskId a = ex.add_task(0, StreamKind::Compute, Category::Forward, Time::us(10), n);
  TaskId b = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::us(5), n);
  TaskId c = ex.add_task(0, StreamKind::Comm, Category::Communication, Time::us(3), n, {a});
  sim.run();
  CHECK(ex.start_of(a) == Time::zero());
  CHECK(ex.end_of(a) == Time::us(10));
  CHECK(ex.start_of(b) == Time::us(10));
  CHECK(ex.end_of(b) == Time::us(15));
  // C starts when A ends and overlaps B.
  CHECK(ex.start_of(c) == Time::us(10));
  CHECK(ex.end_of(c) == Time::us(13));
}

TEST_CASE("a collective starts when its last member is ready and ends together") {
  Simulation sim;
  Executor ex(sim, 3, {});
  int32_t n = ex.name_id("x");
  // Devices finish compute at 1, 4 and 2 us; the collective (priced at 10 us) starts at 4 us.
  std::vector<TaskId> pre;
  for (int d = 0; d < 3; ++d)
    pre.push_back(ex.add_task(d, StreamKind::Compute, Category::Backward, Time::us(d == 1 ? 4 : (d == 0 ? 1 : 2)), n));
  int priced = 0;
  auto members = ex.add_collective({0, 1, 2}, Category::Communication, n, {{pre[0]}, {pre[1]}, {pre[2]}}, 100,
                                   [&] {
                                     ++priced;
                                     return Time::us(10);
                                   });
  sim.run();
  CHECK(priced == 1);
  for (TaskId m : members) {
    CHECK(ex.start_of(m) == Time::us(4));
    CHECK(ex.end_of(m) == Time::us(14));
  }
  // Waiting for peers: device 0 waited 3 us, device 2 waited 2 us, device 1 not at all.
  CHECK(ex.collective_wait(0) == Time::us(3));
  CHECK(ex.collective_wait(1) == Time::zero());
  CHECK(ex.collective_wait(2) == Time::us(2));
}

TEST_CASE("compute overlapping running communication is slowed") {
  Simulation sim;
  ExecutorOptions o;
  o.overlap_slowdown = 0.5;
  Executor ex(sim, 1, o);
  int32_t n = ex.name_id("x");
  ex.add_task(0, StreamKind::Comm, Category::Communication, Time::us(100), n);
  TaskId c = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::us(10), n);
  sim.run();
  // The comm task runs from t=0, so the 10 us compute takes 15 us.
  CHECK(ex.end_of(c) == Time::us(15));
  // A background loop's slowdown applies while the comm stream is idle; while
  // a collective runs (the loop thread runs it), only the overlap slowdown.
  Simulation sim2;
  o.background_slowdown = 0.2;
  Executor bg(sim2, 1, o);
  TaskId coll = bg.add_task(0, StreamKind::Comm, Category::Communication, Time::us(100), n);
  TaskId during = bg.add_task(0, StreamKind::Compute, Category::Backward, Time::us(10), n);
  TaskId after = bg.add_task(0, StreamKind::Compute, Category::Backward, Time::us(100), n, {coll});
  sim2.run();
  CHECK(bg.end_of(during) == Time::us(15));
  CHECK(bg.start_of(after) == Time::us(100));
  CHECK(bg.end_of(after) == Time::us(220));
}

TEST_CASE("compute of devices sharing a host's cores is re-rated as tasks start and end") {
  Simulation sim;
  ExecutorOptions o;
  o.host_of_device = {0, 0, 0, 1};          // devices 0-2 share host 0; device 3 is alone on host 1
  o.sharing_slowdown = {1.0, 1.0, 2.0};     // two at once run at half speed; three: 2 x 3/2
  Executor ex(sim, 4, o);
  int32_t n = ex.name_id("x");
  // a (10 us) alone for 4 us, then with b at half speed; b (4 us) ends at 12;
  // a has 2 us of work left and ends alone at 14.
  TaskId a = ex.add_task(0, StreamKind::Compute, Category::Forward, Time::us(10), n);
  TaskId gate = ex.add_task(1, StreamKind::Comm, Category::Communication, Time::us(4), n);
  TaskId b = ex.add_task(1, StreamKind::Compute, Category::Forward, Time::us(4), n, {gate});
  // Another host's compute runs at its own speed; communication is not shared.
  TaskId other = ex.add_task(3, StreamKind::Compute, Category::Forward, Time::us(10), n);
  TaskId comm = ex.add_task(2, StreamKind::Comm, Category::Communication, Time::us(10), n);
  sim.run();
  CHECK(ex.end_of(b) == Time::us(12));
  CHECK(ex.end_of(a) == Time::us(14));
  CHECK(ex.end_of(other) == Time::us(10));
  CHECK(ex.end_of(comm) == Time::us(10));

  // Three at once: beyond the table the factor grows with the count (2 x 3/2 = 3).
  Simulation sim3;
  Executor ex3(sim3, 4, o);
  std::vector<TaskId> t;
  for (int d = 0; d < 3; ++d) t.push_back(ex3.add_task(d, StreamKind::Compute, Category::Backward, Time::us(6), n));
  sim3.run();
  for (TaskId id : t) CHECK(ex3.end_of(id) == Time::us(18));
}

TEST_CASE("tasks added from a finish callback run, and late dependencies hold") {
  Simulation sim;
  Executor ex(sim, 1, {});
  int32_t n = ex.name_id("x");
  TaskId a = ex.add_task(0, StreamKind::Compute, Category::Forward, Time::us(2), n);
  TaskId later = kNoTask;
  ex.on_finish(a, [&] { later = ex.add_task(0, StreamKind::Comm, Category::Communication, Time::us(1), n, {a}); });
  // A task whose dependency is added before it can start waits for it.
  TaskId gate = ex.add_task(0, StreamKind::Host, Category::Overhead, Time::us(7), n);
  TaskId d = ex.add_task(0, StreamKind::Comm, Category::Communication, Time::us(1), n, {gate});
  sim.run();
  REQUIRE(later != kNoTask);
  CHECK(ex.end_of(d) == Time::us(8));
  // `later` was queued behind `d` on the comm stream.
  CHECK(ex.start_of(later) == Time::us(8));
  CHECK(ex.end_of(later) == Time::us(9));
}

TEST_CASE("a data collective entered after compute starts after the slowest rank's lag and lasts longer") {
  Simulation sim;
  ExecutorOptions o;
  o.sync_lag = Time::ms(2);  // after 100 ms of compute
  o.sync_exponent = 0.5;
  o.sync_latency = Time::us(300);
  Executor ex(sim, 2, o);
  int32_t n = ex.name_id("x");
  TaskId c0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(400), n);
  TaskId c1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(300), n);
  auto one_ms = [] { return Time::ms(1); };
  auto first = ex.add_collective({0, 1}, Category::Communication, n, {{c0}, {c1}}, 1e6, one_ms);
  // Straight after the first: no compute in between, so no lag and no latency.
  auto second = ex.add_collective({0, 1}, Category::Communication, n, {{first[0]}, {first[1]}}, 1e6, one_ms);
  sim.run();
  // The ranks computed side by side for 300 ms (the second-longest compute
  // since the last meeting): lag 2 ms x sqrt(3).
  const double lag = 0.002 * std::sqrt(3.0);
  CHECK(ex.start_of(first[0]).seconds() == doctest::Approx(0.4 + lag));
  CHECK((ex.end_of(first[0]) - ex.start_of(first[0])).seconds() == doctest::Approx(0.0013));
  CHECK(ex.start_of(second[0]) == ex.end_of(first[0]));
  CHECK((ex.end_of(second[0]) - ex.start_of(second[0])).seconds() == doctest::Approx(0.001));
  // The lag is waiting time of every member; device 1 also waited for device 0's longer compute.
  CHECK(ex.collective_wait(0).seconds() == doctest::Approx(lag));
  CHECK(ex.collective_wait(1).seconds() == doctest::Approx(0.1 + lag));
}

TEST_CASE("ranks on cores of different speeds: the skew grows in proportion to their compute, beside the lag") {
  // 300 ms side by side since the last meeting: the random walk's 2 ms x
  // sqrt(3) plus 1.5% of 300 ms; the skew alone without a lag.
  for (bool with_lag : {true, false}) {
    CAPTURE(with_lag);
    Simulation sim;
    ExecutorOptions o;
    if (with_lag) o.sync_lag = Time::ms(2);
    o.sync_skew = 0.015;
    Executor ex(sim, 2, o);
    int32_t n = ex.name_id("x");
    TaskId c0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(300), n);
    TaskId c1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(300), n);
    auto one_ms = [] { return Time::ms(1); };
    auto first = ex.add_collective({0, 1}, Category::Communication, n, {{c0}, {c1}}, 1e6, one_ms);
    auto second = ex.add_collective({0, 1}, Category::Communication, n, {{first[0]}, {first[1]}}, 1e6, one_ms);
    sim.run();
    const double late = (with_lag ? 0.002 * std::sqrt(3.0) : 0.0) + 0.015 * 0.3;
    CHECK(ex.start_of(first[0]).seconds() == doctest::Approx(0.3 + late));
    // No compute since: the second meets without delay.
    CHECK(ex.start_of(second[0]) == ex.end_of(first[0]));
  }
}

TEST_CASE("ranks do not drift apart while only one of them computes (a parameter server stepping)") {
  // Rank 0 computes 100 ms while rank 1 waits in the collective (the server's
  // optimizer before the parameter broadcast): no lag, the latency still.
  // Three ranks where two computed 100 ms and 50 ms: the walk runs over 50 ms.
  Simulation sim;
  ExecutorOptions o;
  o.sync_lag = Time::ms(2);
  o.sync_latency = Time::us(300);
  Executor ex(sim, 3, o);
  int32_t n = ex.name_id("x");
  auto one_ms = [] { return Time::ms(1); };
  TaskId server = ex.add_task(0, StreamKind::Compute, Category::Optimizer, Time::ms(100), n);
  auto bcast = ex.add_collective({0, 1}, Category::Communication, n, {{server}, {}}, 1e6, one_ms);
  TaskId a = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), n, {bcast[0]});
  TaskId b = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(50), n, {bcast[1]});
  auto three = ex.add_collective({0, 1, 2}, Category::Communication, n, {{a}, {b}, {}}, 1e6, one_ms);
  sim.run();
  CHECK(ex.start_of(bcast[0]).seconds() == doctest::Approx(0.1));
  CHECK(ex.end_of(bcast[0]).seconds() == doctest::Approx(0.1013));
  const double lag = 0.002 * std::sqrt(0.5);
  CHECK(ex.start_of(three[0]).seconds() == doctest::Approx(0.2013 + lag));
}

TEST_CASE("negotiation collectives and executors without synchronisation costs meet without delay") {
  for (bool costs : {true, false}) {
    Simulation sim;
    ExecutorOptions o;
    if (costs) {
      o.sync_lag = Time::ms(2);
      o.sync_latency = Time::us(300);
    }
    Executor ex(sim, 2, o);
    int32_t n = ex.name_id("x");
    TaskId c0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), n);
    TaskId c1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(100), n);
    auto neg = ex.add_collective({0, 1}, Category::Negotiation, n, {{c0}, {c1}}, 64, [] { return Time::ms(1); });
    sim.run();
    CHECK(ex.start_of(neg[0]).seconds() == doctest::Approx(0.1));
    CHECK(ex.end_of(neg[0]).seconds() == doctest::Approx(0.101));
    if (costs) continue;
    // Without options a data collective after compute is not delayed either.
    Simulation sim2;
    Executor ex2(sim2, 2, ExecutorOptions{});
    const int32_t m = ex2.name_id("y");
    TaskId d0 = ex2.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), m);
    TaskId d1 = ex2.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(100), m);
    auto data = ex2.add_collective({0, 1}, Category::Communication, m, {{d0}, {d1}}, 64, [] { return Time::ms(1); });
    sim2.run();
    CHECK(ex2.end_of(data[0]).seconds() == doctest::Approx(0.101));
  }
}

TEST_CASE("a data collective overlapping compute realigns nobody: latency only, the lag waits for the meeting") {
  Simulation sim;
  ExecutorOptions o;
  o.sync_lag = Time::ms(2);  // after 100 ms of compute
  o.sync_latency = Time::us(300);
  Executor ex(sim, 2, o);
  int32_t n = ex.name_id("x");
  auto one_ms = [] { return Time::ms(1); };
  // 100 ms of compute, a bucket allreduced while 300 ms more compute runs, then
  // the last bucket after all compute: the meeting sees 400 ms since the last one.
  TaskId a0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), n);
  TaskId a1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(100), n);
  TaskId b0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(300), n, {a0});
  TaskId b1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(300), n, {a1});
  auto bucket = ex.add_collective({0, 1}, Category::Communication, n, {{a0}, {a1}}, 1e6, one_ms);
  auto last = ex.add_collective({0, 1}, Category::Communication, n, {{b0}, {b1}}, 1e6, one_ms);
  sim.run();
  CHECK(ex.start_of(bucket[0]).seconds() == doctest::Approx(0.1));
  CHECK(ex.end_of(bucket[0]).seconds() == doctest::Approx(0.1013));
  // lag 2 ms x sqrt(400 / 100) = 4 ms after the compute ends at 400 ms.
  CHECK(ex.start_of(last[0]).seconds() == doctest::Approx(0.404));
  CHECK(ex.end_of(last[0]).seconds() == doctest::Approx(0.4053));
}

TEST_CASE("with comm_waits_for_compute a data collective waits until none of its members computes") {
  // A bucket ready after 100 ms of compute while 300 ms more run on both ranks
  // (and 200 ms on rank 1 after that): with the option it starts only once
  // rank 1's compute ends at 600 ms; a negotiation collective never waits.
  for (bool waits : {false, true}) {
    CAPTURE(waits);
    Simulation sim;
    ExecutorOptions o;
    o.comm_waits_for_compute = waits;
    Executor ex(sim, 2, o);
    int32_t n = ex.name_id("x");
    auto one_ms = [] { return Time::ms(1); };
    TaskId a0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), n);
    TaskId a1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(100), n);
    TaskId b0 = ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(300), n, {a0});
    TaskId b1 = ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(300), n, {a1});
    ex.add_task(1, StreamKind::Compute, Category::Backward, Time::ms(200), n, {b1});
    // The control collective first on the comm streams: it runs while both ranks compute.
    auto control = ex.add_collective({0, 1}, Category::Negotiation, n, {{a0}, {a1}}, 8, one_ms);
    auto bucket = ex.add_collective({0, 1}, Category::Communication, n, {{a0}, {a1}}, 1e6, one_ms);
    TaskId opt0 = ex.add_task(0, StreamKind::Compute, Category::Optimizer, Time::ms(10), n, {bucket[0], b0});
    sim.run();
    CHECK(ex.start_of(control[0]).seconds() == doctest::Approx(0.1));
    CHECK(ex.start_of(bucket[0]).seconds() == doctest::Approx(waits ? 0.6 : 0.101));
    CHECK(ex.end_of(bucket[1]).seconds() == doctest::Approx(waits ? 0.601 : 0.102));
    CHECK(ex.start_of(opt0).seconds() == doctest::Approx(waits ? 0.601 : 0.4));
  }
}

TEST_CASE("with comm_needs_free_core a data collective waits only while its host has no core to spare") {
  // Devices on one host of two cores: a third compute task would be slowed.
  auto options = [](bool free_core, int devices) {
    ExecutorOptions o;
    o.comm_waits_for_compute = true;
    o.comm_needs_free_core = free_core;
    o.host_of_device.assign(devices, 0);
    o.sharing_slowdown = {1.0, 1.0, 1.0, 1.5, 2.0};
    return o;
  };
  auto one_ms = [] { return Time::ms(1); };
  // Four devices: 0 and 1 compute 50 ms of work, 2 and 3 compute 150 and 250
  // ms; all four run at half speed until 100 ms, when 0 and 1 end and their
  // bucket is ready. Two computing ranks fill the cores, so the free-core rule
  // holds the bucket until device 2 ends at 200 ms; the member rule starts it
  // at once (neither member computes).
  for (bool free_core : {false, true}) {
    CAPTURE(free_core);
    Simulation sim;
    Executor ex(sim, 4, options(free_core, 4));
    int32_t n = ex.name_id("x");
    std::vector<TaskId> work;
    for (int d = 0; d < 4; ++d)
      work.push_back(ex.add_task(d, StreamKind::Compute, Category::Backward, Time::ms(50 + 100 * std::max(0, d - 1)), n));
    auto bucket = ex.add_collective({0, 1}, Category::Communication, n, {{work[0]}, {work[1]}}, 1e6, one_ms);
    sim.run();
    CHECK(ex.end_of(work[0]).seconds() == doctest::Approx(0.1));
    CHECK(ex.end_of(work[2]).seconds() == doctest::Approx(0.2));
    CHECK(ex.start_of(bucket[0]).seconds() == doctest::Approx(free_core ? 0.2 : 0.1));
  }
  // Two devices, device 0 computing 100 ms, its bucket ready at once: one core
  // is idle, so the free-core rule starts the bucket beside the compute; the
  // member rule waits for device 0.
  for (bool free_core : {false, true}) {
    CAPTURE(free_core);
    Simulation sim;
    Executor ex(sim, 2, options(free_core, 2));
    int32_t n = ex.name_id("x");
    ex.add_task(0, StreamKind::Compute, Category::Backward, Time::ms(100), n);
    auto bucket = ex.add_collective({0, 1}, Category::Communication, n, {{}, {}}, 1e6, one_ms);
    sim.run();
    CHECK(ex.start_of(bucket[0]).seconds() == doctest::Approx(free_core ? 0.0 : 0.1));
  }
}
