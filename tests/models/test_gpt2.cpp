#include <doctest.h>

#include <string>

#include "models/gpt2.hpp"

using namespace dptwin;
using namespace dptwin::models;

namespace {

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

Gpt2Config preset(const std::string& name) {
  auto p = find_gpt2_preset(name);
  REQUIRE(p.has_value());
  return *p;
}

int64_t sum_numel(const Gpt2Config& cfg) {
  int64_t n = 0;
  for (const auto& t : gpt2_tensors(cfg)) n += t.numel;
  return n;
}

}  // namespace

TEST_CASE("preset parameter counts are exact and match the tensor list") {
  // N = V·C + P·C + L·(12·C² + 13·C) + 2·C with tied embeddings.
  struct Case {
    const char* name;
    int64_t params;
  };
  const Case cases[] = {
      {"paper", 106'331'904},      // 26679·768 + 1024·768 + 12·7,087,872 + 1536
      {"gpt2", 124'439'808},       // the HuggingFace 124M
      {"gpt2-medium", 354'823'168},
      {"gpt2-large", 774'030'080},
      {"gpt2-xl", 1'557'611'200},
      {"tiny", 120'576},        // 256·64 + 64·64 + 2·(12·64² + 13·64) + 2·64
      {"small", 842'496},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Gpt2Config cfg = preset(c.name);
    CHECK(parameter_count(cfg) == c.params);
    CHECK(sum_numel(cfg) == c.params);
  }
  CHECK(gpt2_presets().size() == 7);
  CHECK(gpt2_presets().front().name == "paper");
  CHECK_FALSE(find_gpt2_preset("gpt3").has_value());
}

TEST_CASE("paper preset matches the paper's configuration") {
  Gpt2Config p = preset("paper");
  CHECK(p.n_layer == 12);
  CHECK(p.n_embd == 768);
  CHECK(p.n_head == 12);
  CHECK(p.n_ctx == 512);
  CHECK(p.n_positions == 1024);
  CHECK(p.vocab_size == 26679);
  CHECK(p.tied_embeddings);
}

TEST_CASE("tensors follow PyTorch registration order") {
  Gpt2Config cfg = preset("gpt2");
  auto ts = gpt2_tensors(cfg);
  REQUIRE(ts.size() == 2 + 12 * 12 + 2);
  CHECK(ts[0].name == "wte.weight");
  CHECK(ts[0].shape == std::vector<int64_t>{50257, 768});
  CHECK(ts[0].role == TensorRole::TokenEmbedding);
  CHECK(ts[1].name == "wpe.weight");
  CHECK(ts[1].shape == std::vector<int64_t>{1024, 768});
  const char* block0[] = {"h.0.ln_1.weight",      "h.0.ln_1.bias",      "h.0.attn.c_attn.weight",
                          "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
                          "h.0.ln_2.weight",      "h.0.ln_2.bias",      "h.0.mlp.c_fc.weight",
                          "h.0.mlp.c_fc.bias",    "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias"};
  for (int i = 0; i < 12; ++i) {
    CHECK(ts[2 + i].name == block0[i]);
    CHECK(ts[2 + i].layer == 0);
  }
  CHECK(ts[4].shape == std::vector<int64_t>{768, 2304});  // Conv1D (in, out)
  CHECK(ts[12].shape == std::vector<int64_t>{3072, 768});
  CHECK(ts[ts.size() - 3].name == "h.11.mlp.c_proj.bias");
  CHECK(ts[ts.size() - 2].name == "ln_f.weight");
  CHECK(ts.back().name == "ln_f.bias");
  CHECK(ts.back().layer == -1);

  cfg.tied_embeddings = false;
  auto untied = gpt2_tensors(cfg);
  REQUIRE(untied.size() == ts.size() + 1);
  CHECK(untied.back().name == "lm_head.weight");
  CHECK(untied.back().shape == std::vector<int64_t>{50257, 768});
  CHECK(parameter_count(cfg) == 124'439'808 + 50257LL * 768);
  CHECK(sum_numel(cfg) == parameter_count(cfg));
}

TEST_CASE("training FLOPs estimate is 6N + 6LCT") {
  Gpt2Config p = preset("paper");
  CHECK(training_flops_per_token_estimate(p) == doctest::Approx(6.0 * 106'331'904 + 6.0 * 12 * 768 * 512));
}

TEST_CASE("buffers: causal mask per block") {
  auto bufs = gpt2_buffers(preset("paper"));
  REQUIRE(bufs.size() == 24);
  CHECK(bufs[0].name == "h.0.attn.bias");
  CHECK(bufs[0].bytes() == doctest::Approx(1024.0 * 1024.0));
  CHECK(bufs[1].name == "h.0.attn.masked_bias");
  CHECK(bufs[1].numel == 1);
}

TEST_CASE("YAML models: presets, overrides, full mappings") {
  auto doc = load_yaml_string(
      "a: gpt2-medium\n"
      "b:\n  preset: paper\n  n_ctx: 1024\n"
      "c:\n  name: mine\n  n_layer: 3\n  n_embd: 96\n  n_head: 3\n  n_positions: 256\n  n_ctx: 128\n"
      "  vocab_size: 1000\n  tied_embeddings: false\n",
      "m.yaml");
  Gpt2Config a = parse_gpt2_config(doc.at("a"));
  CHECK(a.name == "gpt2-medium");
  CHECK(parameter_count(a) == 354'823'168);

  Gpt2Config b = parse_gpt2_config(doc.at("b"));
  CHECK(b.name == "paper");
  CHECK(b.n_ctx == 1024);
  CHECK(b.vocab_size == 26679);

  Gpt2Config c = parse_gpt2_config(doc.at("c"));
  CHECK(c.name == "mine");
  CHECK(c.n_layer == 3);
  CHECK(c.n_embd == 96);
  CHECK(c.n_head == 3);
  CHECK(c.n_positions == 256);
  CHECK(c.n_ctx == 128);
  CHECK(c.vocab_size == 1000);
  CHECK_FALSE(c.tied_embeddings);
  CHECK(sum_numel(c) == parameter_count(c));
}

TEST_CASE("YAML model errors name the key path and line") {
  auto doc = load_yaml_string(
      "unknown:\n  preset: tiny\n  n_layers: 4\n"
      "divisible:\n  preset: tiny\n  n_embd: 100\n  n_head: 3\n"
      "ctx:\n  preset: small\n  n_ctx: 256\n"
      "badpreset: gtp2\n"
      "negative:\n  n_layer: -2\n"
      "huge:\n  n_layer: 5000\n",
      "model.yaml");

  std::string msg = error_of([&] { parse_gpt2_config(doc.at("unknown")); });
  CHECK(msg.find("model.yaml:3:3") != std::string::npos);
  CHECK(msg.find("key 'unknown.n_layers'") != std::string::npos);
  CHECK(msg.find("did you mean 'n_layer'") != std::string::npos);

  msg = error_of([&] { parse_gpt2_config(doc.at("divisible")); });
  CHECK(msg.find("model.yaml:7:11") != std::string::npos);
  CHECK(msg.find("key 'divisible.n_head'") != std::string::npos);
  CHECK(msg.find("divisible by n_head") != std::string::npos);

  msg = error_of([&] { parse_gpt2_config(doc.at("ctx")); });
  CHECK(msg.find("model.yaml:10:10") != std::string::npos);
  CHECK(msg.find("key 'ctx.n_ctx'") != std::string::npos);
  CHECK(msg.find("must not exceed n_positions (128)") != std::string::npos);

  msg = error_of([&] { parse_gpt2_config(doc.at("badpreset")); });
  CHECK(msg.find("model.yaml:11:12") != std::string::npos);
  CHECK(msg.find("did you mean 'gpt2'") != std::string::npos);

  msg = error_of([&] { parse_gpt2_config(doc.at("negative")); });
  CHECK(msg.find("key 'negative.n_layer'") != std::string::npos);

  msg = error_of([&] { parse_gpt2_config(doc.at("huge")); });
  CHECK(msg.find("key 'huge.n_layer'") != std::string::npos);
  CHECK(msg.find("between 1 and 1000") != std::string::npos);
}

TEST_CASE("validation without a YAML node names the field") {
  Gpt2Config cfg = preset("tiny");
  cfg.n_ctx = 65;
  std::string msg = error_of([&] { validate_gpt2_config(cfg, nullptr); });
  CHECK(msg.find("key 'n_ctx'") != std::string::npos);
  cfg = preset("tiny");
  cfg.vocab_size = 20'000'000;
  msg = error_of([&] { validate_gpt2_config(cfg, nullptr); });
  CHECK(msg.find("key 'vocab_size'") != std::string::npos);
  CHECK(error_of([&] { validate_gpt2_config(preset("gpt2-xl"), nullptr); }).empty());
}
