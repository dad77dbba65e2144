#include "sim/build_common.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace dptwin::sim {

std::vector<int> ring_order(const topology::Topology& topo, const std::vector<int>& ranks) {
  std::vector<int> out;
  bool single_node = true;
  for (int r : ranks) single_node = single_node && topo.host_of(r) == topo.host_of(ranks.front());
  // Nodes built from one template share their link matrix: solve each distinct matrix once.
  std::vector<std::pair<std::vector<double>, std::vector<int>>> solved;  // (matrix, best positions)
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j < ranks.size() && topo.host_of(ranks[j]) == topo.host_of(ranks[i])) ++j;
    const int g = static_cast<int>(j - i);
    if (g <= 2 || g > 8) {
      out.insert(out.end(), ranks.begin() + i, ranks.begin() + j);
      i = j;
      continue;
    }
    std::vector<double> bw(g * g, 0.0);
    for (int a = 0; a < g; ++a)
      for (int b = 0; b < g; ++b)
        if (a != b) bw[a * g + b] = topo.route_bandwidth(ranks[i + a], ranks[i + b]).value();
    const std::vector<int>* best = nullptr;
    for (const auto& [m, p] : solved)
      if (m == bw) best = &p;
    if (!best) {
      std::vector<int> perm(g - 1), top;
      for (int k = 0; k < g - 1; ++k) perm[k] = k + 1;
      double best_min = -1, best_sum = -1;
      do {
        double mn = 1e300, sum = 0;
        int prev = 0;
        auto hop = [&](int a, int b) {
          mn = std::min(mn, bw[a * g + b]);
          sum += bw[a * g + b];
        };
        for (int r : perm) {
          hop(prev, r);
          prev = r;
        }
        if (single_node) hop(prev, 0);
        if (mn > best_min * (1 + 1e-9) || (mn >= best_min * (1 - 1e-9) && sum > best_sum * (1 + 1e-9))) {
          best_min = mn, best_sum = sum, top = perm;
        }
      } while (std::next_permutation(perm.begin(), perm.end()));
      top.insert(top.begin(), 0);
      solved.emplace_back(bw, top);
      best = &solved.back().second;
    }
    for (int pos : *best) out.push_back(ranks[i + pos]);
    i = j;
  }
  return out;
}

void compute_op_times(StepContext& ctx, double launch_factor) {
  ctx.launch_factor = launch_factor;
  DeviceProfile prof = *ctx.prof;
  prof.launch_overhead = prof.launch_overhead.scaled(launch_factor);
  ctx.forward_times.clear();
  ctx.backward_times.clear();
  for (const auto& op : ctx.work->forward) ctx.forward_times.push_back(op_cost(op, prof, ctx.prec).time);
  // Autograd accumulates each finished parameter gradient into its (zeroed)
  // .grad: one kernel per tensor reading both and writing the sum.
  const double grad_size = dtype_size(ctx.prec.grad_dtype());
  for (const auto& op : ctx.work->backward) {
    Time t = op_cost(op, prof, ctx.prec).time;
    for (int ti : op.grads_ready)
      t += tensor_pass_time(3.0 * static_cast<double>(ctx.work->tensors[ti].numel) * grad_size, 1, prof);
    ctx.backward_times.push_back(t);
  }
}

Time sum_forward(const StepContext& ctx) {
  Time t;
  for (Time x : ctx.forward_times) t += x;
  return t;
}

Time sum_backward(const StepContext& ctx, size_t begin, size_t end) {
  Time t;
  for (size_t i = begin; i < end && i < ctx.backward_times.size(); ++i) t += ctx.backward_times[i];
  return t;
}

double gradient_bytes(const StepContext& ctx, DType dtype) {
  return static_cast<double>(ctx.work->parameters()) * dtype_size(dtype);
}

int tensor_count(const StepContext& ctx) { return static_cast<int>(ctx.work->tensors.size()); }

double buffer_bytes(const StepContext& ctx) {
  const auto& c = ctx.work->config;
  return static_cast<double>(c.n_layer) * static_cast<double>(c.n_positions) * static_cast<double>(c.n_positions);
}

std::vector<double> buffer_broadcast_bytes(const StepContext& ctx) {
  std::vector<std::pair<double, double>> by_width;  // (bytes per element, bytes), first appearance first
  for (const auto& b : models::gpt2_buffers(ctx.work->config)) {
    auto it = std::find_if(by_width.begin(), by_width.end(), [&](const auto& g) { return g.first == b.bytes_per_element; });
    if (it == by_width.end()) it = by_width.insert(by_width.end(), {b.bytes_per_element, 0.0});
    it->second += b.bytes();
  }
  std::vector<double> out;
  for (const auto& g : by_width) out.push_back(g.second);
  return out;
}

