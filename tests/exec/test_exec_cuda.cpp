// tests/exec/test_exec_cuda.cpp — the CUDA build on a GPU (meson test exec_cuda).
//
// Built only with -Dcuda=enabled: GPT-2 on the GPU computes the CPU's loss and
// gradients; an NCCL communicator of one rank runs every collective on device
// tensors (NCCL refuses two ranks on one GPU, so the multi-rank NCCL path needs
// a machine with several); dptwin-exec trains on the GPU in fp32, fp16 O1 and
// O2 with dynamic loss scaling, and bf16, reporting the GPU's peak memory; and
// dps, sps and horovod over Gloo with the model on the GPU equal single on the GPU.
// Every case needs a visible GPU and fails without one: this suite runs only
// where a CUDA build was asked for.
#include "torch_doctest.hpp"
#include "param_compare.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "exec/comm.hpp"
#include "exec/gpt2_model.hpp"
#include "exec/process.hpp"
#include "models/gpt2.hpp"
#include "temp_dir.hpp"
#include "worker_helpers.hpp"

using namespace dptwin;
using namespace dptwin::exec;
using namespace std::chrono_literals;
using dptwin::testing::TempDir;

namespace {

void require_gpu() { REQUIRE_MESSAGE(torch::cuda::is_available(), "exec_cuda needs a visible CUDA device"); }

GroupOutcome run_worker(std::vector<std::string> args, double timeout_s = 180) {
  std::vector<std::string> argv{worker(), "--model", "tiny", "--synthetic-tokens", "32768", "--comm-timeout-s", "30",
                                "--launch-timeout-s", std::to_string(static_cast<int>(timeout_s))};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process_group({ProcessSpec{argv, {}, "dptwin-exec", {}}}, timeout_s + 30);
}

}  // namespace

TEST_CASE("cuda: GPT-2 on the GPU computes the CPU's loss and gradients") {
  require_gpu();
  auto cfg = *models::find_gpt2_preset("tiny");
  Gpt2 cpu(cfg), gpu(cfg);
  cpu->init_weights(7);
  gpu->init_weights(7);
  gpu->to(torch::Device(torch::kCUDA, 0));
  torch::manual_seed(1);
  auto idx = torch::randint(cfg.vocab_size, {4, cfg.n_ctx}, torch::kLong);
  auto tgt = torch::randint(cfg.vocab_size, {4, cfg.n_ctx}, torch::kLong);
  auto lc = cpu->loss(idx, tgt);
  auto lg = gpu->loss(idx.cuda(), tgt.cuda());
  lc.backward();
  lg.backward();
  CHECK(lg.item<double>() == doctest::Approx(lc.item<double>()).epsilon(1e-5));
  const auto pc = ordered_parameters(*cpu), pg = ordered_parameters(*gpu);
  double num = 0, den = 0;
  for (size_t i = 0; i < pc.size(); ++i) {
    num += (pg[i].grad().cpu() - pc[i].grad()).pow(2).sum().item<double>();
    den += pc[i].grad().pow(2).sum().item<double>();
  }
  MESSAGE("gradient relative difference GPU vs CPU: " << std::sqrt(num / den));
  CHECK(std::sqrt(num / den) < 1e-4);
}

TEST_CASE("cuda: an NCCL communicator of one rank runs every collective on device tensors") {
  require_gpu();
  REQUIRE(nccl_available());
  TempDir d;
  auto c = make_nccl_communicator("file:" + d.path + "/store", 0, 1, 30s);
  REQUIRE(c->backend() == "nccl");
  const auto dev = torch::TensorOptions().device(torch::kCUDA, 0);
  auto x = torch::arange(1000, dev.dtype(torch::kFloat));
  c->allreduce(x)->wait(30s);
  CHECK(x[999].item<float>() == 999.0f);
  auto h = torch::full({7}, 3.0, dev.dtype(torch::kHalf));
  c->allreduce(h, ReduceOp::Max)->wait(30s);
  CHECK(h[0].item<float>() == 3.0f);
  auto b = torch::full({7}, 2.0, dev.dtype(torch::kBFloat16));
  c->broadcast(b, 0)->wait(30s);
  c->reduce(b, 0)->wait(30s);
  CHECK(b[6].item<float>() == 2.0f);
  auto in = torch::full({5}, 4.0, dev.dtype(torch::kFloat)), out = torch::zeros({5}, dev.dtype(torch::kFloat));
  c->allgather(in, out)->wait(30s);
  CHECK(out[4].item<float>() == 4.0f);
  c->barrier()->wait(30s);
}

