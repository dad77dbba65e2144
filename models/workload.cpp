// models/workload.cpp — the ops of one GPT-2 training micro-step.
//
// The op list mirrors what PyTorch (1.8) runs for a HuggingFace GPT2LMHeadModel
// called with labels, in training mode (dropout on): one op per kernel-sized
// step, so launch overheads and memory-bound passes are visible to a roofline.
//
// Conventions (N = B·T tokens, C width, H heads, D = C/H, V vocabulary):
//   * Matmul / BatchedMatmul FLOPs are exactly 2·batch·m·n·k; the bias of a
//     Conv1D (torch.addmm) is fused in the forward GEMM and not counted.
//   * Attention is executed dense: the full T×T scores are computed, then the
//     causal mask is applied (as the paper's PyTorch GPT-2 does).
//   * Backward of a linear layer is three ops, in the order autograd's
//     AddmmBackward produces them: bias reduction (.bwd_bias), input gradient
//     (.bwd_input, dX = dY·Wᵀ) and weight gradient (.bwd_weight, dW = Xᵀ·dY).
//     Splitting dgrad and wgrad gives the simulator two GEMMs with their true
//     shapes (wgrad has k = N, a different efficiency); the weight and bias
//     gradients are reported ready after .bwd_weight, when the autograd node
//     is finished and DDP's hooks fire.
//   * Elementwise FLOPs per element are small constants (see kFlopsPer*);
//     they matter little for time, while the element counts decide it.
#include "models/workload.hpp"

#include <fmt/format.h>

#include <map>

namespace dptwin::models {
namespace {

// FLOPs per element of memory-bound ops (forward, backward).
constexpr double kFlopsPerLayerNormFwd = 7;   // mean, variance, normalise, affine
constexpr double kFlopsPerLayerNormBwd = 14;  // dx, dgamma, dbeta
constexpr double kFlopsPerSoftmaxFwd = 5;     // max, sub, exp, sum, div
constexpr double kFlopsPerSoftmaxBwd = 4;     // y·(g - sum(y·g))
constexpr double kFlopsPerGeluFwd = kGeluFlopsPerElementForward;  // tanh approximation (gelu_new)
constexpr double kFlopsPerGeluBwd = kGeluFlopsPerElementBackward;
constexpr double kFlopsPerDropoutFwd = 2;     // random draw + compare/scale
constexpr double kFlopsPerDropoutBwd = 1;     // g·mask·scale
constexpr double kFlopsPerLogSoftmaxFwd = 5;  // max, sub, exp, sum, log
constexpr double kFlopsPerLogSoftmaxBwd = 3;  // g - exp(y)·sum(g)
// A dropout mask is 1 byte per element (bool); elements are precision
// independent, so the mask is counted as a quarter element (exact in fp32).
constexpr double kMaskElement = 0.25;

class Builder {
 public:
  Builder(const Gpt2Config& cfg, int micro_batch) : w_() {
    w_.config = cfg;
    w_.micro_batch = micro_batch;
    w_.seq_len = cfg.n_ctx;
    w_.tensors = gpt2_tensors(cfg);
    for (size_t i = 0; i < w_.tensors.size(); ++i) index_[w_.tensors[i].name] = static_cast<int>(i);
    B_ = micro_batch;
    T_ = cfg.n_ctx;
    C_ = cfg.n_embd;
    H_ = cfg.n_head;
    D_ = C_ / H_;
    V_ = cfg.vocab_size;
    N_ = static_cast<double>(B_) * T_;
    scores_ = static_cast<double>(B_) * H_ * T_ * T_;
  }

  Workload build() {
    forward();
    backward();
    return std::move(w_);
  }

 private:
  int idx(const std::string& name) const {
    auto it = index_.find(name);
    DPTWIN_ASSERT(it != index_.end(), "unknown tensor " + name);
    return it->second;
  }

  OpSpec& push(std::vector<OpSpec>& list, std::string name, OpClass cls, Pass pass, int layer, double flops,
               double read, double written) {
    OpSpec op;
    op.name = std::move(name);
    op.cls = cls;
    op.pass = pass;
    op.layer = layer;
    op.flops = flops;
    op.elements_read = read;
    op.elements_written = written;
    list.push_back(std::move(op));
    return list.back();
  }
  OpSpec& fwd(std::string name, OpClass cls, int layer, double flops, double read, double written) {
    return push(w_.forward, std::move(name), cls, Pass::Forward, layer, flops, read, written);
  }
  OpSpec& bwd(std::string name, OpClass cls, int layer, double flops, double read, double written) {
    return push(w_.backward, std::move(name), cls, Pass::Backward, layer, flops, read, written);
  }