namespace {

// Sum over parameter tensors of max(kernels x launch, bytes_per_param x numel / bandwidth):
// launches are asynchronous, so a tensor costs whichever of dispatch and memory traffic is longer.
Time per_tensor_pass(const StepContext& ctx, int kernels, double bytes_per_param) {
  // Optimizer-side passes run from one thread even under DataParallel: no launch_factor.
  Time total;
  for (const auto& t : ctx.work->tensors)
    total += tensor_pass_time(bytes_per_param * static_cast<double>(t.numel), kernels, *ctx.prof);
  return total;
}

// A multi-tensor (Apex / foreach) pass: few launches, one sweep of memory.
Time fused_pass(const StepContext& ctx, double bytes_per_param) {
  const DeviceProfile& p = *ctx.prof;
  double bytes = bytes_per_param * static_cast<double>(ctx.work->parameters());
  int launches = 2 + tensor_count(ctx) / 110;  // Apex multi_tensor_apply packs ~110 tensors per launch
  return memory_pass_time(bytes, launches, p);
}

}  // namespace

OptimizerWork optimizer_work(const StepContext& ctx) {
  OptimizerWork w;
  const PrecisionMode& pr = ctx.prec;
  double grad = dtype_size(pr.grad_dtype());
  if (pr.loss_scaling() || pr.amp == AmpLevel::O2) {
    // Apex: unscale model grads into fp32 master grads (O2) or in place (O1),
    // checking for inf/NaN on the way; then a host sync to read the overflow flag.
    double bpp = pr.amp == AmpLevel::O2 ? grad + 4.0 : 8.0;
    w.unscale = fused_pass(ctx, bpp) + ctx.prof->launch_overhead * 2;
  }
  if (ctx.opts->clip_grad_norm) {
    // clip_grad_norm_ (PyTorch 1.8): one norm kernel per tensor (reads fp32 grads),
    // stack + norm, a host sync, then one in-place multiply per tensor.
    w.clip = per_tensor_pass(ctx, 2, 4.0 + 8.0) + ctx.prof->launch_overhead * 3;
  }
  // Eager AdamW on fp32 parameters: ~10 kernels per tensor moving ~96 bytes per parameter
  // (decay p; update exp_avg and exp_avg_sq; sqrt; divide; add eps; addcdiv into p);
  // calibration fits both figures to a measured AdamW.
  w.step = per_tensor_pass(ctx, ctx.prof->optimizer_kernels_per_tensor, ctx.prof->optimizer_bytes_per_param);
  if (pr.fp32_master_weights()) w.master_copy = fused_pass(ctx, 4.0 + dtype_size(pr.weight_dtype()));
  w.zero_grad = per_tensor_pass(ctx, 1, grad);
  return w;
}

TaskId add_optimizer_tasks(StepContext& ctx, int slot, const OptimizerWork& ow, const std::vector<TaskId>& deps,
                           bool unscale, const char* step_name) {
  Executor& ex = *ctx.ex;
  std::vector<TaskId> after = deps;
  auto stage = [&](Time d, const char* name) {
    if (d <= Time::zero()) return;
    after = {ex.add_task(slot, StreamKind::Compute, Category::Optimizer, d, ex.name_id(name), after)};
  };
  if (unscale) stage(ow.unscale, "unscale + overflow check");
  stage(ow.clip, "clip_grad_norm");
  after = {ex.add_task(slot, StreamKind::Compute, Category::Optimizer, ow.step, ex.name_id(step_name), after)};
  stage(ow.master_copy, "master -> model copy");
  return after.front();
}

Algorithm allreduce_algorithm(const StepContext& ctx) {
  // Auto is resolved per message when priced (see add_collective_on), as NCCL's tuner does.
  return ctx.opts->algorithm;
}

