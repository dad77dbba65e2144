#include <doctest.h>

#include <algorithm>
#include <cmath>

#include "sim/build_common.hpp"
#include "topology/cluster.hpp"
#include "sim/simulate.hpp"
#include "sim/sync_skeleton.hpp"
#include "sim_test_util.hpp"

using namespace dptwin;
using namespace dptwin::sim;
using dptwin::sim::testing::make_point;

TEST_CASE("single: the step is forward + backward + optimizer + fixed overheads, nothing else") {
  PointSpec p = make_point("paper", "hal-v100", 1, StrategyKind::Single, 4);
  PointResult r = simulate_point(p);
  REQUIRE(r.status == "ok");
  REQUIRE(r.step_time_s);
  // Rebuild the same sums the builder used.
  models::Workload w = models::build_gpt2_workload(p.model, 4);
  StepContext ctx;
  ctx.work = &w;
  ctx.prof = &p.profile;
  ctx.opts = &p.options;
  ctx.prec = precision_of(p.strategy, p.options);
  compute_op_times(ctx);
  OptimizerWork ow = optimizer_work(ctx);
  Time expected = sum_forward(ctx) + sum_backward(ctx, 0, ctx.backward_times.size()) + ow.total() + ow.zero_grad +
                  p.profile.step_overhead;
  CHECK(*r.step_time_s == doctest::Approx(expected.seconds()).epsilon(1e-6));
  CHECK(r.breakdown.exposed_comm_s == 0.0);
  CHECK(r.breakdown.hidden_comm_s == 0.0);
  CHECK(*r.scaling_efficiency == 1.0);
  CHECK(*r.tokens_per_s == doctest::Approx(4 * 512 / *r.step_time_s));
}

TEST_CASE("dps: bucket allreduces overlap the backward pass") {
  PointSpec p = make_point("paper", "hal-v100", 4, StrategyKind::Dps, 2);
  PointResult r = simulate_point(p);
  REQUIRE(r.status == "ok");
  // Some communication is hidden behind backward compute, and the step is shorter
  // than running compute, optimizer and all communication back to back.
  CHECK(r.breakdown.hidden_comm_s > 0.0);
  double serial = r.breakdown.compute_s + r.breakdown.optimizer_s + r.breakdown.hidden_comm_s + r.breakdown.exposed_comm_s;
  CHECK(*r.step_time_s < serial);
  // 4 devices with 2 samples each: global batch 8, tokens 8 x 512.
  CHECK(r.global_batch == 8);
  CHECK(r.tokens_per_step == 8 * 512);
  CHECK(*r.scaling_efficiency < 1.0);
  CHECK(*r.scaling_efficiency > 0.5);
}

TEST_CASE("dps: buckets follow DDP's assignment (1 MiB first, 25 MiB after)") {
  PointSpec p = make_point("paper", "hal-v100", 4, StrategyKind::Dps, 2);
  models::Workload w = models::build_gpt2_workload(p.model, 2);
  StepContext ctx;
  ctx.work = &w;
  ctx.opts = &p.options;
  ctx.kind = p.strategy;
  ctx.prec = precision_of(p.strategy, p.options);
  // 106.3M fp32 gradients = 425 MB; 25 MiB buckets close at or after the limit, and
  // the last bucket holds wte (78 MiB): about 425 MB / 26 MiB plus the first bucket.
  int buckets = dps_bucket_count(ctx);
  CHECK(buckets >= 12);
  CHECK(buckets <= 18);
  p.options.bucket_cap = mib(100);
  CHECK(dps_bucket_count(ctx) < buckets);
}

TEST_CASE("dps on one device is a single device run plus DDP's bookkeeping only") {
  PointResult single = simulate_point(make_point("paper", "hal-v100", 1, StrategyKind::Single, 2));
  PointResult dps = simulate_point(make_point("paper", "hal-v100", 1, StrategyKind::Dps, 2));
  CHECK(*dps.step_time_s == doctest::Approx(*single.step_time_s).epsilon(1e-6));
}

