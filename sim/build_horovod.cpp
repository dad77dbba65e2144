#include "sim/build_horovod.hpp"

#include <cmath>

namespace dptwin::sim {

HorovodRuntime::HorovodRuntime(StepContext& ctx, int steps)
    : ctx_(ctx), steps_(steps), cached_(ctx.work->tensors.size(), false), ow_(optimizer_work(ctx)) {}

void HorovodRuntime::start() { build_step(0, std::vector<TaskId>(ctx_.slots(), kNoTask)); }

void HorovodRuntime::build_step(int step, const std::vector<TaskId>& prev) {
  Executor& ex = *ctx_.ex;
  step_ = step;
  round_ = 0;
  const int n = ctx_.slots();
  const auto& w = *ctx_.work;
  ready_count_.assign(w.tensors.size(), 0);
  outstanding_ = static_cast<int>(w.tensors.size());
  backward_end_.assign(n, kNoTask);
  comm_end_.assign(n, kNoTask);
  for (int s = 0; s < n; ++s) {
    TaskId last = ex.add_task(s, StreamKind::Compute, Category::Overhead, ow_.zero_grad + ctx_.prof->step_overhead,
                              ex.name_id("zero_grad + step overhead"), {prev[s]});
    for (int m = 0; m < ctx_.opts->accumulation; ++m) {
      last = ex.add_task(s, StreamKind::Compute, Category::Forward, sum_forward(ctx_), ex.name_id("forward"), {last});
      if (m + 1 < ctx_.opts->accumulation || ctx_.world() == 1) {
        last = ex.add_task(s, StreamKind::Compute, Category::Backward,
                           sum_backward(ctx_, 0, ctx_.backward_times.size()), ex.name_id("backward"), {last});
        continue;
      }
      // Last micro-step: a segment per op that completes gradients; its hooks enqueue requests.
      size_t begin = 0;
      for (size_t i = 0; i < w.backward.size(); ++i) {
        if (w.backward[i].grads_ready.empty() && i + 1 < w.backward.size()) continue;
        last = ex.add_task(s, StreamKind::Compute, Category::Backward, sum_backward(ctx_, begin, i + 1),
                           ex.name_id("backward"), {last});
        begin = i + 1;
        std::vector<int> tensors = w.backward[i].grads_ready;
        if (!tensors.empty()) ex.on_finish(last, [this, tensors] {
          for (int t : tensors) tensor_ready(t);
        });
      }
    }
    backward_end_[s] = last;
  }
  if (ctx_.world() == 1) place_optimizer();
}

void HorovodRuntime::tensor_ready(int tensor) {
  if (++ready_count_[tensor] == ctx_.slots()) {
    ready_queue_.push_back(tensor);
    ensure_ticking();
  }
}

void HorovodRuntime::ensure_ticking() {
  if (ticking_) return;
  ticking_ = true;
  // Horovod's loop starts a cycle cycle_time after the previous one started,
  // or at once when that one ran longer. It negotiates in every cycle, also
  // when nothing is ready (the same collective with empty requests), so an
  // idle cycle lasts the longer of cycle_time and that negotiation: the loop
  // wakes on a grid of that period from the first cycle after the last one
  // that did work (from the start of the process before any did), and a
  // tensor ready mid-cycle waits for the cycle in flight to end. Where the
  // negotiation outlasts the cycle (ranks time-sharing cores: 4 ms against
  // 1 ms), that wait is the negotiation's own length, not the cycle's.
  const int64_t period = std::max<int64_t>(idle_cycle().count_ns(), 1);
  const int64_t now = ctx_.sim->now().count_ns(), anchor = anchor_.count_ns();
  const int64_t next = now <= anchor ? anchor : anchor + ((now - anchor) / period + 1) * period;
  ctx_.sim->schedule_at(Time::ns(next), [this] { tick(); });
}

Time HorovodRuntime::idle_cycle() {
  const bool warm = ctx_.opts->response_cache && cached_count_ == cached_.size();
  return std::max(ctx_.opts->cycle_time, negotiation_time(0, warm));
}

Time HorovodRuntime::negotiation_time(size_t tensors, bool all_cached) {
  if (ctx_.world() == 1) return Time::zero();
  // Control messages are small and latency bound: alpha-beta prices them without
  // flow solving, once per distinct request count.
  if (bits_time_ < Time::zero()) {
    CollectiveRequest bits{CollectiveKind::AllReduce, Algorithm::HalvingDoubling, ctx_.ranks,
                           Bytes(std::ceil(ctx_.work->tensors.size() / 8.0) + 8), 0};
    bits_time_ = ctx_.net->analytic_time(bits) * 2;
  }
  if (all_cached) return bits_time_;
  auto it = request_time_.find(tensors);
  if (it != request_time_.end()) return it->second;
  double req_bytes = 128.0 * static_cast<double>(tensors);
  CollectiveRequest g{CollectiveKind::Gather, Algorithm::ParameterServer, ctx_.ranks, Bytes(req_bytes), 0};
  CollectiveRequest b{CollectiveKind::Broadcast, Algorithm::ParameterServer, ctx_.ranks, Bytes(req_bytes), 0};
  Time t = bits_time_ + ctx_.net->analytic_time(g) + ctx_.net->analytic_time(b) +
           Time::us(2) * static_cast<int64_t>(tensors);
  request_time_.emplace(tensors, t);
  return t;
}

void HorovodRuntime::tick() {
  ++cycles_;
  anchor_ = ctx_.sim->now() + ctx_.opts->cycle_time;  // the next cycle's earliest start
  Executor& ex = *ctx_.ex;
  const int n = ctx_.slots();
  const auto& w = *ctx_.work;
  if (!ready_queue_.empty()) {
    // Negotiation: cached responses need only a bit-vector allreduce; new ones a
    // gather of requests to rank 0, its bookkeeping, and a broadcast of the response.
    std::vector<int> batch(ready_queue_.begin(), ready_queue_.end());
    ready_queue_.clear();
    bool all_cached = ctx_.opts->response_cache;
    for (int t : batch) all_cached = all_cached && cached_[t];
    Time neg = negotiation_time(batch.size(), all_cached);
    for (int t : batch) {
      if (!cached_[t]) ++cached_count_;
      cached_[t] = true;
    }
    std::vector<TaskId> neg_task(n);
    for (int s = 0; s < n; ++s)
      neg_task[s] = ex.add_task(s, StreamKind::Host, Category::Negotiation, neg, ex.name_id("negotiate"));
    // Fuse in response order up to the threshold.
    const double elem = ctx_.opts->fp16_compression ? 2.0 : dtype_size(ctx_.prec.grad_dtype());
    const double grad_elem = dtype_size(ctx_.prec.grad_dtype());
    const double threshold = ctx_.opts->fusion_threshold.value();
    const Algorithm alg = ctx_.opts->hierarchical_allreduce ? Algorithm::Hierarchical : allreduce_algorithm(ctx_);
    size_t i = 0;
    while (i < batch.size()) {
      double bytes = 0;
      size_t j = i;
      int count = 0;
      while (j < batch.size()) {
        double b = static_cast<double>(w.tensors[batch[j]].numel) * elem;
        if (count > 0 && bytes + b > threshold) break;
        bytes += b;
        ++count;
        ++j;
      }
      double grad_bytes = bytes / elem * grad_elem;
      // Copy into the fusion buffer (and compress), allreduce, copy out and scale by 1/size.
      bool fused = count > 1;
      Time in = fused || ctx_.opts->fp16_compression
                    ? memory_pass_time(grad_bytes + bytes, 1, *ctx_.prof)
                    : Time::zero();
      Time out = memory_pass_time(grad_bytes + bytes, 1, *ctx_.prof);
      std::vector<std::vector<TaskId>> deps(n);
      std::vector<TaskId> in_task(n);
      for (int s = 0; s < n; ++s) {
        in_task[s] = ex.add_task(s, StreamKind::Comm, Category::Memcpy, in, ex.name_id(fused ? "fusion memcpy in" : "prepare"),
                                 {neg_task[s]}, grad_bytes);
        deps[s] = {in_task[s]};
      }
      ++buffers_;
      auto members = add_collective_all(ctx_, CollectiveKind::AllReduce, alg, bytes,
                                        fused ? "allreduce fused buffer" : "allreduce tensor", deps);
      for (int s = 0; s < n; ++s)
        comm_end_[s] = ex.add_task(s, StreamKind::Comm, Category::Memcpy, out,
                                   ex.name_id(fused ? "fusion memcpy out + scale" : "scale"), {members[s]}, grad_bytes);
      i = j;
    }
    outstanding_ -= static_cast<int>(batch.size());
    const bool more = outstanding_ > 0;
    // The loop negotiates synchronously: its next cycle starts once this
    // negotiation is done, batching every tensor that became ready meanwhile.
    // CPU operations (Gloo, MPI) also run in the loop thread itself, so the next
    // cycle waits for this cycle's last buffer to be copied out; GPU operations
    // (NCCL) are queued on a stream and finished by another thread. That also
    // holds after a round's last cycle: the idle cycles' grid starts there.
    const bool cpu = ctx_.prof->spec.kind == topology::DeviceKind::Cpu;
    const TaskId loop_busy_until = cpu ? comm_end_[0] : neg_task[0];
    if (!more) place_optimizer();
    ex.on_finish(loop_busy_until, [this, more] {
      anchor_ = std::max(anchor_, ctx_.sim->now());  // a cycle that ran long: the next starts at once
      if (!more) return;
      ticking_ = false;
      if (!ready_queue_.empty()) ensure_ticking();
    });
    if (more) return;
  }
  ticking_ = false;
  if (outstanding_ > 0 && ready_queue_.empty()) return;  // wait: the next ready tensor restarts the loop
  if (!ready_queue_.empty()) ensure_ticking();
}

void HorovodRuntime::place_optimizer() {
  Executor& ex = *ctx_.ex;
  const int n = ctx_.slots();
  std::vector<TaskId> end(n);
  for (int s = 0; s < n; ++s) {
    std::vector<TaskId> deps{backward_end_[s]};
    if (comm_end_[s] != kNoTask) deps.push_back(comm_end_[s]);
    // The second step of double_step has nothing left to unscale.
    TaskId t = add_optimizer_tasks(ctx_, s, ow_, deps, round_ == 0);
    end[s] = t;
  }
  if (round_ == 0 && ctx_.opts->double_step && ctx_.world() > 1) {
    // The paper's horovod+amp code calls optimizer.step() a second time: synchronize()
    // finds no pending handles and allreduces every gradient again.
    round_ = 1;
    outstanding_ = static_cast<int>(ctx_.work->tensors.size());
    backward_end_ = end;
    comm_end_.assign(n, kNoTask);
    ex.on_finish(end[0], [this] {
      for (int t = static_cast<int>(ctx_.work->tensors.size()) - 1; t >= 0; --t) ready_queue_.push_back(t);
      ensure_ticking();
    });
    return;
  }
  step_end_.push_back(end);
  if (step_ + 1 < steps_) build_step(step_ + 1, end);
}

}  // namespace dptwin::sim
