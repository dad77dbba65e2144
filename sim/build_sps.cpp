// The single parameter server: torch.nn.DataParallel inside one process, or a
// multi-process central parameter server on rank 0.
#include <cmath>

#include "sim/build_common.hpp"

namespace dptwin::sim {
namespace {

// DataParallel (PyTorch 1.8), slot 0 = GPU0. Every step: scatter the batch from
// GPU0; replicate parameters and buffers from GPU0 (broadcast_coalesced in
// 10 MiB buffers); run the replicas' forwards from Python threads (kernel
// dispatch serialised by the GIL: launch costs x replicas); gather outputs to
// GPU0 (loss, logits, K/V caches); in backward, Gather's backward scatters the
// output gradients (zeros for unused outputs are materialised); after every
// replica's backward, reduce-add the gradients onto GPU0 (Broadcast's backward);
// the optimizer runs on GPU0 only.
std::vector<TaskId> data_parallel_step(StepContext& ctx, const std::vector<TaskId>& prev) {
  Executor& ex = *ctx.ex;
  const int n = ctx.slots();
  const auto& cfg = ctx.work->config;
  const OptimizerWork ow = optimizer_work(ctx);
  const double act = dtype_size(ctx.prec.activation_dtype());
  const double mb = static_cast<double>(ctx.work->micro_batch);
  const double logits = mb * cfg.n_ctx * cfg.vocab_size * 4.0;  // fp32 logits out of lm_head under DataParallel
  const double presents = ctx.opts->gather_kv_cache ? 2.0 * cfg.n_layer * mb * cfg.n_ctx * cfg.n_embd * act : 0.0;
  const double outputs = logits + presents + 4.0;
  const double weights = gradient_bytes(ctx, ctx.prec.weight_dtype()) + buffer_bytes(ctx);
  const double grads = gradient_bytes(ctx, ctx.prec.grad_dtype());
  const double inputs = 2.0 * mb * cfg.n_ctx * 8.0;  // input_ids + labels, int64
  const double chunk = ctx.opts->broadcast_buffer.value();
  const int world = ctx.world();
  NetworkModel* net = ctx.net;

  std::vector<TaskId> last(n);
  for (int s = 0; s < n; ++s) {
    Time host = s == 0 ? ow.zero_grad + ctx.prof->step_overhead : Time::zero();
    last[s] = ex.add_task(s, StreamKind::Compute, Category::Overhead, host, ex.name_id("zero_grad + step overhead"),
                          {prev[s]});
  }
  auto deps_of = [&](const std::vector<TaskId>& v) {
    std::vector<std::vector<TaskId>> d(n);
    for (int s = 0; s < n; ++s) d[s] = {v[s]};
    return d;
  };
  for (int m = 0; m < ctx.opts->accumulation; ++m) {
    auto sc = add_collective_all(ctx, CollectiveKind::Scatter, Algorithm::Direct, inputs / world, "scatter inputs",
                                 deps_of(last));
    // replicate(): broadcast_coalesced of parameters and buffers in `chunk`-sized pieces.
    std::vector<int> slots(n);
    for (int s = 0; s < n; ++s) slots[s] = s;
    CollectiveRequest req{CollectiveKind::Broadcast, Algorithm::Ring, ctx.ranks, Bytes(chunk), 0};
    double full_chunks = std::floor(weights / chunk);
    double rest = weights - full_chunks * chunk;
    auto price = [net, req, full_chunks, rest]() -> Time {
      if (req.ranks.size() < 2) return Time::zero();
      Time t = net->cost(req).duration * static_cast<int64_t>(full_chunks);
      if (rest > 0) {
        CollectiveRequest r = req;
        r.bytes = Bytes(rest);
        t += net->cost(r).duration;
      }
      return t;
    };
    auto rep = ex.add_collective(slots, Category::Communication, ex.name_id("replicate (broadcast_coalesced)"),
                                 deps_of(sc), weights, price);
    for (int s = 0; s < n; ++s)
      last[s] = ex.add_task(s, StreamKind::Compute, Category::Forward, sum_forward(ctx), ex.name_id("forward (replica)"),
                            {rep[s]});
    auto ga = add_collective_all(ctx, CollectiveKind::Gather, Algorithm::Direct, outputs, "gather outputs", deps_of(last));
    // The loss on GPU0 (mean of the replicas' losses) and Gather's backward: scatter output gradients.
    auto gs = add_collective_all(ctx, CollectiveKind::Scatter, Algorithm::Direct, outputs, "scatter output grads",
                                 deps_of(ga));
    for (int s = 0; s < n; ++s)
      last[s] = ex.add_task(s, StreamKind::Compute, Category::Backward, sum_backward(ctx, 0, ctx.backward_times.size()),
                            ex.name_id("backward (replica)"), {gs[s]});
    auto red = add_collective_all(ctx, CollectiveKind::Reduce, Algorithm::Ring, grads, "reduce-add grads to GPU0",
                                  deps_of(last));
    for (int s = 0; s < n; ++s) last[s] = red[s];
  }
  std::vector<TaskId> out = last;
  out[0] = add_optimizer_tasks(ctx, 0, ow, {last[0]}, true, "AdamW step (GPU0)");
  // Replicas cannot start the next step before GPU0 has stepped (next replicate), which
  // the replicate collective enforces; their step ends with the reduce.
  return out;
}

// Central parameter server: every rank computes, gradients are reduced to rank 0
// (each rank sends its full gradient to rank 0), rank 0 steps and sends the
// parameters back to every rank. Both directions go through flat buffers, as
// the execution backend does (exec/strategy_ps.cpp): every rank concatenates
// its gradients before the reduce; the server scales the sum into a mean and
// copies it back into its gradients; the server concatenates its parameters
// for the broadcast and every other rank copies them back into its own. Each is
// one memory pass (read + write) on the critical path, a copy back one kernel
// per tensor.
std::vector<TaskId> central_server_step(StepContext& ctx, const std::vector<TaskId>& prev) {
  Executor& ex = *ctx.ex;
  const int n = ctx.slots();
  const OptimizerWork ow = optimizer_work(ctx);
  const double grads = gradient_bytes(ctx, ctx.prec.grad_dtype());
  const double weights = gradient_bytes(ctx, ctx.prec.weight_dtype());
  const DeviceProfile& prof = *ctx.prof;
  const int tensors = tensor_count(ctx);
  const Time flatten_grads = memory_pass_time(2.0 * grads, 1, prof);
  const Time mean_into_grads = memory_pass_time(2.0 * grads, 1, prof) + memory_pass_time(2.0 * grads, tensors, prof);
  const Time flatten_params = memory_pass_time(2.0 * weights, 1, prof);
  const Time unflatten_params = memory_pass_time(2.0 * weights, tensors, prof);
  auto memcpy_task = [&](int slot, Time d, const char* name, TaskId after) {
    return ex.add_task(slot, StreamKind::Compute, Category::Memcpy, d, ex.name_id(name), {after});
  };
  const bool distributed = ctx.world() > 1;
  std::vector<TaskId> last(n);
  for (int s = 0; s < n; ++s) {
    last[s] = ex.add_task(s, StreamKind::Compute, Category::Overhead, ow.zero_grad + ctx.prof->step_overhead,
                          ex.name_id("zero_grad + step overhead"), {prev[s]});
    for (int m = 0; m < ctx.opts->accumulation; ++m) {
      last[s] = ex.add_task(s, StreamKind::Compute, Category::Forward, sum_forward(ctx), ex.name_id("forward"), {last[s]});
      last[s] = ex.add_task(s, StreamKind::Compute, Category::Backward, sum_backward(ctx, 0, ctx.backward_times.size()),
                            ex.name_id("backward"), {last[s]});
    }
    if (distributed) last[s] = memcpy_task(s, flatten_grads, "flatten grads", last[s]);
  }
  std::vector<std::vector<TaskId>> deps(n);
  for (int s = 0; s < n; ++s) deps[s] = {last[s]};
  auto red = add_collective_all(ctx, CollectiveKind::Reduce, Algorithm::ParameterServer, grads,
                                "reduce grads to server", deps);
  TaskId t = red[0];
  if (distributed) t = memcpy_task(0, mean_into_grads, "mean into grads", t);
  t = add_optimizer_tasks(ctx, 0, ow, {t}, true, "AdamW step (server)");
  if (distributed) t = memcpy_task(0, flatten_params, "flatten params", t);
  for (int s = 0; s < n; ++s) deps[s] = {s == 0 ? t : red[s]};
  auto bc = add_collective_all(ctx, CollectiveKind::Broadcast, Algorithm::ParameterServer, weights,
                               "broadcast params from server", deps);
  if (distributed)
    for (int s = 1; s < n; ++s) bc[s] = memcpy_task(s, unflatten_params, "unflatten params", bc[s]);
  return bc;
}

}  // namespace

std::vector<TaskId> build_sps_step(StepContext& ctx, const std::vector<TaskId>& prev, int step) {
  (void)step;
  return sps_uses_data_parallel(ctx) ? data_parallel_step(ctx, prev) : central_server_step(ctx, prev);
}

}  // namespace dptwin::sim