std::vector<TaskId> add_collective_on(StepContext& ctx, const std::vector<int>& slots, const std::vector<int>& ranks,
                                      CollectiveKind kind, Algorithm alg, double bytes, const std::string& name,
                                      const std::vector<std::vector<TaskId>>& deps, int root, Category cat) {
  CollectiveRequest req;
  req.kind = kind;
  req.algorithm = alg;
  req.ranks = ranks;
  const bool unrooted =
      kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllGather;
  if (unrooted && ranks == ctx.ranks && !ctx.ring_ranks.empty()) req.ranks = ctx.ring_ranks;
  req.bytes = Bytes(bytes);
  req.root = root;
  // NCCL runs one ring per channel, each rotated so that node crossings leave
  // through different local ranks (and NICs); across nodes we use as many
  // channels as there are ranks on a node.
  if (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllGather) {
    int h0 = ctx.topo->host_of(ranks.front()), per_host = 0;
    bool multi = false;
    for (int r : ranks) {
      if (ctx.topo->host_of(r) == h0) ++per_host;
      else multi = true;
    }
    if (multi) req.channels = per_host;
  }
  NetworkModel* net = ctx.net;
  int record = -1;
  if (ctx.record_links && ctx.comm_records) {
    ctx.comm_records->push_back({});
    record = static_cast<int>(ctx.comm_records->size() - 1);
  }
  std::vector<CommRecord>* records = ctx.comm_records;
  auto price = [net, req, record, records]() -> Time {
    if (req.ranks.size() < 2 || req.bytes.value() <= 0) return Time::zero();
    const CollectiveCost* best = nullptr;
    if (req.algorithm == Algorithm::Auto) {
      // Like NCCL's tuner: price the candidates for this message and take the fastest.
      // Across nodes NCCL's rings and trees are topology aware (intra-node chains,
      // one channel per NIC), which the hierarchical decomposition represents.
      std::vector<Algorithm> candidates{Algorithm::Ring, Algorithm::Tree};
      if (req.channels > 1) candidates.push_back(Algorithm::Hierarchical);
      for (Algorithm a : candidates) {
        CollectiveRequest r = req;
        r.algorithm = a;
        const CollectiveCost& c = net->cost(r);
        if (!best || c.duration < best->duration) best = &c;
      }
    } else {
      best = &net->cost(req);
    }
    const CollectiveCost& c = *best;
    if (record >= 0) (*records)[record].link_bytes = c.link_bytes;
    return c.duration;
  };
  auto members = ctx.ex->add_collective(slots, cat, ctx.ex->name_id(name), deps, bytes, price);
  if (record >= 0) (*ctx.comm_records)[record].member = members.front();
  return members;
}

std::vector<TaskId> add_collective_all(StepContext& ctx, CollectiveKind kind, Algorithm alg, double bytes,
                                       const std::string& name, const std::vector<std::vector<TaskId>>& deps, int root,
                                       Category cat) {
  std::vector<int> slots(ctx.slots());
  for (int i = 0; i < ctx.slots(); ++i) slots[i] = i;
  return add_collective_on(ctx, slots, ctx.ranks, kind, alg, bytes, name, deps, root, cat);
}

ExecutorOptions executor_options(const StepContext& ctx) {
  ExecutorOptions eo;
  eo.overlap_slowdown = ctx.prof->overlap_slowdown;
  eo.jitter = ctx.prof->compute_jitter;
  eo.sync_lag = ctx.prof->sync_lag;
  eo.sync_exponent = ctx.prof->sync_exponent;
  eo.sync_skew = ctx.prof->sync_skew;
  eo.sync_latency = ctx.prof->sync_latency;
  eo.comm_waits_for_compute = ctx.world() > 1 && ctx.prof->comm_stall >= 0.5;
  eo.comm_needs_free_core = ctx.prof->comm_stall_one < 0.5;
  if (!ctx.core_host.empty()) {
    eo.host_of_device = ctx.core_host;
    std::map<int, int> per_host;
    int most = 2;  // the most ranks any machine holds: the table covers every count that can occur
    for (int h : ctx.core_host) most = std::max(most, ++per_host[h]);
    for (int k = 0; k <= most; ++k) eo.sharing_slowdown.push_back(ctx.prof->sharing_factor(std::max(1, k)));
  }
  // Horovod's background loop wakes every cycle on every rank, busy or not.
  const bool horovod = ctx.kind == StrategyKind::Horovod || ctx.kind == StrategyKind::HorovodAmp;
  if (horovod && ctx.world() > 1) eo.background_slowdown = ctx.prof->background_loop_slowdown;
  return eo;
}

bool sps_uses_data_parallel(const StepContext& ctx) {
  switch (ctx.opts->sps_mode) {
    case SpsMode::DataParallel: return true;
    case SpsMode::CentralServer: return false;
    case SpsMode::Auto: break;
  }
  std::set<int> hosts;
  for (int r : ctx.ranks) hosts.insert(ctx.topo->host_of(r));
  return hosts.size() == 1 && ctx.prof->spec.kind == topology::DeviceKind::Gpu;
}

std::vector<TaskId> build_single_step(StepContext& ctx, const std::vector<TaskId>& prev, int step) {
  Executor& ex = *ctx.ex;
  std::string s = std::to_string(step);
  OptimizerWork ow = optimizer_work(ctx);
  std::vector<TaskId> out;
  for (int slot = 0; slot < ctx.slots(); ++slot) {
    TaskId last = ex.add_task(slot, StreamKind::Compute, Category::Overhead, ow.zero_grad + ctx.prof->step_overhead,
                              ex.name_id("zero_grad + step overhead"), {prev[slot]});
    for (int m = 0; m < ctx.opts->accumulation; ++m) {
      last = ex.add_task(slot, StreamKind::Compute, Category::Forward, sum_forward(ctx), ex.name_id("forward"), {last});
      last = ex.add_task(slot, StreamKind::Compute, Category::Backward, sum_backward(ctx, 0, ctx.backward_times.size()),
                         ex.name_id("backward"), {last});
    }
    out.push_back(add_optimizer_tasks(ctx, slot, ow, {last}));
  }
  return out;
}

}  // namespace dptwin::sim
