// exec/gpt2_presets_fallback.cpp — TEMPORARY stand-in for models/gpt2.cpp.
//
// Compiled by exec/meson.build only while models/gpt2.cpp does not yet define
// gpt2_presets() (the models/ implementation is being written in parallel).
// Implements just what exec/ calls, following the contract in models/gpt2.hpp.
// Delete this file once models/gpt2.cpp lands; nothing else changes.
#include "models/gpt2.hpp"

#include <stdexcept>

namespace dptwin::models {

const std::vector<Gpt2Config>& gpt2_presets() {
  static const std::vector<Gpt2Config> presets = {
      {"paper", 12, 768, 12, 1024, 512, 26679, true},
      {"gpt2", 12, 768, 12, 1024, 1024, 50257, true},
      {"gpt2-medium", 24, 1024, 16, 1024, 1024, 50257, true},
      {"gpt2-large", 36, 1280, 20, 1024, 1024, 50257, true},
      {"gpt2-xl", 48, 1600, 25, 1024, 1024, 50257, true},
      {"tiny", 2, 64, 4, 128, 64, 512, true},
      {"small", 4, 128, 4, 256, 128, 1024, true},
  };
  return presets;
}

std::optional<Gpt2Config> find_gpt2_preset(const std::string& name) {
  for (const auto& p : gpt2_presets())
    if (p.name == name) return p;
  return std::nullopt;
}

std::vector<TensorSpec> gpt2_tensors(const Gpt2Config& cfg) {
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, TensorRole role, int layer) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    out.push_back({std::move(name), std::move(shape), n, role, layer});
  };
  const int64_t C = cfg.n_embd;
  add("wte", {cfg.vocab_size, C}, TensorRole::TokenEmbedding, -1);
  add("wpe", {cfg.n_positions, C}, TensorRole::PositionEmbedding, -1);
  for (int i = 0; i < cfg.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    add(p + "ln_1.weight", {C}, TensorRole::LayerNormWeight, i);
    add(p + "ln_1.bias", {C}, TensorRole::LayerNormBias, i);
    add(p + "attn.c_attn.weight", {C, 3 * C}, TensorRole::Weight, i);
    add(p + "attn.c_attn.bias", {3 * C}, TensorRole::Bias, i);
    add(p + "attn.c_proj.weight", {C, C}, TensorRole::Weight, i);
    add(p + "attn.c_proj.bias", {C}, TensorRole::Bias, i);
    add(p + "ln_2.weight", {C}, TensorRole::LayerNormWeight, i);
    add(p + "ln_2.bias", {C}, TensorRole::LayerNormBias, i);
    add(p + "mlp.c_fc.weight", {C, 4 * C}, TensorRole::Weight, i);
    add(p + "mlp.c_fc.bias", {4 * C}, TensorRole::Bias, i);
    add(p + "mlp.c_proj.weight", {4 * C, C}, TensorRole::Weight, i);
    add(p + "mlp.c_proj.bias", {C}, TensorRole::Bias, i);
  }
  add("ln_f.weight", {C}, TensorRole::LayerNormWeight, -1);
  add("ln_f.bias", {C}, TensorRole::LayerNormBias, -1);
  if (!cfg.tied_embeddings) add("lm_head.weight", {cfg.vocab_size, C}, TensorRole::Weight, -1);
  return out;
}

int64_t parameter_count(const Gpt2Config& cfg) {
  int64_t n = 0;
  for (const auto& t : gpt2_tensors(cfg)) n += t.numel;
  return n;
}

}  // namespace dptwin::models
