// Per-device memory of each strategy, on top of models::estimate_memory.
#include <algorithm>

#include "sim/build_common.hpp"

namespace dptwin::sim {

MemoryReport estimate_device_memory(const StepContext& ctx) {
  const auto& w = *ctx.work;
  const auto& cfg = w.config;
  models::MemoryOptions mo;
  mo.precision = ctx.prec;
  MemoryReport r;
  const double grads = gradient_bytes(ctx, ctx.prec.grad_dtype());
  const int world = ctx.world();
  auto fill = [&](const models::MemoryFootprint& f) {
    r.weights = f.weights.value();
    r.gradients = f.gradients.value();
    r.optimizer_state = f.optimizer_state.value();
    r.master_weights = f.master_weights.value();
    r.activations = f.activations.value();
    r.workspace = f.workspace.value();
  };
  fill(models::estimate_memory(w, mo));
  r.device = 0;
  switch (ctx.kind) {
    case StrategyKind::Single:
      break;
    case StrategyKind::Sps:
      if (world > 1 && sps_uses_data_parallel(ctx)) {
        // GPU0 holds the real module (optimizer state), its replica's activations, the
        // outputs gathered from every replica and the scattered output gradients.
        const double mb = static_cast<double>(w.micro_batch);
        const double act = dtype_size(ctx.prec.activation_dtype());
        double logits = mb * cfg.n_ctx * cfg.vocab_size * 4.0;
        double presents = ctx.opts->gather_kv_cache ? 2.0 * cfg.n_layer * mb * cfg.n_ctx * cfg.n_embd * act : 0.0;
        r.gathered_outputs = world * (logits + presents);
        r.comm_buffers = ctx.opts->broadcast_buffer.value() + grads;  // coalesced broadcast + reduce-add staging
      } else if (world > 1) {
        r.comm_buffers = grads;  // the server's receive buffer for reduced gradients
      }
      break;
    case StrategyKind::Dps:
    case StrategyKind::DpsAmp:
      if (world > 1 && (!ctx.opts->gradient_as_bucket_view || ctx.kind == StrategyKind::DpsAmp)) r.comm_buffers = grads;
      break;
    case StrategyKind::Horovod:
    case StrategyKind::HorovodAmp:
      if (world > 1) r.comm_buffers = std::min(ctx.opts->fusion_threshold.value(), grads);
      break;
  }
  r.framework_reserve = ctx.prof->framework_reserve.value();
  r.peak = r.weights + r.gradients + r.optimizer_state + r.master_weights + r.activations + r.workspace +
           r.comm_buffers + r.gathered_outputs + r.framework_reserve;
  r.capacity = ctx.prof->spec.memory.value();
  r.oom = r.peak > r.capacity;
  return r;
}

}  // namespace dptwin::sim
