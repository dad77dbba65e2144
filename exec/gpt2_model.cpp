// exec/gpt2_model.cpp — LibTorch GPT-2 (see gpt2_model.hpp).
#include "exec/gpt2_model.hpp"

#include <cmath>

namespace dptwin::exec {

Conv1DImpl::Conv1DImpl(int64_t in, int64_t out) {
  weight = register_parameter("weight", torch::empty({in, out}));
  bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor Conv1DImpl::forward(const torch::Tensor& x) {
  auto sizes = x.sizes().vec();
  auto flat = x.reshape({-1, sizes.back()});
  auto y = torch::addmm(bias, flat, weight);
  sizes.back() = weight.size(1);
  return y.view(sizes);
}

EmbeddingImpl::EmbeddingImpl(int64_t rows, int64_t width) {
  weight = register_parameter("weight", torch::empty({rows, width}));
}

LayerNormImpl::LayerNormImpl(int64_t width) {
  weight = register_parameter("weight", torch::ones({width}));
  bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
}

AttentionImpl::AttentionImpl(const models::Gpt2Config& cfg) : n_head(cfg.n_head), n_embd(cfg.n_embd) {
  c_attn = register_module("c_attn", Conv1D(cfg.n_embd, 3 * cfg.n_embd));
  c_proj = register_module("c_proj", Conv1D(cfg.n_embd, cfg.n_embd));
  mask = register_buffer("bias", torch::ones({cfg.n_positions, cfg.n_positions}, torch::kBool)
                                     .tril()
                                     .view({1, 1, cfg.n_positions, cfg.n_positions}));
  masked_bias = register_buffer("masked_bias", torch::tensor(-1e4f));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, D = C / n_head;
  auto qkv = c_attn(x).split(C, /*dim=*/2);
  auto q = qkv[0].view({B, T, n_head, D}).transpose(1, 2);  // (B, H, T, D)
  auto k = qkv[1].view({B, T, n_head, D}).transpose(1, 2);
  auto v = qkv[2].view({B, T, n_head, D}).transpose(1, 2);
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  auto causal = mask.index({torch::indexing::Slice(), torch::indexing::Slice(),
                            torch::indexing::Slice(0, T), torch::indexing::Slice(0, T)});
  att = att.masked_fill(causal.logical_not(), -std::numeric_limits<float>::infinity());
  att = torch::softmax(att, -1, att.scalar_type());
  auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
  return c_proj(y);
}

MlpImpl::MlpImpl(const models::Gpt2Config& cfg) {
  c_fc = register_module("c_fc", Conv1D(cfg.n_embd, 4 * cfg.n_embd));
  c_proj = register_module("c_proj", Conv1D(4 * cfg.n_embd, cfg.n_embd));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return c_proj(torch::gelu(c_fc(x), "tanh"));
}

BlockImpl::BlockImpl(const models::Gpt2Config& cfg) {
  ln_1 = register_module("ln_1", LayerNorm(cfg.n_embd));
  attn = register_module("attn", Attention(cfg));
  ln_2 = register_module("ln_2", LayerNorm(cfg.n_embd));
  mlp = register_module("mlp", Mlp(cfg));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attn(ln_1(x));
  return h + mlp(ln_2(h));
}

Gpt2Impl::Gpt2Impl(const models::Gpt2Config& cfg) : cfg_(cfg) {
  TORCH_CHECK(cfg.tied_embeddings, "exec GPT-2 supports tied embeddings only (model '", cfg.name, "')");
  wte = register_module("wte", Embedding(cfg.vocab_size, cfg.n_embd));
  wpe = register_module("wpe", Embedding(cfg.n_positions, cfg.n_embd));
  h = register_module("h", torch::nn::ModuleList());
  for (int i = 0; i < cfg.n_layer; ++i) h->push_back(Block(cfg));
  ln_f = register_module("ln_f", LayerNorm(cfg.n_embd));
  init_weights(0);
}

void Gpt2Impl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * cfg_.n_layer);
  auto normal = [&](torch::Tensor& t, double s) {
    auto tmp = torch::empty(t.sizes(), torch::kFloat32);
    tmp.normal_(0.0, s, gen);
    t.copy_(tmp);
  };
  normal(wte->weight, std);
  normal(wpe->weight, std);
  for (auto& m : *h) {
    auto& b = *m->as<Block>();
    normal(b.attn->c_attn->weight, std);
    normal(b.attn->c_proj->weight, proj_std);
    normal(b.mlp->c_fc->weight, std);
    normal(b.mlp->c_proj->weight, proj_std);
    for (auto* c : {&b.attn->c_attn, &b.attn->c_proj, &b.mlp->c_fc, &b.mlp->c_proj}) (*c)->bias.zero_();
    for (auto* ln : {&b.ln_1, &b.ln_2}) {
      (*ln)->weight.fill_(1.0);
      (*ln)->bias.zero_();
    }
  }
  ln_f->weight.fill_(1.0);
  ln_f->bias.zero_();
}

torch::Tensor Gpt2Impl::forward(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= cfg_.n_positions, "sequence length ", T, " exceeds n_positions ", cfg_.n_positions);
  auto pos = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
  auto x = torch::embedding(wte->weight, idx) + torch::embedding(wpe->weight, pos);
  for (auto& m : *h) x = m->as<Block>()->forward(x);
  x = ln_f(x);
  return torch::matmul(x, wte->weight.t());
}

torch::Tensor Gpt2Impl::loss(const torch::Tensor& idx, const torch::Tensor& targets) {
  auto logits = forward(idx);
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat32),
                                              targets.reshape({-1}));
}

std::vector<torch::Tensor> ordered_parameters(Gpt2Impl& model) { return model.parameters(/*recurse=*/true); }

std::vector<std::string> ordered_parameter_names(Gpt2Impl& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) names.push_back(item.key());
  return names;
}

}  // namespace dptwin::exec
