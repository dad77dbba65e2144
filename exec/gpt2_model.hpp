// exec/gpt2_model.hpp — GPT-2 written with the LibTorch C++ API.
//
// Built from models::Gpt2Config. Parameters are registered in exactly the order
// of models::gpt2_tensors() (wte, wpe, h.0.ln_1.weight, ..., ln_f.bias) with the
// same shapes (linear weights stored (in, out) like HuggingFace Conv1D), so
// named_parameters() lines up one to one with the simulator's tensor list.
// Each block also registers a causal-mask buffer ("h.i.attn.bias", like
// HuggingFace), which DDP's broadcast_buffers sends every forward.
//
// Initialization follows HuggingFace/GPT-2: weights and embeddings ~ N(0, 0.02),
// residual projections (attn.c_proj, mlp.c_proj) ~ N(0, 0.02/sqrt(2·n_layer)),
// biases 0, LayerNorm weight 1 / bias 0. No dropout (training is deterministic).
//
// Exec-internal header (pulls in LibTorch); never include it from other modules.
// Thread-safety: a module is used by one training thread; autograd hooks that
// strategies install may run on that same thread during backward.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt2.hpp"

namespace dptwin::exec {

// Conv1D as in HuggingFace GPT-2: y = x · W + b with W of shape (in, out).
class Conv1DImpl : public torch::nn::Module {
 public:
  Conv1DImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

// Embedding table: a "weight" of shape (rows, width).
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t rows, int64_t width);
  torch::Tensor weight;
};
TORCH_MODULE(Embedding);

class LayerNormImpl : public torch::nn::Module {
 public:
  explicit LayerNormImpl(int64_t width);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const models::Gpt2Config& cfg);
  torch::Tensor forward(const torch::Tensor& x);
  Conv1D c_attn{nullptr}, c_proj{nullptr};
  torch::Tensor mask;         // buffer "bias": lower-triangular (1, 1, n_positions, n_positions) bool
  torch::Tensor masked_bias;  // buffer "masked_bias": scalar -1e4 (HuggingFace; unused in the math)
  int64_t n_head, n_embd;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const models::Gpt2Config& cfg);
  torch::Tensor forward(const torch::Tensor& x);
  Conv1D c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const models::Gpt2Config& cfg);
  torch::Tensor forward(const torch::Tensor& x);
  LayerNorm ln_1{nullptr};
  Attention attn{nullptr};
  LayerNorm ln_2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

class Gpt2Impl : public torch::nn::Module {
 public:
  // REQUIRES: cfg is valid (models::validate_gpt2_config) and tied_embeddings.
  explicit Gpt2Impl(const models::Gpt2Config& cfg);

  // idx: (B, T) int64 token ids, T <= n_positions. Returns logits (B, T, vocab).
  torch::Tensor forward(const torch::Tensor& idx);
  // Mean cross entropy of next-token prediction, computed in fp32.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets);

  // Re-initializes all parameters from `seed` (HF GPT-2 scheme, see file comment).
  void init_weights(uint64_t seed);

  const models::Gpt2Config& config() const { return cfg_; }

  Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};

 private:
  models::Gpt2Config cfg_;
};
TORCH_MODULE(Gpt2);

// Parameters in registration order (== models::gpt2_tensors order).
std::vector<torch::Tensor> ordered_parameters(Gpt2Impl& model);
std::vector<std::string> ordered_parameter_names(Gpt2Impl& model);

}  // namespace dptwin::exec