  // C[m,n] = A[m,k]·B[k,n], `batch` times. Reads A and B (+ extra), writes C.
  // Linear layers are Matmul; attention (batch = B·H, even when 1) is BatchedMatmul.
  OpSpec& gemm(std::vector<OpSpec>& list, Pass pass, std::string name, int layer, int64_t batch, int64_t m,
               int64_t n, int64_t k, double extra_read = 0) {
    const double b = static_cast<double>(batch);
    OpClass cls = name.find(".attn.scores.") != std::string::npos || name.find(".attn.av.") != std::string::npos
                      ? OpClass::BatchedMatmul
                      : OpClass::Matmul;
    OpSpec& op = push(list, std::move(name), cls, pass, layer, 2.0 * b * m * n * k,
                      b * (static_cast<double>(m) * k + static_cast<double>(k) * n) + extra_read,
                      b * static_cast<double>(m) * n);
    op.batch = batch;
    op.m = m;
    op.n = n;
    op.k = k;
    op.runs_in_half_under_o1 = true;
    return op;
  }

  // Conv1D forward: y[N,out] = x[N,in]·W[in,out] + b.
  // Conv1D flattens its input and views the result back: two framework calls each way.
  void linear_fwd(const std::string& prefix, int layer, int64_t in, int64_t out) {
    gemm(w_.forward, Pass::Forward, prefix + ".fwd", layer, 1, tokens(), out, in, static_cast<double>(out)).views = 2;
  }
  // Conv1D backward: bias reduction, dX = dY·Wᵀ, dW = Xᵀ·dY (grads ready here).
  void linear_bwd(const std::string& prefix, int layer, int64_t in, int64_t out) {
    bwd(prefix + ".bwd_bias", OpClass::Elementwise, layer, N_ * out, N_ * out, static_cast<double>(out));
    gemm(w_.backward, Pass::Backward, prefix + ".bwd_input", layer, 1, tokens(), in, out).views = 2;
    OpSpec& op = gemm(w_.backward, Pass::Backward, prefix + ".bwd_weight", layer, 1, in, out, tokens());
    op.grads_ready = {idx(prefix + ".weight"), idx(prefix + ".bias")};
  }

  void layer_norm_fwd(const std::string& name, int layer, double width) {
    // Reads x, gamma, beta; writes y and the per-token mean and rstd.
    fwd(name + ".fwd", OpClass::LayerNorm, layer, kFlopsPerLayerNormFwd * N_ * width, N_ * width + 2 * width,
        N_ * width + 2 * N_);
  }
  void layer_norm_bwd(const std::string& name, int layer, double width) {
    // Reads dy, x, gamma, mean, rstd; writes dx, dgamma, dbeta.
    OpSpec& op = bwd(name + ".bwd", OpClass::LayerNorm, layer, kFlopsPerLayerNormBwd * N_ * width,
                     2 * N_ * width + width + 2 * N_, N_ * width + 2 * width);
    op.grads_ready = {idx(name + ".weight"), idx(name + ".bias")};
  }

  void dropout_fwd(const std::string& name, int layer, double elems) {
    if (!w_.config.dropout) return;
    fwd(name + ".fwd", OpClass::Elementwise, layer, kFlopsPerDropoutFwd * elems, elems,
        elems + kMaskElement * elems);
  }
  void dropout_bwd(const std::string& name, int layer, double elems) {
    if (!w_.config.dropout) return;
    bwd(name + ".bwd", OpClass::Elementwise, layer, kFlopsPerDropoutBwd * elems, elems + kMaskElement * elems,
        elems);
  }

  int64_t tokens() const { return static_cast<int64_t>(B_) * T_; }

  void forward() {
    const double NC = N_ * C_;
    // Token + position embedding: gather N rows of wte and T rows of wpe, add.
    fwd("embedding.fwd", OpClass::Embedding, -1, NC, N_ + NC + static_cast<double>(T_) * C_, NC);
    dropout_fwd("embedding.dropout", -1, NC);
    for (int i = 0; i < w_.config.n_layer; ++i) block_fwd(i);
    layer_norm_fwd("ln_f", -1, C_);
    // lm_head: logits[N,V] = x[N,C]·Wᵀ[C,V], no bias.
    // (Wᵀ, and matmul folding the batch: reshape + unsafe view.)
    gemm(w_.forward, Pass::Forward, "lm_head.fwd", -1, 1, tokens(), V_, C_).views = 3;
    // HuggingFace shifts logits and labels by one token (a contiguous copy),
    // then cross-entropy = log_softmax + NLL over the vocabulary.
    const double NV_shift = static_cast<double>(B_) * (T_ - 1) * V_;
    fwd("loss.shift_logits.fwd", OpClass::Elementwise, -1, 0, NV_shift, NV_shift);
    fwd("loss.fwd", OpClass::CrossEntropy, -1, kFlopsPerLogSoftmaxFwd * NV_shift, NV_shift + N_,
        NV_shift + 1);
  }

