// models/memory.cpp — memory footprint of one GPT-2 replica (see workload.hpp).
//
// Formulas (P = parameters, N = B·T tokens, L layers, C width, H heads,
// a = bytes of the activation dtype, w = bytes of the weight dtype):
//   weights        = P·w; under O1 plus half copies of every tensor fed to a
//                    matmul (Conv1D weights and biases, and the lm_head weight,
//                    i.e. wte when tied): Apex O1 casts them per call and caches
//                    the casts from the forward until the end of backward.
//   gradients      = P·bytes(grad dtype)                     (0 without gradients)
//   optimizer      = 8·P (AdamW exp_avg + exp_avg_sq, fp32)  (0 without optimizer)
//   master weights = 4·P under O2                            (0 without optimizer)
//   activations    = L·N·(16·C·a + 2·H·T·a + H·T + 2·C + 16)
//                    + N·(2·C·a + C + 8 + 16)
//     per block and token: ln_1 input, ln_1 output, qkv (3C), attention output,
//     residual (ln_2 input), ln_2 output, c_fc output (4C), GELU output (4C)
//     = 16·C elements; softmax output and dropped probabilities (2·H·T
//     elements); dropout masks, 1 byte each (H·T attention + 2·C residual);
//     LayerNorm mean/rstd (2 LNs × 2 fp32). Outside the blocks: ln_f input
//     and output, embedding dropout mask, ln_f stats (8 B), token ids and
//     labels (int64, 16 B). Same set as Korthikanti et al. 2022 (34·C + 5·H·T
//     bytes per token and layer in fp16).
//   workspace      = max(loss: N·V·(a + a + 4),  attention backward: N·V·a + 2·B·H·T·T·a)
//     logits, their gradient and the fp32 log-probabilities kept by the loss;
//     or, later in backward, the logits (still referenced by the output) plus
//     the two B·H·T·T gradients of one block's attention.
#include <algorithm>

#include "models/workload.hpp"

namespace dptwin::models {
namespace {

// Elements of tensors that Apex O1 casts to half and caches (matmul operands).
double o1_half_copy_elements(const Workload& w) {
  double n = 0;
  for (const auto& t : w.tensors) {
    const bool matmul_operand = t.role == TensorRole::Weight || t.role == TensorRole::Bias ||
                                (t.role == TensorRole::TokenEmbedding && w.config.tied_embeddings);
    if (matmul_operand) n += static_cast<double>(t.numel);
  }
  return n;
}

}  // namespace

MemoryFootprint estimate_memory(const Workload& w, const MemoryOptions& opts) {
  const PrecisionMode& p = opts.precision;
  const double P = static_cast<double>(w.parameters());
  const double N = static_cast<double>(w.tokens());
  const double L = w.config.n_layer, C = w.config.n_embd, H = w.config.n_head;
  const double T = w.seq_len, V = w.config.vocab_size, B = w.micro_batch;
  const double a = dtype_size(p.activation_dtype());
  constexpr double kFp32 = 4.0;

  MemoryFootprint m;
  double weights = P * dtype_size(p.weight_dtype());
  if (p.amp == AmpLevel::O1) weights += o1_half_copy_elements(w) * dtype_size(p.half);
  m.weights = bytes(weights);
  m.gradients = bytes(opts.has_gradients ? P * dtype_size(p.grad_dtype()) : 0.0);
  m.optimizer_state = bytes(opts.has_optimizer ? 2.0 * kFp32 * P : 0.0);
  m.master_weights = bytes(opts.has_optimizer && p.fp32_master_weights() ? kFp32 * P : 0.0);

  const double per_block_token = 16.0 * C * a + 2.0 * H * T * a + H * T + 2.0 * C + 16.0;
  const double outside_token = 2.0 * C * a + C + 8.0 + 16.0;
  m.activations = bytes(L * N * per_block_token + N * outside_token);

  const double logits = N * V * a;
  const double loss_phase = logits + N * V * a + N * V * kFp32;
  const double attention_phase = logits + 2.0 * B * H * T * T * a;
  m.workspace = bytes(std::max(loss_phase, attention_phase));
  return m;
}

}  // namespace dptwin::models
