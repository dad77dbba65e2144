#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "sim/build_common.hpp"
#include "sim/build_horovod.hpp"

namespace dptwin::sim {
namespace {

struct Interval {
  Time a, b;
};

// Total length of the union of intervals clipped to [lo, hi].
Time union_length(std::vector<Interval> v, Time lo, Time hi) {
  std::sort(v.begin(), v.end(), [](const Interval& x, const Interval& y) { return x.a < y.a; });
  Time total, cur_a, cur_b;
  bool open = false;
  for (auto iv : v) {
    iv.a = max(iv.a, lo);
    iv.b = min(iv.b, hi);
    if (iv.b <= iv.a) continue;
    if (!open) {
      cur_a = iv.a, cur_b = iv.b, open = true;
    } else if (iv.a <= cur_b) {
      cur_b = max(cur_b, iv.b);
    } else {
      total += cur_b - cur_a;
      cur_a = iv.a, cur_b = iv.b;
    }
  }
  if (open) total += cur_b - cur_a;
  return total;
}

// Length of the intersection of two interval unions within [lo, hi].
Time overlap_length(const std::vector<Interval>& x, const std::vector<Interval>& y, Time lo, Time hi) {
  // |X ∩ Y| = |X| + |Y| - |X ∪ Y|
  std::vector<Interval> both = x;
  both.insert(both.end(), y.begin(), y.end());
  return union_length(x, lo, hi) + union_length(y, lo, hi) - union_length(both, lo, hi);
}

struct RunOutput {
  std::vector<std::vector<TaskId>> step_ends;
  Time step_time;
  Breakdown breakdown;
  int64_t events = 0;
  int slots = 0;
  std::optional<Timeline> timeline;
};

RunOutput run_strategy(StepContext& ctx, const PointSpec& p) {
  Simulation sim(p.sim.seed);
  const bool horovod = ctx.kind == StrategyKind::Horovod || ctx.kind == StrategyKind::HorovodAmp;
  Executor ex(sim, ctx.slots(), executor_options(ctx));
  ctx.ex = &ex;
  ctx.sim = &sim;
  std::vector<CommRecord> records;
  ctx.comm_records = &records;
  ctx.record_links = p.sim.trace;
  const int steps = std::max(1, p.sim.steps);

  RunOutput out;
  out.slots = ctx.slots();
  std::unique_ptr<HorovodRuntime> hvd;
  if (horovod) {
    hvd = std::make_unique<HorovodRuntime>(ctx, steps);
    hvd->start();
  } else {
    std::vector<TaskId> prev(ctx.slots(), kNoTask);
    for (int s = 0; s < steps; ++s) {
      switch (ctx.kind) {
        case StrategyKind::Single: prev = build_single_step(ctx, prev, s); break;
        case StrategyKind::Sps: prev = build_sps_step(ctx, prev, s); break;
        default: prev = build_dps_step(ctx, prev, s); break;
      }
      out.step_ends.push_back(prev);
    }
  }
  sim.run();
  if (hvd) out.step_ends = hvd->step_ends();
  DPTWIN_ASSERT(static_cast<int>(out.step_ends.size()) == steps, "every step must be built and finished");
  std::vector<Time> ends;
  for (const auto& se : out.step_ends) {
    Time e;
    for (TaskId t : se) {
      DPTWIN_ASSERT(ex.finished(t), "step did not finish (dependency cycle?)");
      e = max(e, ex.end_of(t));
    }
    ends.push_back(e);
  }
  Time lo = steps >= 2 ? ends[steps - 2] : Time::zero();
  Time hi = ends[steps - 1];
  out.step_time = steps >= 2 ? (ends[steps - 1] - ends[0]).scaled(1.0 / (steps - 1)) : ends[0];

  // Breakdown on slot 0 over the last step.
  std::vector<Interval> compute, comm, busy;  // busy: compute stream work incl. optimizer
  Time optimizer;
  for (size_t t = 0; t < ex.task_count(); ++t) {
    auto v = ex.view(static_cast<TaskId>(t));
    if (v.device != 0 || v.end <= lo || v.start >= hi) continue;
    if (v.stream == StreamKind::Compute) {
      if (v.category == Category::Optimizer) {
        optimizer += min(v.end, hi) - max(v.start, lo);
        busy.push_back({v.start, v.end});
      } else if (v.category != Category::Overhead) {
        compute.push_back({v.start, v.end});
        busy.push_back({v.start, v.end});
      }
    } else if (v.stream == StreamKind::Comm && v.end > v.start) {
      comm.push_back({v.start, v.end});
    }
  }
  Time window = hi - lo;
  Time comp = union_length(compute, lo, hi);
  Time comm_total = union_length(comm, lo, hi);
  Time hidden = overlap_length(comm, busy, lo, hi);
  Time exposed = comm_total - hidden;
  out.breakdown.compute_s = comp.seconds();
  out.breakdown.optimizer_s = optimizer.seconds();
  out.breakdown.exposed_comm_s = exposed.seconds();
  out.breakdown.hidden_comm_s = hidden.seconds();
  out.breakdown.overhead_s = std::max(0.0, (window - comp - optimizer - exposed).seconds());
  out.events = sim.events_processed();

  if (p.sim.trace) {
    Timeline tl;
    int keep = std::min(p.sim.trace_devices, ctx.slots());
    for (size_t t = 0; t < ex.task_count(); ++t) {
      auto v = ex.view(static_cast<TaskId>(t));
      if (v.device >= keep || v.end <= v.start) continue;
      tl.events.push_back(TimelineEvent{ctx.sim_devices[v.device], v.stream, v.category, ex.name(v.name), v.start, v.end,
                                        v.bytes});
    }
    for (const auto& r : records) {
      if (r.member == kNoTask || !ex.finished(r.member)) continue;
      Time a = ex.start_of(r.member), b = ex.end_of(r.member);
      if (b <= a) continue;
      for (auto [link, bytes] : r.link_bytes)
        tl.links.push_back(LinkActivity{link, ctx.topo->link(link).name, a, b, bytes});
    }
    out.timeline = std::move(tl);
  }
  return out;
}

// Simulated devices: every device when they can differ (jitter, small jobs, asked
// for), otherwise the first few: with identical devices and no noise, every
// device of a data-parallel job runs the same schedule, so the others are exact copies.
std::vector<int> choose_slots(const PointSpec& p, int n, const DeviceProfile& prof) {
  int k = n;
  if (!p.sim.all_devices && prof.compute_jitter <= 0 && n > 64) k = std::min(n, std::max(8, p.sim.trace_devices));
  std::vector<int> v(k);
  for (int i = 0; i < k; ++i) v[i] = i;
  return v;
}

// Limits for pathological inputs (scenarios/README.md, "Limits"). Before any
// Time is formed, a point is refused when a double-precision upper bound of one
// run's simulated time, or of the simulator's work, is absurd: integer
// nanoseconds hold +-292 years, and a sweep should not hang.
constexpr double kMaxSimulatedSeconds = 1e8;  // ~3 years of simulated time per run
constexpr double kMaxDeviceMicroSteps = 2e6;  // steps x accumulation x simulated devices (~10-30 s of wall time)

std::string point_name(const PointSpec& p) {
  std::string out;
  for (const auto& [k, v] : p.labels) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", k, v);
  return out.empty() ? p.scenario : out;
}

// Upper bound of one run, in seconds: every op at its slowest (lowest peak and
// efficiency, widest dtype, every byte moved), every gradient byte crossing the
// slowest link once per rank, with a factor 4 of slack for jitter and contention.
double simulated_seconds_bound(const PointSpec& p, const models::Workload& w, const topology::Topology& topo,
                               int n) {
  const DeviceProfile& prof = p.profile;
  const auto& spec = prof.spec;
  const double peak =
      std::min({spec.peak(DType::FP32).value(), spec.peak(DType::FP16).value(), spec.peak(DType::BF16).value()});
  const double membw = spec.memory_bandwidth.value();
  const double launch = prof.launch_overhead.seconds();
  double micro = 0;
  for (const auto* ops : {&w.forward, &w.backward})
    for (const auto& op : *ops) {
      if (op.flops > 0)
        micro += op.flops / (peak * std::min({prof.matmul.at(op.flops), prof.batched_matmul.at(op.flops), 0.5}));
      const double elems = op.elements_read + op.elements_written;
      if (elems > 0) micro += 36.0 * elems / (membw * prof.memory.at(elems / 8));  // <= 4 B/elem, <= 9x re-reads
      micro += 6.0 * static_cast<double>(op.k) * static_cast<double>(op.n) / (membw * prof.memory.max);
      micro += 16 * launch;
    }
  double per_step = micro * p.options.accumulation + prof.step_overhead.seconds();
  double grad_bytes = 0;
  for (const auto& t : w.tensors) {
    const double numel = static_cast<double>(t.numel);
    per_step += 64.0 * numel / (membw * prof.memory.at(numel)) + (prof.optimizer_kernels_per_tensor + 4) * launch;
    grad_bytes += 4.0 * numel;
  }
  per_step += 8.0 * grad_bytes / prof.host_memcpy.value();
  double min_bw = 0, max_lat = 0;
  for (int l = 0; l < topo.num_links(); ++l) {
    const auto& link = topo.link(l);
    const double bw = link.effective_bandwidth().value();
    if (min_bw == 0 || bw < min_bw) min_bw = bw;
    max_lat = std::max(max_lat, link.latency.seconds());
  }
  if (min_bw > 0) per_step += 4.0 * grad_bytes * n / min_bw;
  const double messages = static_cast<double>(w.tensors.size()) + 2;
  per_step += messages * 4.0 * n * 8 * max_lat + messages * 2 * p.options.cycle_time.seconds();
  return 4.0 * per_step * std::max(1, p.sim.steps);
}

void check_point_scale(const PointSpec& p, const models::Workload& w, const topology::Topology& topo, int n,
                       size_t slots) {
  const double work = static_cast<double>(std::max(1, p.sim.steps)) * p.options.accumulation * slots;
  if (work > kMaxDeviceMicroSteps)
    throw InputError({}, "",
                     fmt::format("point {}: simulating {} steps x {} micro-steps on {} devices is beyond the limit of "
                                 "{:g} device micro-steps per point; lower simulation.steps, accumulation or the "
                                 "devices simulated (jitter and all_devices simulate every device)",
                                 point_name(p), p.sim.steps, p.options.accumulation, slots, kMaxDeviceMicroSteps));
  const double bound = simulated_seconds_bound(p, w, topo, n);
  if (!(bound <= kMaxSimulatedSeconds))
    throw InputError({}, "",
                     fmt::format("point {}: its figures give simulated times beyond the limit of {:g} s per run "
                                 "(upper bound {:.3g} s); check bandwidths, FLOP rates, efficiencies and batch sizes",
                                 point_name(p), kMaxSimulatedSeconds, bound));
}

}  // namespace

PointResult simulate_point(const PointSpec& p) {
  auto wall0 = std::chrono::steady_clock::now();
  PointResult r;
  r.params = p.labels;
  const int n = p.strategy == StrategyKind::Single ? 1 : p.devices;
  r.devices = n;
  models::Workload work = models::build_gpt2_workload(p.model, p.micro_batch);
  topology::Topology topo = topology::build_topology(p.cluster, n);
  // Calibrated profiles: ranks sharing one machine's cores slow each other down;
  // collectives follow the fitted size regimes (sim/device_profile.hpp).
  // When every rank is simulated, the Executor shares each machine's cores
  // among the compute tasks running at that moment (a parameter server's
  // optimizer runs alone while the workers wait); otherwise every compute
  // task is slowed by the factor for all the ranks on the machine.
  int on_machine = n;
  if (!p.profile.ranks_share_machine) {
    on_machine = 0;
    for (int d = 0; d < n; ++d) on_machine += topo.host_of(d) == topo.host_of(0);
  }
  std::vector<int> slots = choose_slots(p, n, p.profile);
  const bool share_cores = !p.profile.host_sharing.empty() && n > 1 && static_cast<int>(slots.size()) == n;
  const DeviceProfile prof = p.profile.shared_by(on_machine, share_cores ? DeviceProfile::SharingMode::ByExecutor
                                                                               : DeviceProfile::SharingMode::Fixed);
  NetworkOptions no;
  no.mode = p.sim.network_mode;
  no.calibration = prof.network;
  NetworkModel net(topo, no);

  StepContext ctx;
  ctx.point = &p;
  ctx.work = &work;
  ctx.prof = &prof;
  ctx.kind = p.strategy;
  ctx.opts = &p.options;
  ctx.prec = precision_of(p.strategy, p.options);
  ctx.topo = &topo;
  ctx.net = &net;
  for (int i = 0; i < n; ++i) ctx.ranks.push_back(i);
  ctx.ring_ranks = ring_order(topo, ctx.ranks);
  ctx.sim_devices = std::move(slots);
  if (share_cores)
    for (int d : ctx.sim_devices) ctx.core_host.push_back(p.profile.ranks_share_machine ? 0 : topo.host_of(d));
  check_point_scale(p, work, topo, n, ctx.sim_devices.size());
  const bool dp = p.strategy == StrategyKind::Sps && n > 1 && sps_uses_data_parallel(ctx);
  compute_op_times(ctx, dp ? static_cast<double>(n) : 1.0);

  r.global_batch = static_cast<int64_t>(p.micro_batch) * p.options.accumulation * n;
  r.tokens_per_step = r.global_batch * work.seq_len;
  r.memory = estimate_device_memory(ctx);
  if (p.strategy == StrategyKind::Sps) {
    r.message = dp ? "sps as torch.nn.DataParallel (one process, GPU0 is the server)"
                   : (n > 1 ? "sps as a multi-process central parameter server on rank 0" : "");
  }
  if (p.strategy == StrategyKind::Single && p.devices > 1) r.message = "single-device baseline (uses 1 device)";
  if (r.memory.oom) {
    r.status = "oom";
    r.message = fmt::format("needs {:.2f} GiB on device {} but it has {:.2f} GiB", r.memory.peak / gib(1).value(),
                            r.memory.device, r.memory.capacity / gib(1).value());
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }
  RunOutput run = run_strategy(ctx, p);
  double step = run.step_time.seconds();
  r.step_time_s = step;
  r.tokens_per_s = static_cast<double>(r.tokens_per_step) / step;
  r.samples_per_s = static_cast<double>(r.global_batch) / step;
  r.breakdown = run.breakdown;
  r.events = run.events;
  r.simulated_devices = run.slots;
  r.timeline = std::move(run.timeline);

  const double model_flops = models::training_flops_per_token_estimate(p.model);
  const double peak = p.profile.spec.peak(ctx.prec.matmul_dtype()).value();
  r.mfu = *r.tokens_per_s * model_flops / (n * peak);

  // Scaling efficiency against one device with the same micro-batch and precision.
  if (n == 1) {
    r.scaling_efficiency = 1.0;
  } else {
    PointSpec base = p;
    base.strategy = StrategyKind::Single;
    base.devices = 1;
    base.options.amp = ctx.prec.amp;
    base.options.half = ctx.prec.half;
    base.sim.trace = false;
    PointResult b = simulate_point(base);
    if (b.tokens_per_s) r.scaling_efficiency = *r.tokens_per_s / (n * *b.tokens_per_s);
  }

  double price = p.pricing.per_device_hour.value_or(p.profile.spec.price_per_hour);
  if (price > 0) r.cost_per_million_tokens = price * n / 3600.0 * (1e6 / *r.tokens_per_s);
  if (p.token_budget) {
    r.time_to_train_s = *p.token_budget / *r.tokens_per_s;
    if (price > 0) r.cost_to_train = price * n * *r.time_to_train_s / 3600.0;
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

std::vector<PointResult> simulate_all(const std::vector<PointSpec>& points, int threads,
                                      const std::function<void(size_t, size_t)>& progress) {
  std::vector<PointResult> results(points.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(points.size(), 1)));
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (size_t i = next++; i < points.size(); i = next++) {
      try {
        results[i] = simulate_point(points[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      size_t d = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(mu);
        progress(d, points.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace dptwin::sim