TEST_CASE("horovod: fusion, cycle time and the paper's double step all matter") {
  PointSpec p = make_point("paper", "hal-v100", 8, StrategyKind::Horovod, 4);
  PointResult base = simulate_point(p);
  REQUIRE(base.status == "ok");
  CHECK(base.breakdown.hidden_comm_s + base.breakdown.exposed_comm_s > 0.0);

  PointSpec no_fusion = p;
  no_fusion.options.fusion_threshold = Bytes(1);  // every tensor on its own
  CHECK(*simulate_point(no_fusion).step_time_s >= *base.step_time_s);
  // Where the collective latency is high (10 GbE between nodes), one allreduce
  // per tensor (148 of them) costs a longer step.
  PointSpec eth = make_point("paper", "eth-10g", 8, StrategyKind::Horovod, 4);
  PointSpec eth_no_fusion = eth;
  eth_no_fusion.options.fusion_threshold = Bytes(1);
  CHECK(*simulate_point(eth_no_fusion).step_time_s > *simulate_point(eth).step_time_s);

  PointSpec slow_cycle = p;
  slow_cycle.options.cycle_time = Time::ms(20);
  CHECK(*simulate_point(slow_cycle).step_time_s > *base.step_time_s);

  PointSpec amp = make_point("paper", "hal-v100", 4, StrategyKind::HorovodAmp, 4);
  PointSpec amp2 = amp;
  amp2.options.double_step = true;
  double t1 = *simulate_point(amp).step_time_s, t2 = *simulate_point(amp2).step_time_s;
  // A second full allreduce of fp32 gradients and a second AdamW.
  CHECK(t2 > t1 * 1.05);
}

TEST_CASE("horovod's background loop slows compute on shared cores; other strategies and one rank are untouched") {
  PointSpec h = make_point("paper", "hal-v100", 4, StrategyKind::Horovod, 4);
  h.profile.overlap_slowdown = 0.0;  // isolate the loop's factor
  const PointResult base = simulate_point(h);
  h.profile.background_loop_slowdown = 0.25;
  const PointResult slowed = simulate_point(h);
  REQUIRE(base.breakdown.compute_s > 0.0);
  // Every compute task that starts while no collective runs takes 1.25x as
  // long; those overlapping a fused allreduce (the loop thread runs it, and
  // does not tick meanwhile) keep their time.
  CHECK(slowed.breakdown.compute_s < base.breakdown.compute_s * 1.25);
  CHECK(slowed.breakdown.compute_s > base.breakdown.compute_s * 1.2);
  CHECK(*slowed.step_time_s > *base.step_time_s);
  h.profile.overlap_slowdown = 0.25;  // a collective slows compute as much as the loop does: all 1.25x
  CHECK(simulate_point(h).breakdown.compute_s == doctest::Approx(base.breakdown.compute_s * 1.25).epsilon(1e-3));

  PointSpec d = make_point("paper", "hal-v100", 4, StrategyKind::Dps, 4);
  const double dps_base = *simulate_point(d).step_time_s;
  d.profile.background_loop_slowdown = 0.25;
  CHECK(*simulate_point(d).step_time_s == doctest::Approx(dps_base).epsilon(1e-9));

  PointSpec one = make_point("paper", "hal-v100", 1, StrategyKind::Horovod, 4);
  const double one_base = *simulate_point(one).step_time_s;
  one.profile.background_loop_slowdown = 0.25;
  CHECK(*simulate_point(one).step_time_s == doctest::Approx(one_base).epsilon(1e-9));
}

TEST_CASE("amp: fp16 tensor cores make O2 faster than fp32 on a V100") {
  PointResult fp32 = simulate_point(make_point("paper", "hal-v100", 4, StrategyKind::Dps, 4));
  PointResult o2 = simulate_point(make_point("paper", "hal-v100", 4, StrategyKind::DpsAmp, 4));
  CHECK(*o2.step_time_s < *fp32.step_time_s);
  // O2 holds fp32 master weights and half gradients.
  CHECK(o2.memory.master_weights == doctest::Approx(4.0 * 106331904));
  CHECK(o2.memory.gradients == doctest::Approx(2.0 * 106331904));
}

