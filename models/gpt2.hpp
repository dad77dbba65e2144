// models/gpt2.hpp — the GPT-2 family as dptwin knows it: configurations,
// presets and parameter tensors in registration order.
//
// This header is shared by the simulator (through workload.hpp) and by the
// execution backend (exec/ builds its LibTorch modules from Gpt2Config and
// registers parameters in exactly the order of gpt2_tensors()).
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/yaml_reader.hpp"

namespace dptwin::models {

// One GPT-2 configuration. Fields and defaults follow HuggingFace GPT2Config.
struct Gpt2Config {
  std::string name;          // preset or user name, e.g. "paper"
  int n_layer = 12;          // transformer blocks
  int n_embd = 768;          // width C
  int n_head = 12;           // attention heads; REQUIRES n_embd % n_head == 0
  int n_positions = 1024;    // rows of the position embedding (parameters)
  int n_ctx = 1024;          // training context T (tokens per sample); REQUIRES n_ctx <= n_positions
  int vocab_size = 50257;    // rows of the token embedding
  bool tied_embeddings = true;  // lm_head shares wte (no extra parameters)
  // How the training code runs it (time only, not parameters):
  // gelu: "eager" = HuggingFace gelu_new as Python arithmetic (8 kernels forward,
  // 12 backward; the paper's code), "fused" = one tanh-GELU kernel each way
  // (torch.nn.functional.gelu(approximate="tanh"), dptwin-exec's GPT-2).
  enum class Gelu { Eager, Fused } gelu = Gelu::Eager;
  bool dropout = true;  // dropout layers run in training (the paper's); dptwin-exec has none
};

// Presets: "paper" (the paper's 106,331,904-parameter model, context 512),
// "gpt2" (124M), "gpt2-medium", "gpt2-large", "gpt2-xl", and test sizes
// "tiny" and "small". Order is stable (used by `dptwin list models`).
const std::vector<Gpt2Config>& gpt2_presets();
std::optional<Gpt2Config> find_gpt2_preset(const std::string& name);

// Reads a user model: either a preset name (scalar) or a mapping
//   {name, preset?, n_layer, n_embd, n_head, n_positions, n_ctx, vocab_size, tied_embeddings,
//    gelu: eager|fused, dropout: bool}
// where `preset` supplies defaults for fields not given. Validates every field.
Gpt2Config parse_gpt2_config(const YamlNode& node);
// Throws InputError located at `where` when the config is inconsistent.
void validate_gpt2_config(const Gpt2Config& cfg, const YamlNode* where);

// Role of a parameter tensor (decides casting under O1/O2, weight decay, ...).
enum class TensorRole { TokenEmbedding, PositionEmbedding, Weight, Bias, LayerNormWeight, LayerNormBias };

// One parameter tensor, in PyTorch registration order
// (wte, wpe, h.0.ln_1.weight, h.0.ln_1.bias, h.0.attn.c_attn.weight, ...).
struct TensorSpec {
  std::string name;            // HuggingFace-style name, e.g. "h.3.mlp.c_fc.weight"
  std::vector<int64_t> shape;  // as HuggingFace Conv1D stores it (in, out) for weights
  int64_t numel = 0;
  TensorRole role = TensorRole::Weight;
  int layer = -1;              // block index, -1 for embeddings and ln_f
};

std::vector<TensorSpec> gpt2_tensors(const Gpt2Config& cfg);
int64_t parameter_count(const Gpt2Config& cfg);

// Training FLOPs per token, the count tests check against: 6N + 6·L·C·T
// (N parameters excluding position embeddings are not special-cased: N = parameter_count).
double training_flops_per_token_estimate(const Gpt2Config& cfg);

// --- Additions (models/ owner) ---

// A registered non-parameter buffer of the HuggingFace GPT-2 (transformers 4.x):
// per block `h.i.attn.bias` (the causal mask, uint8 [1,1,P,P]) and
// `h.i.attn.masked_bias` (fp32 scalar). DistributedDataParallel with
// broadcast_buffers=true broadcasts these from rank 0 before every forward,
// so a simulator of `dps` needs their size. Not trained, not in gpt2_tensors().
struct BufferSpec {
  std::string name;            // e.g. "h.0.attn.bias"
  std::vector<int64_t> shape;  // empty for a scalar
  int64_t numel = 0;
  double bytes_per_element = 1.0;  // uint8 mask: 1; masked_bias: 4 (fp32; 2 after O2's model.half())
  int layer = -1;
  double bytes() const { return static_cast<double>(numel) * bytes_per_element; }
};
// Buffers in registration order (interleaved per block as HuggingFace registers them).
std::vector<BufferSpec> gpt2_buffers(const Gpt2Config& cfg);

}  // namespace dptwin::models
