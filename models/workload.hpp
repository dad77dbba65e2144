// models/workload.hpp — one training micro-step of a GPT-2 as a list of ops.
//
// A Workload is precision independent: ops carry FLOPs and element counts;
// the simulator turns elements into bytes with the dtype of the chosen
// precision mode. Backward ops name the parameter tensors whose gradients are
// complete once that op has run (the points where DDP hooks fire).
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/precision.hpp"
#include "core/units.hpp"
#include "models/gpt2.hpp"

namespace dptwin::models {

// Op classes with distinct efficiency behaviour on real devices.
enum class OpClass {
  Matmul,        // dense GEMM (linear layers, lm_head): uses m, n, k
  BatchedMatmul, // attention QK^T and AV: uses batch, m, n, k
  Softmax,       // attention softmax (memory bound)
  LayerNorm,     // memory bound
  Elementwise,   // residual add, dropout, bias add, eager GELU chains (memory bound)
  Activation,    // one fused transcendental kernel (tanh-GELU): per-element compute, not bytes, decides it on CPUs
  Embedding,     // gather / scatter-add of embedding rows
  CrossEntropy,  // softmax + NLL over the vocabulary
};

enum class Pass { Forward, Backward };

// FLOPs per element of the fused tanh-GELU (forward, backward). Calibration
// fits the activation curves with the same constants the workload uses.
inline constexpr double kGeluFlopsPerElementForward = 8;
inline constexpr double kGeluFlopsPerElementBackward = 13;

struct OpSpec {
  std::string name;       // e.g. "h.3.attn.c_attn.fwd"
  OpClass cls = OpClass::Elementwise;
  Pass pass = Pass::Forward;
  int layer = -1;         // block index, -1 for embedding / head
  double flops = 0;       // floating-point operations of this op for the micro-batch
  double elements_read = 0;     // elements read (activations + weights)
  double elements_written = 0;  // elements written
  // GEMM shape for Matmul/BatchedMatmul (C[m,n] += A[m,k] B[k,n], `batch` times).
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool runs_in_half_under_o1 = false;  // whitelisted for half under O1 (matmuls)
  int kernels = 0;  // eager-mode kernels it launches; 0 = the usual count for its class
  // Framework calls around the op that launch no kernel (view, reshape,
  // transpose, split, slice, expand): each is dispatched in its pass (forward
  // ops) or runs as an autograd node (backward ops). They decide the step time
  // of small models on CPUs, where an eager dispatch costs several microseconds.
  int views = 0;
  // Backward only: indices into Workload::tensors whose gradients are complete after this op.
  std::vector<int> grads_ready;
};

struct Workload {
  Gpt2Config config;
  int micro_batch = 1;   // samples per device per micro-step
  int seq_len = 0;       // tokens per sample (= config.n_ctx)
  std::vector<TensorSpec> tensors;  // registration order
  std::vector<OpSpec> forward;      // execution order
  std::vector<OpSpec> backward;     // execution order (roughly reverse of forward)

  int64_t parameters() const;
  int64_t tokens() const { return static_cast<int64_t>(micro_batch) * seq_len; }
  double total_flops() const;  // forward + backward of one micro-step
  double forward_flops() const;   // (addition) sum over `forward`
  double backward_flops() const;  // (addition) sum over `backward`
};

// (addition) "matmul", "batched_matmul", "softmax", "layer_norm", "elementwise",
// "embedding", "cross_entropy" — for reports and profile keys.
std::string to_string(OpClass c);

// REQUIRES: micro_batch >= 1. Throws InputError when cfg is invalid.
// Op names are "<module>.<step>": forward "h.3.attn.c_attn.fwd"; a linear
// layer's backward is three ops in autograd order — ".bwd_bias" (bias
// reduction), ".bwd_input" (dX = dY·Wᵀ) and ".bwd_weight" (dW = Xᵀ·dY, which
// carries grads_ready for weight and bias). Matmul FLOPs are exactly
// 2·batch·m·n·k; attention is counted dense (full T×T, then masked). The full
// op list and the formulas are in models/README.md.
Workload build_gpt2_workload(const Gpt2Config& cfg, int micro_batch);

// Memory footprint of one replica, by part. Optimizer is AdamW (two fp32 moments).
struct MemoryFootprint {
  Bytes weights;         // model replica weights (dtype of PrecisionMode::weight_dtype; O1 adds half copies of matmul weights)
  Bytes gradients;       // gradient tensors (grad dtype)
  Bytes optimizer_state; // AdamW exp_avg + exp_avg_sq in fp32
  Bytes master_weights;  // fp32 master copy (O2), else 0
  Bytes activations;     // saved for backward, for the micro-batch
  Bytes workspace;       // largest transient (logits + their gradient, attention scores)
  Bytes total() const { return weights + gradients + optimizer_state + master_weights + activations + workspace; }
};

struct MemoryOptions {
  PrecisionMode precision;
  bool has_optimizer = true;   // false for a replica that never steps (DataParallel workers)
  bool has_gradients = true;
};

MemoryFootprint estimate_memory(const Workload& w, const MemoryOptions& opts);

}  // namespace dptwin::models
