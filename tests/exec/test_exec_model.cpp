// tests/exec/test_exec_model.cpp — the LibTorch GPT-2 against models/ and its init.
#include "torch_doctest.hpp"
#include <ATen/autocast_mode.h>

#include <cmath>

#include "exec/amp.hpp"
#include "exec/gpt2_model.hpp"
#include "exec/lr_schedule.hpp"
#include "models/gpt2.hpp"

using namespace dptwin;
using namespace dptwin::exec;

namespace {

models::Gpt2Config preset(const std::string& name) {
  auto p = models::find_gpt2_preset(name);
  REQUIRE(p.has_value());
  return *p;
}

}  // namespace

TEST_CASE("parameters: names, order, shapes and count equal models::gpt2_tensors") {
  for (const char* name : {"tiny", "small", "paper"}) {
    const auto cfg = preset(name);
    Gpt2 model(cfg);
    const auto names = ordered_parameter_names(*model);
    const auto params = ordered_parameters(*model);
    const auto specs = models::gpt2_tensors(cfg);
    REQUIRE(names.size() == specs.size());
    int64_t total = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      CHECK(names[i] == specs[i].name);
      CHECK(params[i].sizes().vec() == specs[i].shape);
      total += params[i].numel();
    }
    CHECK(total == models::parameter_count(cfg));
    if (std::string(name) == "paper") CHECK(total == 106331904);
    // Buffers: HuggingFace's causal mask and masked_bias per block (models::gpt2_buffers).
    const auto bufs = models::gpt2_buffers(cfg);
    const auto named = model->named_buffers();
    REQUIRE(named.size() == bufs.size());
    size_t k = 0;
    for (const auto& b : named) {
      CHECK(b.key() == bufs[k].name);
      CHECK(b.value().numel() == bufs[k].numel);
      ++k;
    }
  }
}

TEST_CASE("initialization: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer), deterministic") {
  auto cfg = preset("small");
  Gpt2 a(cfg), b(cfg);
  a->init_weights(3);
  b->init_weights(3);
  const auto pa = ordered_parameters(*a), pb = ordered_parameters(*b);
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
  auto& blk = *a->h[0]->as<Block>();
  CHECK(blk.attn->c_attn->weight.std().item<double>() == doctest::Approx(0.02).epsilon(0.05));
  CHECK(blk.mlp->c_fc->weight.std().item<double>() == doctest::Approx(0.02).epsilon(0.05));
  const double proj = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  CHECK(blk.attn->c_proj->weight.std().item<double>() == doctest::Approx(proj).epsilon(0.05));
  CHECK(blk.mlp->c_proj->weight.std().item<double>() == doctest::Approx(proj).epsilon(0.05));
  CHECK(blk.attn->c_attn->bias.abs().sum().item<double>() == 0.0);
  CHECK(blk.ln_1->weight.mean().item<double>() == 1.0);
  CHECK(a->wte->weight.std().item<double>() == doctest::Approx(0.02).epsilon(0.05));
}

TEST_CASE("forward: shapes, causal, initial loss near ln(vocab)") {
  const auto cfg = preset("tiny");
  Gpt2 model(cfg);
  model->init_weights(1);
  auto idx = torch::randint(0, cfg.vocab_size, {3, cfg.n_ctx}, torch::kLong);
  auto logits = model->forward(idx);
  const std::vector<int64_t> shape{3, cfg.n_ctx, cfg.vocab_size};
  CHECK(logits.sizes().vec() == shape);
  // Causality: changing the last token does not change earlier logits.
  auto idx2 = idx.clone();
  idx2.index_put_({torch::indexing::Slice(), -1}, (idx.index({torch::indexing::Slice(), -1}) + 1) % cfg.vocab_size);
  auto logits2 = model->forward(idx2);
  CHECK(torch::allclose(logits.narrow(1, 0, cfg.n_ctx - 1), logits2.narrow(1, 0, cfg.n_ctx - 1)));
  const double loss = model->loss(idx, torch::randint(0, cfg.vocab_size, {3, cfg.n_ctx}, torch::kLong)).item<double>();
  CHECK(loss == doctest::Approx(std::log(cfg.vocab_size)).epsilon(0.05));
}

TEST_CASE("bf16 autocast forward stays close to fp32") {
  const auto cfg = preset("tiny");
  Gpt2 model(cfg);
  model->init_weights(1);
  auto idx = torch::randint(0, cfg.vocab_size, {2, cfg.n_ctx}, torch::kLong);
  auto y = torch::randint(0, cfg.vocab_size, {2, cfg.n_ctx}, torch::kLong);
  const double fp32 = model->loss(idx, y).item<double>();
  double bf16 = 0;
  {
    AutocastScope scope(true, torch::kCPU, torch::kBFloat16);
    bf16 = model->loss(idx, y).item<double>();
  }
  CHECK(bf16 == doctest::Approx(fp32).epsilon(0.01));
  CHECK_FALSE(at::autocast::is_cpu_enabled());
}

TEST_CASE("learning-rate schedule: linear warm-up, cosine/linear decay to min") {
  LrSchedule s{1.0, 10, 110, "cosine", 0.1};
  CHECK(s.at(0) == doctest::Approx(0.1));
  CHECK(s.at(9) == doctest::Approx(1.0));
  CHECK(s.at(10) == doctest::Approx(1.0));
  CHECK(s.at(60) == doctest::Approx(0.55));  // halfway: min + (1 - min)/2
  CHECK(s.at(110) == doctest::Approx(0.1));
  s.decay = "linear";
  CHECK(s.at(60) == doctest::Approx(0.55));
  CHECK(s.at(35) == doctest::Approx(1.0 - 0.9 * 0.25));
  s.decay = "constant";
  CHECK(s.at(100) == 1.0);
}

TEST_CASE("loss scaler: skip on inf/NaN and back off, grow after the interval") {
  LossScaler sc(1024, 2.0, 0.5, 3);
  auto g = torch::full({4}, 2048.0);
  CHECK(sc.unscale_and_update({g}));
  CHECK(g[0].item<double>() == 2.0);
  auto bad = torch::tensor({1.0, std::numeric_limits<double>::infinity()});
  CHECK_FALSE(sc.unscale_and_update({bad}));
  CHECK(sc.scale() == 512);
  auto nan = torch::tensor({std::nan("")});
  CHECK_FALSE(sc.unscale_and_update({nan}));
  CHECK(sc.scale() == 256);
  for (int i = 0; i < 3; ++i) CHECK(sc.unscale_and_update({torch::ones({2})}));
  CHECK(sc.scale() == 512);
}

TEST_CASE("gradient clipping: PyTorch's clip_grad_norm_ formula") {
  auto a = torch::tensor({3.0f}), b = torch::tensor({4.0f});
  CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(5.0));
  CHECK(a.item<double>() == doctest::Approx(3.0 / (5.0 + 1e-6)).scale(0));
  auto c = torch::tensor({0.3f});
  CHECK(clip_grad_norm({c}, 1.0) == doctest::Approx(0.3));
  CHECK(c.item<double>() == doctest::Approx(0.3));  // below the max: untouched
}