  void block_fwd(int i) {
    const std::string h = fmt::format("h.{}.", i);
    const double NC = N_ * C_;
    layer_norm_fwd(h + "ln_1", i, C_);
    linear_fwd(h + "attn.c_attn", i, C_, 3 * static_cast<int64_t>(C_));
    // Split heads is views (split, 3 views, 4 transposes). S = Q·Kᵀ per (sample,
    // head); matmul on 4-D operands expands, folds and unfolds them (5 calls).
    gemm(w_.forward, Pass::Forward, h + "attn.scores.fwd", i, static_cast<int64_t>(B_) * H_, T_, T_, D_).views = 13;
    fwd(h + "attn.scale.fwd", OpClass::Elementwise, i, scores_, scores_, scores_);
    // torch.where(causal_mask, S, -1e4): reads S and the T×T uint8 mask.
    // (Slicing the causal buffer to T×T and inverting it: no autograd node.)
    fwd(h + "attn.mask.fwd", OpClass::Elementwise, i, scores_, scores_ + kMaskElement * T_ * T_, scores_).views = 5;
    fwd(h + "attn.softmax.fwd", OpClass::Softmax, i, kFlopsPerSoftmaxFwd * scores_, scores_, scores_);
    dropout_fwd(h + "attn.attn_dropout", i, scores_);
    // O = P·V per (sample, head).
    // (matmul's 5 calls, then transpose and view when merging heads.)
    gemm(w_.forward, Pass::Forward, h + "attn.av.fwd", i, static_cast<int64_t>(B_) * H_, T_, D_, T_).views = 7;
    // Merge heads: permute + contiguous copy.
    fwd(h + "attn.merge_heads.fwd", OpClass::Elementwise, i, 0, NC, NC);
    linear_fwd(h + "attn.c_proj", i, C_, C_);
    dropout_fwd(h + "attn.resid_dropout", i, NC);
    fwd(h + "attn.residual.fwd", OpClass::Elementwise, i, NC, 2 * NC, NC);
    layer_norm_fwd(h + "ln_2", i, C_);
    linear_fwd(h + "mlp.c_fc", i, C_, 4 * static_cast<int64_t>(C_));
    // HF gelu_new in eager mode, 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), is
    // 8 pointwise kernels forward and about 12 in its autograd backward; fused
    // (torch.gelu(approximate='tanh')) it is one activation kernel each way.
    const bool eager = w_.config.gelu == Gpt2Config::Gelu::Eager;
    fwd(h + "mlp.gelu.fwd", eager ? OpClass::Elementwise : OpClass::Activation, i, kFlopsPerGeluFwd * 4 * NC, 4 * NC,
        4 * NC)
        .kernels = eager ? 8 : 1;
    linear_fwd(h + "mlp.c_proj", i, 4 * static_cast<int64_t>(C_), C_);
    dropout_fwd(h + "mlp.dropout", i, NC);
    fwd(h + "mlp.residual.fwd", OpClass::Elementwise, i, NC, 2 * NC, NC);
  }

  void backward() {
    const double NC = N_ * C_;
    const double NV = N_ * V_;
    const double NV_shift = static_cast<double>(B_) * (T_ - 1) * V_;
    // dlogits of the shifted view: exp(log_probs) - onehot, scaled by 1/count.
    bwd("loss.bwd", OpClass::CrossEntropy, -1, kFlopsPerLogSoftmaxBwd * NV_shift, NV_shift + N_, NV_shift);
    // Slice backward: zero-filled N×V gradient, shifted part copied in.
    bwd("loss.shift_logits.bwd", OpClass::Elementwise, -1, 0, NV_shift, NV);
    // lm_head (MmBackward): dX = dlogits·W, then dW = dlogitsᵀ·X.
    gemm(w_.backward, Pass::Backward, "lm_head.bwd_input", -1, 1, tokens(), C_, V_).views = 3;
    OpSpec& lm_w = gemm(w_.backward, Pass::Backward, "lm_head.bwd_weight", -1, 1, V_, C_, tokens());
    // Tied: wte's gradient also needs the embedding backward (ready at the very end).
    if (!w_.config.tied_embeddings) lm_w.grads_ready = {idx("lm_head.weight")};
    layer_norm_bwd("ln_f", -1, C_);
    for (int i = w_.config.n_layer - 1; i >= 0; --i) block_bwd(i);
    dropout_bwd("embedding.dropout", -1, NC);
    // Embedding backward: dense zero-filled V×C (and P×C) gradients with the
    // N token rows (and T position rows, summed over the batch) scattered in;
    // with tied weights the result is added to lm_head's contribution.
    const double VC = static_cast<double>(V_) * C_;
    const double PC = static_cast<double>(w_.config.n_positions) * C_;
    const double tie_add = w_.config.tied_embeddings ? VC : 0.0;
    bwd("embedding.bwd", OpClass::Embedding, -1, 2 * NC + tie_add, 2 * NC + N_ + 2 * tie_add, VC + PC + tie_add)
        .grads_ready = {idx("wte.weight"), idx("wpe.weight")};
  }

