// DistributedDataParallel (PyTorch 1.8) and Apex DDP as a step graph.
#include <algorithm>
#include <map>

#include "sim/build_common.hpp"

namespace dptwin::sim {
namespace {

struct Bucket {
  std::vector<int> tensors;
  double bytes = 0;
  size_t ready_op = 0;  // backward op after which every gradient of the bucket is complete
};

// DDP's compute_bucket_assignment_by_size: parameters in reverse registration
// order; a bucket closes once it reaches its limit (first bucket: first_bucket,
// then bucket_cap). Apex DDP: buckets of message_size elements, no small first bucket.
std::vector<Bucket> assign_buckets(const StepContext& ctx) {
  const auto& w = *ctx.work;
  const bool apex = ctx.kind == StrategyKind::DpsAmp;
  double elem = dtype_size(ctx.prec.grad_dtype());
  double first = ctx.opts->first_bucket.value(), cap = ctx.opts->bucket_cap.value();
  if (apex) first = cap = ctx.opts->apex_message_elements.value_or(1e7) * elem;
  std::vector<size_t> ready(w.tensors.size(), w.backward.size() - 1);
  for (size_t i = 0; i < w.backward.size(); ++i)
    for (int t : w.backward[i].grads_ready) ready[t] = i;
  std::vector<Bucket> buckets(1);
  for (int t = static_cast<int>(w.tensors.size()) - 1; t >= 0; --t) {
    Bucket& b = buckets.back();
    b.tensors.push_back(t);
    b.bytes += static_cast<double>(w.tensors[t].numel) * elem;
    b.ready_op = std::max(b.ready_op, ready[t]);
    double limit = buckets.size() == 1 ? first : cap;
    if (b.bytes >= limit && t > 0) buckets.emplace_back();
  }
  return buckets;
}

}  // namespace

std::vector<TaskId> build_dps_step(StepContext& ctx, const std::vector<TaskId>& prev, int step) {
  (void)step;
  Executor& ex = *ctx.ex;
  const bool apex = ctx.kind == StrategyKind::DpsAmp;
  const auto buckets = assign_buckets(ctx);
  const OptimizerWork ow = optimizer_work(ctx);
  const Algorithm alg = allreduce_algorithm(ctx);
  const int n = ctx.slots();
  const size_t nbwd = ctx.backward_times.size();
  const double grad_bytes = gradient_bytes(ctx, ctx.prec.grad_dtype());

  // Segment the backward pass at the ops that complete a bucket.
  std::vector<size_t> cuts;
  for (const auto& b : buckets) cuts.push_back(b.ready_op);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.empty() || cuts.back() != nbwd - 1) cuts.push_back(nbwd - 1);
  // Copying each gradient into its bucket and dividing by the world size happens in
  // the autograd hooks, on the compute stream: two passes over the bucket.
  std::map<size_t, double> bucket_bytes_at;
  for (const auto& b : buckets) bucket_bytes_at[b.ready_op] += b.bytes;
  const bool copies = !ctx.opts->gradient_as_bucket_view || apex;

  std::vector<TaskId> last(n);
  std::vector<std::map<size_t, TaskId>> segment(n);
  std::vector<std::vector<TaskId>> fwd_deps(n);
  for (int s = 0; s < n; ++s) {
    last[s] = ex.add_task(s, StreamKind::Compute, Category::Overhead, ow.zero_grad + ctx.prof->step_overhead,
                          ex.name_id("zero_grad + step overhead"), {prev[s]});
  }
  for (int m = 0; m < ctx.opts->accumulation; ++m) {
    const bool sync = m == ctx.opts->accumulation - 1;
    // DDP broadcasts module buffers from rank 0 before every forward (_sync_params).
    if (!apex && ctx.opts->broadcast_buffers && ctx.world() > 1) {
      int k = 0;
      for (double bytes : buffer_broadcast_bytes(ctx)) {
        std::vector<std::vector<TaskId>> deps(n);
        for (int s = 0; s < n; ++s) deps[s] = {last[s]};
        auto bc = add_collective_all(ctx, CollectiveKind::Broadcast, Algorithm::Ring, bytes,
                                     "broadcast buffers " + std::to_string(k++), deps);
        for (int s = 0; s < n; ++s) last[s] = bc[s];
      }
    }
    for (int s = 0; s < n; ++s) {
      last[s] = ex.add_task(s, StreamKind::Compute, Category::Forward, sum_forward(ctx), ex.name_id("forward"), {last[s]});
      if (!sync || ctx.world() == 1) {
        last[s] = ex.add_task(s, StreamKind::Compute, Category::Backward, sum_backward(ctx, 0, nbwd),
                              ex.name_id("backward"), {last[s]});
        continue;
      }
      size_t begin = 0;
      for (size_t cut : cuts) {
        Time d = sum_backward(ctx, begin, cut + 1);
        if (copies && bucket_bytes_at.count(cut)) d += memory_pass_time(bucket_bytes_at[cut] * 4.0, 2, *ctx.prof);
        last[s] = ex.add_task(s, StreamKind::Compute, Category::Backward, d, ex.name_id("backward"), {last[s]});
        segment[s][cut] = last[s];
        begin = cut + 1;
      }
    }
  }
  std::vector<TaskId> comm_last(n, kNoTask);
  if (ctx.world() > 1) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::vector<std::vector<TaskId>> deps(n);
      for (int s = 0; s < n; ++s) deps[s] = {segment[s][buckets[b].ready_op]};
      auto members = add_collective_all(ctx, CollectiveKind::AllReduce, alg, buckets[b].bytes,
                                        "allreduce bucket " + std::to_string(b), deps);
      for (int s = 0; s < n; ++s) comm_last[s] = members[s];
    }
  }
  std::vector<TaskId> out(n);
  for (int s = 0; s < n; ++s) {
    TaskId t = last[s];
    if (ctx.world() > 1) {
      // finalize_backward: wait for every bucket, copy results back into the gradients.
      Time fin = copies ? memory_pass_time(grad_bytes * 2.0, 1, *ctx.prof) : ctx.prof->launch_overhead;
      t = ex.add_task(s, StreamKind::Compute, Category::Memcpy, fin, ex.name_id("finalize buckets"), {t, comm_last[s]});
    }
    out[s] = add_optimizer_tasks(ctx, s, ow, {t});
  }
  return out;
}

int dps_bucket_count(const StepContext& ctx) { return static_cast<int>(assign_buckets(ctx).size()); }

}  // namespace dptwin::sim