TEST_CASE("sps: DataParallel inside a node, a central server across nodes") {
  PointResult in_node = simulate_point(make_point("paper", "hal-v100", 4, StrategyKind::Sps, 1));
  PointResult across = simulate_point(make_point("paper", "hal-v100", 8, StrategyKind::Sps, 1));
  REQUIRE(in_node.status == "ok");
  REQUIRE(across.status == "ok");
  CHECK(in_node.message.find("DataParallel") != std::string::npos);
  CHECK(across.message.find("central parameter server") != std::string::npos);
  // GPU0 holds the gathered outputs of all four replicas.
  CHECK(in_node.memory.gathered_outputs > 4 * 512.0 * 26679 * 4);
  // The server's link is the bottleneck: sps scales worse than dps on the same devices.
  PointResult dps = simulate_point(make_point("paper", "hal-v100", 8, StrategyKind::Dps, 1));
  CHECK(*across.tokens_per_s < *dps.tokens_per_s);
}

// The traced events of `device` in its second step (warm), by start: from the
// second `first` event to the third.
static std::vector<TimelineEvent> second_step(const PointResult& r, int device, const std::string& first) {
  std::vector<TimelineEvent> ev;
  for (const auto& e : r.timeline->events)
    if (e.device == device) ev.push_back(e);
  std::sort(ev.begin(), ev.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  std::vector<TimelineEvent> out;
  int seen = 0;
  for (const auto& e : ev) {
    if (e.name == first) ++seen;
    if (seen == 2) out.push_back(e);
  }
  return out;
}

static std::vector<std::string> names_of(const std::vector<TimelineEvent>& ev) {
  std::vector<std::string> out;
  for (const auto& e : ev) out.push_back(e.name);
  return out;
}

TEST_CASE("sps central server: gradients and parameters pass through flat buffers on the critical path") {
  // As dptwin-exec runs it (exec/strategy_ps.cpp): every rank concatenates its
  // gradients, rank 0 turns the reduced sum into the mean and copies it back,
  // steps, concatenates its parameters for the broadcast; the other ranks copy
  // the broadcast back into their parameters.
  PointSpec p = make_point("tiny", "localhost-cpu", 2, StrategyKind::Sps, 8);
  p.options.sps_mode = SpsMode::CentralServer;
  p.sim.trace = true;
  p.sim.steps = 3;
  PointResult r = simulate_point(p);
  REQUIRE(r.status == "ok");
  REQUIRE(r.timeline);
  const auto server = second_step(r, 0, "zero_grad + step overhead");
  const auto worker = second_step(r, 1, "zero_grad + step overhead");
  using V = std::vector<std::string>;
  CHECK(names_of(server) == V{"zero_grad + step overhead", "forward", "backward", "flatten grads", "reduce grads to server",
                              "mean into grads", "clip_grad_norm", "AdamW step (server)", "flatten params",
                              "broadcast params from server"});
  REQUIRE(worker.size() == 7);
  CHECK(names_of(worker) == V{"zero_grad + step overhead", "forward", "backward", "flatten grads", "reduce grads to server",
                              "broadcast params from server", "unflatten params"});
  // Each a memory pass over the gradients (fp32: the parameters' size); the
  // copies back one kernel per tensor, so longer than a flat copy.
  auto dur = [](const std::vector<TimelineEvent>& ev, const std::string& name) {
    for (const auto& e : ev)
      if (e.name == name) return e.end - e.start;
    return Time::zero();
  };
  const Time flat = dur(server, "flatten grads");
  CHECK(flat > Time::zero());
  CHECK(dur(server, "flatten params") == flat);
  CHECK(dur(server, "mean into grads") > flat * 2);
  CHECK(dur(worker, "unflatten params") > flat);
  for (const auto& e : server)
    if (e.name == "flatten grads" || e.name == "flatten params" || e.name == "mean into grads")
      CHECK(e.category == Category::Memcpy);
  // The worker's step ends with its copy, after the broadcast.
  const auto& last = worker[6];
  CHECK(last.start == worker[5].end);
  // One rank: no server, no copies.
  PointSpec one = p;
  one.devices = 1;
  PointResult solo = simulate_point(one);
  REQUIRE(solo.timeline);
  for (const auto& e : solo.timeline->events) CHECK(e.category != Category::Memcpy);
}

TEST_CASE("dps broadcasts the module buffers as DDP does: one message per dtype") {
  // HuggingFace GPT-2 registers a uint8 causal mask and an fp32 masked_bias
  // per block; broadcast_coalesced flattens each dtype apart: two broadcasts
  // before every forward, n_layer x P^2 bytes and n_layer x 4 bytes.
  PointSpec p = make_point("tiny", "localhost-cpu", 2, StrategyKind::Dps, 8);
  p.sim.trace = true;
  p.sim.steps = 2;
  PointResult r = simulate_point(p);
  REQUIRE(r.timeline);
  std::vector<TimelineEvent> bc;
  for (const auto& e : r.timeline->events)
    if (e.device == 0 && e.name.rfind("broadcast buffers", 0) == 0) bc.push_back(e);
  std::sort(bc.begin(), bc.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  REQUIRE(bc.size() == 4);  // two steps
  const double P = static_cast<double>(p.model.n_positions), L = p.model.n_layer;
  CHECK(bc[0].name == "broadcast buffers 0");
  CHECK(bc[0].bytes == doctest::Approx(L * P * P));
  CHECK(bc[1].name == "broadcast buffers 1");
  CHECK(bc[1].bytes == doctest::Approx(L * 4.0));
  CHECK(bc[1].start >= bc[0].end);
  CHECK(bc[2].bytes == bc[0].bytes);
  // broadcast_buffers=false: none.
  p.options.broadcast_buffers = false;
  PointResult off = simulate_point(p);
  for (const auto& e : off.timeline->events) CHECK(e.name.rfind("broadcast buffers", 0) != 0);
}

TEST_CASE("simulation is deterministic and representative devices are exact without jitter") {
  PointSpec p = make_point("gpt2", "dgx-a100", 128, StrategyKind::Dps, 4);
  PointResult a = simulate_point(p), b = simulate_point(p);
  CHECK(*a.step_time_s == *b.step_time_s);
  CHECK(a.simulated_devices < 128);
  PointSpec all = p;
  all.sim.all_devices = true;
  PointResult c = simulate_point(all);
  CHECK(c.simulated_devices == 128);
  CHECK(*c.step_time_s == doctest::Approx(*a.step_time_s).epsilon(1e-9));
  // With jitter, every device is simulated and stragglers slow the step down.
  PointSpec noisy = p;
  noisy.profile.compute_jitter = 0.05;
  PointResult d = simulate_point(noisy);
  CHECK(d.simulated_devices == 128);
  CHECK(*d.step_time_s > *a.step_time_s);
}

TEST_CASE("flow and analytic network modes agree on a symmetric single-node job") {
  PointSpec p = make_point("paper", "dgx-a100", 8, StrategyKind::Dps, 2);
  PointSpec q = p;
  q.sim.network_mode = NetworkMode::Analytic;
  double f = *simulate_point(p).step_time_s, a = *simulate_point(q).step_time_s;
  CHECK(a == doctest::Approx(f).epsilon(0.02));
}

TEST_CASE("dps timeline shows backward compute overlapping bucket allreduces") {
  PointSpec p = make_point("paper", "hal-v100", 4, StrategyKind::Dps, 2);
  p.sim.trace = true;
  PointResult r = simulate_point(p);
  REQUIRE(r.timeline);
  bool overlap = false;
  for (const auto& c : r.timeline->events) {
    if (c.stream != StreamKind::Comm || c.name.find("allreduce bucket") == std::string::npos) continue;
    for (const auto& b : r.timeline->events)
      if (b.device == c.device && b.category == Category::Backward && b.start < c.end && c.start < b.end) overlap = true;
  }
  CHECK(overlap);
  CHECK_FALSE(r.timeline->links.empty());
}

TEST_CASE("rings follow NVLink: DGX-1's hybrid cube-mesh is not crossed over PCIe") {
  auto topo = topology::build_topology(topology::load_cluster_preset("dgx1-v100"), 8);
  std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  auto ring = ring_order(topo, ranks);
  REQUIRE(ring.size() == 8);
  CHECK(ring.front() == 0);
  // In rank order GPU3 -> GPU4 has no NVLink (the route crosses PCIe and the CPUs);
  // the chosen ring uses only direct NVLink hops: each is faster than any PCIe path.
  double slowest_ordered = 1e300, slowest_ring = 1e300;
  for (int i = 0; i < 8; ++i) {
    slowest_ordered = std::min(slowest_ordered, topo.route_bandwidth(ranks[i], ranks[(i + 1) % 8]).value());
    slowest_ring = std::min(slowest_ring, topo.route_bandwidth(ring[i], ring[(i + 1) % 8]).value());
  }
  CHECK(slowest_ring > slowest_ordered);
  CHECK(slowest_ring >= 20e9);  // at least one NVLink 2.0 brick (25 GB/s x efficiency)
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == ranks);
}

// Horovod on `ranks` devices, two steps, traced, every collective priced at
// `latency` (a calibrated table of one regime).
static PointSpec traced_horovod(const std::string& model, const std::string& cluster, int ranks, Time latency) {
  PointSpec p = make_point(model, cluster, ranks, StrategyKind::Horovod, 2);
  p.sim.trace = true;
  sim::CommCalibration fixed;
  fixed.ranks = ranks;
  fixed.regimes = {{0, latency, 1.0}};
  p.profile.network = {fixed};
  return p;
}

TEST_CASE("horovod's loop negotiates synchronously: one negotiation at a time, later tensors batched") {
  // Negotiation slower than the 1 ms cycle (a calibrated collective latency of 3 ms).
  PointSpec p = traced_horovod("tiny", "localhost-cpu", 4, Time::ms(3));
  PointResult r = simulate_point(p);
  REQUIRE(r.timeline);
  std::vector<std::pair<Time, Time>> neg;
  for (const auto& e : r.timeline->events)
    if (e.device == 0 && e.category == Category::Negotiation) neg.emplace_back(e.start, e.end);
  REQUIRE(neg.size() >= 2);
  std::sort(neg.begin(), neg.end());
  for (size_t i = 1; i < neg.size(); ++i) CHECK(neg[i].first >= neg[i - 1].second);  // never two at once
  // Tensors that become ready during a 3+ ms negotiation wait for the next cycle
  // and go together: a few negotiations per step, not one per cycle that saw a
  // ready tensor (9 per step when cycles queued negotiations behind each other).
  const models::Workload w = models::build_gpt2_workload(p.model, p.micro_batch);
  int ready_ops = 0;
  for (const auto& op : w.backward) ready_ops += op.grads_ready.empty() ? 0 : 1;
  CHECK(ready_ops > 10);
  CHECK(static_cast<int>(neg.size()) <= 3 * p.sim.steps);
}

TEST_CASE("horovod on CPU ranks: the loop runs its collectives itself, the next negotiation follows them") {
  // localhost-cpu, tiny, 2 ranks, an allreduce priced at 4 ms: on CPU ranks
  // (Gloo, MPI) no negotiation runs while an allreduce is unfinished on that
  // rank; on GPUs (NCCL ops finished by another thread) the loop goes on
  // negotiating beside them.
  auto negotiations_beside_allreduce = [](const std::string& cluster, const std::string& model) {
    PointSpec p = traced_horovod(model, cluster, 2, Time::ms(4));
    p.options.cycle_time = Time::us(500);
    PointResult r = simulate_point(p);
    REQUIRE(r.timeline);
    int beside = 0, negotiations = 0;
    for (const auto& n : r.timeline->events) {
      if (n.device != 0 || n.category != Category::Negotiation) continue;
      ++negotiations;
      for (const auto& a : r.timeline->events)
        if (a.device == 0 && a.category == Category::Communication && a.start < n.end && n.start < a.end) ++beside;
    }
    CHECK(negotiations >= 2);
    return beside;
  };
  CHECK(negotiations_beside_allreduce("localhost-cpu", "tiny") == 0);
  CHECK(negotiations_beside_allreduce("hal-v100", "paper") > 0);
}

TEST_CASE("horovod's loop negotiates in idle cycles too: a tensor ready mid-negotiation waits for it to end") {
  // Every collective priced at 3 ms on 4 CPU ranks: a negotiation (cached:
  // the bit-vector allreduce) outlasts the 1 ms cycle, so an idle loop runs
  // them back to back and wakes on a grid of that length, not of the cycle.
  PointSpec p = traced_horovod("tiny", "localhost-cpu", 4, Time::ms(3));
  p.sim.steps = 3;
  const Time cycle = p.options.cycle_time;
  PointResult r = simulate_point(p);
  REQUIRE(r.timeline);
  std::vector<TimelineEvent> neg, out;
  for (const auto& e : r.timeline->events) {
    if (e.device != 0) continue;
    if (e.category == Category::Negotiation) neg.push_back(e);
    if (e.category == Category::Memcpy && e.name.find("out") != std::string::npos) out.push_back(e);
  }
  REQUIRE(neg.size() >= 4);
  auto by_start = [](const TimelineEvent& a, const TimelineEvent& b) { return a.start < b.start; };
  std::sort(neg.begin(), neg.end(), by_start);
  Time idle_period = neg.front().end - neg.front().start;
  for (const auto& n : neg) idle_period = std::min(idle_period, n.end - n.start);  // a cached negotiation
  REQUIRE(idle_period > cycle);
  int idle_waits = 0;
  for (size_t i = 1; i < neg.size(); ++i) {
    // The previous cycle did work: the loop's grid restarts once its last
    // buffer is copied out (CPU ranks), or a cycle after it started.
    Time anchor = neg[i - 1].start + cycle;
    for (const auto& o : out)
      if (o.end <= neg[i].start && o.start >= neg[i - 1].start) anchor = std::max(anchor, o.end);
    const Time wait = neg[i].start - anchor;
    REQUIRE(wait >= Time::zero());
    if (wait == Time::zero()) continue;  // tensors were queued: the next cycle at once
    ++idle_waits;
    const double cycles = wait.seconds() / idle_period.seconds();
    CHECK(cycles == doctest::Approx(std::round(cycles)).epsilon(1e-6));  // whole idle negotiations
  }
  CHECK(idle_waits >= 2);  // the first tensors of steps 1 and 2
}

TEST_CASE("sync skeleton: its cycle is its collectives, burst and optimizer; sync costs and core sharing add as in a step") {
  // The step-skeleton probe as the simulator runs it (sim/sync_skeleton.hpp),
  // on localhost-cpu with every collective step priced at 1 ms.
  const topology::Topology topo = topology::build_topology(topology::load_cluster_preset("localhost-cpu"), 4);
  DeviceProfile prof = make_point("tiny", "localhost-cpu", 2, StrategyKind::Dps, 1).profile;
  sim::CommCalibration fixed;
  fixed.regimes = {{0, Time::ms(1), 1.0}};
  prof.network = {fixed};
  prof.host_sharing.clear();
  prof.sync_by_ranks.clear();
  prof.sync_lag = prof.sync_latency = Time::zero();
  prof.comm_stall_by_ranks.clear();
  prof.comm_stall = 0;
  prof.overlap_slowdown = 0;
  SyncSkeleton sk;
  sk.burst = Time::ms(40);
  sk.optimizer = Time::ms(2);
  NetworkOptions no;
  no.calibration = prof.network;
  NetworkModel net(topo, no);
  auto price = [&](int ranks, CollectiveKind kind, double bytes) {
    CollectiveRequest r;
    r.kind = kind;
    r.algorithm = kind == CollectiveKind::Broadcast ? Algorithm::ParameterServer : Algorithm::Ring;
    for (int i = 0; i < ranks; ++i) r.ranks.push_back(i);
    r.bytes = Bytes(bytes);
    return net.cost(r).duration.seconds();
  };
  auto collectives = [&](int ranks) {
    return price(ranks, CollectiveKind::Broadcast, sk.mask_bytes) + price(ranks, CollectiveKind::Broadcast, sk.scalar_bytes) +
           price(ranks, CollectiveKind::AllReduce, sk.grad_bytes);
  };
  const double base = collectives(2) + 0.040 + 0.002;
  CHECK(simulate_sync_skeleton(prof, topo, sk).seconds() == doctest::Approx(base).epsilon(1e-6));
  // Only the allreduce follows compute inside the cycle: one latency; the
  // ranks meet there after the burst: lag x (40 ms / 100 ms)^0.5.
  prof.sync_by_ranks = {{2, Time::ms(10), 0.5, Time::ms(2)}};
  CHECK(simulate_sync_skeleton(prof, topo, sk).seconds() ==
        doctest::Approx(base + 0.002 + 0.010 * std::sqrt(0.4)).epsilon(1e-6));
  // Four ranks time-sharing two cores: burst and optimizer take twice as long.
  prof.sync_by_ranks.clear();
  prof.host_sharing = {{1, 1.0}, {2, 1.0}, {4, 2.0}};
  sk.ranks = 4;
  CHECK(simulate_sync_skeleton(prof, topo, sk).seconds() ==
        doctest::Approx(collectives(4) + 2 * (0.040 + 0.002)).epsilon(1e-6));
}