  void block_bwd(int i) {
    const std::string h = fmt::format("h.{}.", i);
    const double NC = N_ * C_;
    const int64_t BH = static_cast<int64_t>(B_) * H_;
    // MLP branch.
    dropout_bwd(h + "mlp.dropout", i, NC);
    linear_bwd(h + "mlp.c_proj", i, 4 * static_cast<int64_t>(C_), C_);
    const bool eager_gelu = w_.config.gelu == Gpt2Config::Gelu::Eager;
    bwd(h + "mlp.gelu.bwd", eager_gelu ? OpClass::Elementwise : OpClass::Activation, i, kFlopsPerGeluBwd * 4 * NC,
        8 * NC, 4 * NC)
        .kernels = eager_gelu ? 12 : 1;
    linear_bwd(h + "mlp.c_fc", i, C_, 4 * static_cast<int64_t>(C_));
    layer_norm_bwd(h + "ln_2", i, C_);
    // The residual stream's gradient = skip path + MLP branch (accumulated).
    bwd(h + "mlp.residual.bwd", OpClass::Elementwise, i, NC, 2 * NC, NC);
    // Attention branch.
    dropout_bwd(h + "attn.resid_dropout", i, NC);
    linear_bwd(h + "attn.c_proj", i, C_, C_);
    bwd(h + "attn.merge_heads.bwd", OpClass::Elementwise, i, 0, NC, NC);
    // O = P·V: dP = dO·Vᵀ, dV = Pᵀ·dO.
    gemm(w_.backward, Pass::Backward, h + "attn.av.bwd_probs", i, BH, T_, T_, D_).views = 7;
    gemm(w_.backward, Pass::Backward, h + "attn.av.bwd_value", i, BH, T_, D_, T_);
    dropout_bwd(h + "attn.attn_dropout", i, scores_);
    bwd(h + "attn.softmax.bwd", OpClass::Softmax, i, kFlopsPerSoftmaxBwd * scores_, 2 * scores_, scores_);
    bwd(h + "attn.mask.bwd", OpClass::Elementwise, i, scores_, scores_ + kMaskElement * T_ * T_, scores_);
    bwd(h + "attn.scale.bwd", OpClass::Elementwise, i, scores_, scores_, scores_);
    // S = Q·Kᵀ: dQ = dS·K, dK = dSᵀ·Q.
    gemm(w_.backward, Pass::Backward, h + "attn.scores.bwd_query", i, BH, T_, D_, T_).views = 13;
    gemm(w_.backward, Pass::Backward, h + "attn.scores.bwd_key", i, BH, T_, D_, T_);
    // dQ, dK, dV gathered back into the N×3C gradient of c_attn's output.
    bwd(h + "attn.split_heads.bwd", OpClass::Elementwise, i, 0, 3 * NC, 3 * NC);
    linear_bwd(h + "attn.c_attn", i, C_, 3 * static_cast<int64_t>(C_));
    layer_norm_bwd(h + "ln_1", i, C_);
    bwd(h + "attn.residual.bwd", OpClass::Elementwise, i, NC, 2 * NC, NC);
  }

  Workload w_;
  std::map<std::string, int> index_;
  int B_ = 1, T_ = 0, C_ = 0, H_ = 1, D_ = 0, V_ = 0;
  double N_ = 0, scores_ = 0;
};

}  // namespace

int64_t Workload::parameters() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel;
  return n;
}

double Workload::forward_flops() const {
  double f = 0;
  for (const auto& op : forward) f += op.flops;
  return f;
}

double Workload::backward_flops() const {
  double f = 0;
  for (const auto& op : backward) f += op.flops;
  return f;
}

double Workload::total_flops() const { return forward_flops() + backward_flops(); }

Workload build_gpt2_workload(const Gpt2Config& cfg, int micro_batch) {
  DPTWIN_ASSERT(micro_batch >= 1, fmt::format("micro_batch must be >= 1, got {}", micro_batch));
  validate_gpt2_config(cfg, nullptr);
  return Builder(cfg, micro_batch).build();
}

std::string to_string(OpClass c) {
  switch (c) {
    case OpClass::Matmul: return "matmul";
    case OpClass::BatchedMatmul: return "batched_matmul";
    case OpClass::Softmax: return "softmax";
    case OpClass::LayerNorm: return "layer_norm";
    case OpClass::Elementwise: return "elementwise";
    case OpClass::Activation: return "activation";
    case OpClass::Embedding: return "embedding";
    case OpClass::CrossEntropy: return "cross_entropy";
  }
  return "unknown";
}

}  // namespace dptwin::models