TEST_CASE("cuda: dptwin-exec trains on the GPU: fp32, fp16 O1 and O2 with loss scaling, bf16") {
  require_gpu();
  TempDir d;
  struct Case {
    const char* name;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"single fp32", {"--strategy", "single"}},
      {"dps nccl fp32", {"--strategy", "dps", "--backend", "nccl"}},
      {"dps+amp nccl fp16 o2", {"--strategy", "dps+amp", "--backend", "nccl", "--precision", "fp16"}},
      {"horovod+amp nccl fp16 o1", {"--strategy", "horovod+amp", "--backend", "nccl", "--precision", "fp16"}},
      {"single bf16 o1", {"--strategy", "single", "--precision", "bf16"}},
  };
  for (const auto& c : cases) {
    const std::string out = d.path + "/" + std::to_string(&c - cases.data()) + ".json";
    auto args = c.args;
    for (const auto& a : {"--steps", "30", "--lr", "3e-3", "--lr-warmup", "3", "--micro-batch", "8", "--out"})
      args.push_back(a);
    args.push_back(out);
    const auto r = run_worker(args);
    REQUIRE_MESSAGE(r.ok, c.name << ": " << r.failure);
    const auto j = load_json(out);
    const auto& s = j["summary"];
    MESSAGE(c.name << ": loss " << s["loss_first"] << " -> " << s["loss_last"] << ", step "
                   << s["step_time_s"]["median"] << " s, GPU peak " << s["device_peak_bytes"] << " B");
    CHECK(s["loss_last"].get<double>() < s["loss_first"].get<double>() - 0.5);
    CHECK(s["device_peak_bytes"].get<int64_t>() > 0);
    CHECK(s["step_time_s"]["median"].get<double>() > 0);
  }
}

TEST_CASE("cuda: dps, sps, horovod on 2 ranks over Gloo with the model on the GPU equal single on the GPU") {
  require_gpu();
  if (!gloo_available()) return;
  TempDir d;
  const std::vector<std::string> common{"--steps", "5", "--lr", "3e-3", "--lr-warmup", "2", "--warmup-steps", "1",
                                        "--device", "cuda"};
  auto args = common;
  for (const auto& a : {"--strategy", "single", "--micro-batch", "4", "--final-params"}) args.push_back(a);
  args.push_back(d.path + "/single.pt");
  const auto single = run_worker(args);
  REQUIRE_MESSAGE(single.ok, single.failure);
  const auto expected = load_named_params(d.path + "/single.pt");
  for (const char* s : {"sps", "dps", "horovod"}) {
    auto a = common;
    const std::string out = d.path + "/" + s;
    for (const auto& x : {std::string("--strategy"), std::string(s), std::string("--np"), std::string("2"),
                          std::string("--backend"), std::string("gloo"), std::string("--micro-batch"),
                          std::string("2"), std::string("--final-params"), out + ".pt"})
      a.push_back(x);
    const auto r = run_worker(a);
    REQUIRE_MESSAGE(r.ok, s << ": " << r.failure);
    const auto diff = compare_params(load_named_params(out + ".pt"), expected);
    MESSAGE(s << " on the GPU over gloo: relative parameter error vs single " << diff.global);
    CHECK(diff.global < 1e-5);
  }
}
