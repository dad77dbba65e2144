// models/gpt2.cpp — GPT-2 presets, YAML parsing/validation and parameter tensors.
#include "models/gpt2.hpp"

#include <fmt/format.h>

#include <string_view>

namespace dptwin::models {
namespace {

// Sanity limits: far above any real GPT-2, low enough to catch typos and to
// keep every derived count (elements of a B·H·T·T tensor, FLOPs) finite in
// int64/double.
constexpr int kMaxLayers = 1000;
constexpr int kMaxEmbd = 65536;
constexpr int kMaxPositions = 1 << 20;  // 1,048,576 tokens
constexpr int kMaxVocab = 10'000'000;

Gpt2Config make(std::string name, int n_layer, int n_embd, int n_head, int n_positions, int n_ctx, int vocab) {
  Gpt2Config c;
  c.name = std::move(name);
  c.n_layer = n_layer;
  c.n_embd = n_embd;
  c.n_head = n_head;
  c.n_positions = n_positions;
  c.n_ctx = n_ctx;
  c.vocab_size = vocab;
  c.tied_embeddings = true;
  return c;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& p : gpt2_presets()) out.push_back(p.name);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Throws an InputError for `key`, located at that key's node when the config
// came from a YAML mapping that has it, else at `where` itself, else unlocated.
[[noreturn]] void fail_key(const YamlNode* where, std::string_view key, const std::string& msg) {
  if (where != nullptr) {
    if (where->is_map()) {
      if (auto n = where->find(key)) n->fail(msg);
      std::string path = where->path().empty() ? std::string(key) : where->path() + "." + std::string(key);
      throw InputError(where->location(), path, msg);
    }
    where->fail(msg);
  }
  throw InputError({}, std::string(key), msg);
}

void check_range(const YamlNode* where, std::string_view key, int v, int lo, int hi) {
  if (v < lo || v > hi) fail_key(where, key, fmt::format("must be between {} and {}, got {}", lo, hi, v));
}

Gpt2Config preset_or_fail(const YamlNode& node) {
  std::string name = node.as<std::string>();
  if (auto p = find_gpt2_preset(name)) return *p;
  std::string hint = closest_match(name, preset_names());
  node.fail(hint.empty() ? fmt::format("unknown model preset '{}' (known: {})", name, join(preset_names()))
                         : fmt::format("unknown model preset '{}'; did you mean '{}'? (known: {})", name, hint,
                                       join(preset_names())));
}

void add(std::vector<TensorSpec>& out, std::string name, std::vector<int64_t> shape, TensorRole role, int layer) {
  TensorSpec t;
  t.name = std::move(name);
  t.numel = 1;
  for (int64_t d : shape) t.numel *= d;
  t.shape = std::move(shape);
  t.role = role;
  t.layer = layer;
  out.push_back(std::move(t));
}

}  // namespace

const std::vector<Gpt2Config>& gpt2_presets() {
  // Parameter counts (tied embeddings): paper 106,331,904; gpt2 124,439,808;
  // gpt2-medium 354,823,168; gpt2-large 774,030,080; gpt2-xl 1,557,611,200.
  static const std::vector<Gpt2Config> presets = {
      make("paper", 12, 768, 12, 1024, 512, 26679),
      make("gpt2", 12, 768, 12, 1024, 1024, 50257),
      make("gpt2-medium", 24, 1024, 16, 1024, 1024, 50257),
      make("gpt2-large", 36, 1280, 20, 1024, 1024, 50257),
      make("gpt2-xl", 48, 1600, 25, 1024, 1024, 50257),
      make("tiny", 2, 64, 2, 64, 32, 256),
      make("small", 4, 128, 4, 128, 64, 256),
  };
  return presets;
}

std::optional<Gpt2Config> find_gpt2_preset(const std::string& name) {
  for (const auto& p : gpt2_presets())
    if (p.name == name) return p;
  return std::nullopt;
}

void validate_gpt2_config(const Gpt2Config& cfg, const YamlNode* where) {
  if (cfg.name.empty()) fail_key(where, "name", "model name must not be empty");
  check_range(where, "n_layer", cfg.n_layer, 1, kMaxLayers);
  check_range(where, "n_embd", cfg.n_embd, 1, kMaxEmbd);
  check_range(where, "n_head", cfg.n_head, 1, cfg.n_embd);
  check_range(where, "n_positions", cfg.n_positions, 1, kMaxPositions);
  check_range(where, "n_ctx", cfg.n_ctx, 1, kMaxPositions);
  check_range(where, "vocab_size", cfg.vocab_size, 1, kMaxVocab);
  if (cfg.n_embd % cfg.n_head != 0)
    fail_key(where, "n_head",
             fmt::format("n_embd ({}) must be divisible by n_head ({})", cfg.n_embd, cfg.n_head));
  if (cfg.n_ctx > cfg.n_positions)
    fail_key(where, "n_ctx",
             fmt::format("n_ctx ({}) must not exceed n_positions ({})", cfg.n_ctx, cfg.n_positions));
}

Gpt2Config parse_gpt2_config(const YamlNode& node) {
  if (node.is_scalar()) return preset_or_fail(node);
  if (!node.is_map()) node.fail("expected a model preset name or a mapping of GPT-2 fields");
  node.check_keys({"name", "preset", "n_layer", "n_embd", "n_head", "n_positions", "n_ctx", "vocab_size",
                   "tied_embeddings", "gelu", "dropout"});
  Gpt2Config cfg;  // HuggingFace GPT2Config defaults (the 124M gpt2)
  cfg.name = "custom";
  if (auto p = node.find("preset")) cfg = preset_or_fail(*p);
  if (auto n = node.find("name")) cfg.name = n->as<std::string>();
  auto read_int = [&](std::string_view key, int& field) {
    if (auto n = node.find(key)) field = n->as_positive_int();
  };
  read_int("n_layer", cfg.n_layer);
  read_int("n_embd", cfg.n_embd);
  read_int("n_head", cfg.n_head);
  read_int("n_positions", cfg.n_positions);
  read_int("n_ctx", cfg.n_ctx);
  read_int("vocab_size", cfg.vocab_size);
  cfg.tied_embeddings = node.get<bool>("tied_embeddings", cfg.tied_embeddings);
  if (auto g = node.find("gelu")) {
    const auto v = g->as<std::string>();
    if (v == "eager") cfg.gelu = Gpt2Config::Gelu::Eager;
    else if (v == "fused") cfg.gelu = Gpt2Config::Gelu::Fused;
    else g->fail(fmt::format("expected 'eager' (HuggingFace gelu_new, 8 kernels) or 'fused' (one kernel), got '{}'", v));
  }
  cfg.dropout = node.get<bool>("dropout", cfg.dropout);
  validate_gpt2_config(cfg, &node);
  return cfg;
}

std::vector<TensorSpec> gpt2_tensors(const Gpt2Config& cfg) {
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, P = cfg.n_positions;
  std::vector<TensorSpec> out;
  out.reserve(2 + 12 * static_cast<size_t>(cfg.n_layer) + 3);
  add(out, "wte.weight", {V, C}, TensorRole::TokenEmbedding, -1);
  add(out, "wpe.weight", {P, C}, TensorRole::PositionEmbedding, -1);
  for (int i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("h.{}.", i);
    add(out, h + "ln_1.weight", {C}, TensorRole::LayerNormWeight, i);
    add(out, h + "ln_1.bias", {C}, TensorRole::LayerNormBias, i);
    add(out, h + "attn.c_attn.weight", {C, 3 * C}, TensorRole::Weight, i);
    add(out, h + "attn.c_attn.bias", {3 * C}, TensorRole::Bias, i);
    add(out, h + "attn.c_proj.weight", {C, C}, TensorRole::Weight, i);
    add(out, h + "attn.c_proj.bias", {C}, TensorRole::Bias, i);
    add(out, h + "ln_2.weight", {C}, TensorRole::LayerNormWeight, i);
    add(out, h + "ln_2.bias", {C}, TensorRole::LayerNormBias, i);
    add(out, h + "mlp.c_fc.weight", {C, 4 * C}, TensorRole::Weight, i);
    add(out, h + "mlp.c_fc.bias", {4 * C}, TensorRole::Bias, i);
    add(out, h + "mlp.c_proj.weight", {4 * C, C}, TensorRole::Weight, i);
    add(out, h + "mlp.c_proj.bias", {C}, TensorRole::Bias, i);
  }
  add(out, "ln_f.weight", {C}, TensorRole::LayerNormWeight, -1);
  add(out, "ln_f.bias", {C}, TensorRole::LayerNormBias, -1);
  // nn.Linear(C, V, bias=False) stores (out, in).
  if (!cfg.tied_embeddings) add(out, "lm_head.weight", {V, C}, TensorRole::Weight, -1);
  return out;
}

int64_t parameter_count(const Gpt2Config& cfg) {
  // N = V·C + P·C + L·(12·C² + 13·C) + 2·C  (+ V·C when lm_head is not tied)
  const int64_t C = cfg.n_embd, V = cfg.vocab_size, P = cfg.n_positions, L = cfg.n_layer;
  int64_t n = V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C;
  if (!cfg.tied_embeddings) n += V * C;
  return n;
}

double training_flops_per_token_estimate(const Gpt2Config& cfg) {
  // 6N (2 forward + 4 backward per parameter) + 6·L·C·T (attention scores and
  // weighted sum, counted once per token for a causal model as in Kaplan et al.).
  return 6.0 * static_cast<double>(parameter_count(cfg)) +
         6.0 * cfg.n_layer * static_cast<double>(cfg.n_embd) * cfg.n_ctx;
}

std::vector<BufferSpec> gpt2_buffers(const Gpt2Config& cfg) {
  std::vector<BufferSpec> out;
  const int64_t P = cfg.n_positions;
  for (int i = 0; i < cfg.n_layer; ++i) {
    out.push_back({fmt::format("h.{}.attn.bias", i), {1, 1, P, P}, P * P, 1.0, i});
    out.push_back({fmt::format("h.{}.attn.masked_bias", i), {}, 1, 4.0, i});
  }
  return out;
}

}  // namespace dptwin::models
