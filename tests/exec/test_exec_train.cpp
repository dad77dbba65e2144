// tests/exec/test_exec_train.cpp — training through the strategies with the
// in-process fake backend (ranks as threads): data-parallel equivalence, DDP
// buckets and overlap (and their rebuild), gradient accumulation, amp,
// checkpoint/resume, NaN; sps in one process (nn.DataParallel over CPU replicas).
#include "torch_doctest.hpp"
#include "param_compare.hpp"
#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>

#include "exec/comm.hpp"
#include "exec/options.hpp"
#include "exec/result.hpp"
#include "exec/trainer.hpp"
#include "models/gpt2.hpp"
#include "temp_dir.hpp"

using namespace dptwin::exec;
namespace fs = std::filesystem;
using dptwin::testing::TempDir;

namespace {

ExecOptions tiny(const std::string& strategy, int np, int micro_batch, int steps = 6) {
  ExecOptions o;
  o.strategy = strategy;
  o.np = np;
  o.backend = "fake";
  o.model = "tiny";
  o.micro_batch = micro_batch;
  o.steps = steps;
  o.warmup_steps = 1;
  o.lr = 3e-3;
  o.lr_warmup = 2;
  o.synthetic_tokens = 1 << 15;
  o.comm_timeout_s = 30;
  validate_exec_options(o);
  return o;
}

// sps in one process: K CPU replicas share the micro-batch.
ExecOptions tiny_replicas(int devices, int micro_batch, int steps = 6) {
  auto o = tiny("sps", 1, micro_batch, steps);
  o.devices_per_process = devices;
  validate_exec_options(o);
  return o;
}

// Runs all ranks; returns rank-ordered outputs.
std::vector<TrainOutput> run(const ExecOptions& o) {
  torch::set_num_threads(1);
  if (o.strategy == "single" || o.devices_per_process > 1) {
    Recorder rec;
    return {train_rank(o, nullptr, rec)};
  }
  auto comms = make_fake_communicators(o.np);
  std::vector<TrainOutput> outs(static_cast<size_t>(o.np));
  std::vector<std::string> errors(static_cast<size_t>(o.np));
  std::vector<Recorder> recs(static_cast<size_t>(o.np));
  std::vector<std::thread> ts;
  for (int r = 0; r < o.np; ++r)
    ts.emplace_back([&, r] {
      try {
        comms[static_cast<size_t>(r)]->set_timeout(std::chrono::duration<double>(o.comm_timeout_s));
        comms[static_cast<size_t>(r)]->set_recorder(&recs[static_cast<size_t>(r)]);
        outs[static_cast<size_t>(r)] = train_rank(o, comms[static_cast<size_t>(r)].get(), recs[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
  return outs;
}

std::vector<double> losses(const TrainOutput& o) {
  std::vector<double> l;
  for (const auto& s : o.report.steps) l.push_back(s.loss);
  return l;
}

}  // namespace

TEST_CASE("data-parallel equivalence: sps, dps, horovod on 2 ranks equal single on the global batch") {
  TempDir d;
  auto ref = tiny("single", 1, 4);
  ref.final_params = d.path + "/single.pt";
  run(ref);
  const auto expected = load_named_params(ref.final_params);
  for (const char* s : {"sps", "dps", "horovod"}) {
    auto o = tiny(s, 2, 2);
    o.final_params = d.path + "/" + s + ".pt";
    const auto outs = run(o);
    const auto diff = compare_params(load_named_params(o.final_params), expected);
    MESSAGE(std::string(s) << ": relative parameter error vs single " << diff.global << " (worst tensor "
                           << diff.worst_name << " " << diff.worst << ")");
    CHECK(diff.global < 1e-5);
    CHECK(diff.worst < 1e-4);
    // Every replica ends identical (sps: rank 1 receives rank 0's parameters).
    CHECK(outs[0].report.param_checksum == doctest::Approx(outs[1].report.param_checksum).epsilon(1e-9));
  }
}

TEST_CASE("horovod: small fusion buffer and dptwin's own ring allreduce keep the equivalence") {
  TempDir d;
  auto ref = tiny("single", 1, 6, 3);
  ref.final_params = d.path + "/single.pt";
  run(ref);
  auto o = tiny("horovod", 3, 2, 3);
  o.fusion_threshold_mb = 0.05;
  o.hvd_ring = true;
  o.final_params = d.path + "/hvd.pt";
  const auto outs = run(o);
  const auto diff = compare_params(load_named_params(o.final_params), load_named_params(ref.final_params));
  CHECK(diff.global < 1e-5);
  int sends = 0, negotiations = 0;
  for (const auto& s : outs[1].report.spans) {
    sends += s.name == "send";
    negotiations += s.name.rfind("hvd.negotiate", 0) == 0;
  }
  CHECK(sends > 0);
  CHECK(negotiations > 0);
}

TEST_CASE("dps: small buckets, launched during backward in reverse order; equivalence holds") {
  TempDir d;
  auto ref = tiny("single", 1, 4, 3);
  ref.final_params = d.path + "/single.pt";
  run(ref);
  auto o = tiny("dps", 2, 2, 3);
  o.bucket_cap_mb = 0.02;  // ~5k floats: several buckets for tiny
  o.first_bucket_mb = 0.005;
  o.final_params = d.path + "/dps.pt";
  const auto outs = run(o);
  CHECK(compare_params(load_named_params(o.final_params), load_named_params(ref.final_params)).global < 1e-5);
  const auto& spans = outs[0].report.spans;
  int buckets = 0;
  int64_t first_launch = -1, backward_end = -1;
  for (const auto& s : spans) {
    if (s.step != 2) continue;
    if (s.name.rfind("allreduce.bucket", 0) == 0) {
      ++buckets;
      if (s.name == "allreduce.bucket0") first_launch = s.launch_ns;
      CHECK(s.bytes <= static_cast<int64_t>(0.02 * 1024 * 1024) + 64 * 256 * 4);  // cap + at most one tensor
    }
    if (s.name == "backward") backward_end = s.end_ns;
  }
  CHECK(buckets >= 4);
  // Bucket 0 (ln_f, the last layer's tensors) is launched before backward is over: overlap.
  CHECK(first_launch >= 0);
  CHECK(first_launch < backward_end);
  // The buckets were rebuilt once, at the start of step 1, from rank 0's order
  // (one int64 per parameter), and every rank allreduces the same buckets.
  for (const auto& out : outs) {
    int order_ops = 0;
    for (const auto& s : out.report.spans)
      if (s.name == "broadcast.bucket_order") {
        ++order_ops;
        CHECK(s.step == 1);
        CHECK(s.bytes == 8 * static_cast<int64_t>(dptwin::models::gpt2_tensors(*dptwin::models::find_gpt2_preset("tiny")).size()));
      }
    CHECK(order_ops == 1);
  }
  auto bucket_bytes = [](const TrainOutput& out, int step) {
    std::vector<int64_t> b;
    for (const auto& s : out.report.spans)
      if (s.step == step && s.name.rfind("allreduce.bucket", 0) == 0) b.push_back(s.bytes);
    return b;
  };
  for (int step = 0; step < 3; ++step) CHECK(bucket_bytes(outs[0], step) == bucket_bytes(outs[1], step));
}

TEST_CASE("dps: --rebuild-buckets=false keeps reverse registration order and the equivalence") {
  TempDir d;
  auto ref = tiny("single", 1, 4, 3);
  ref.final_params = d.path + "/single.pt";
  run(ref);
  auto o = tiny("dps", 2, 2, 3);
  o.bucket_cap_mb = 0.02;
  o.first_bucket_mb = 0.005;
  o.rebuild_buckets = false;
  o.final_params = d.path + "/dps.pt";
  const auto outs = run(o);
  const auto diff = compare_params(load_named_params(o.final_params), load_named_params(ref.final_params));
  MESSAGE("dps without rebuild: relative parameter error vs single " << diff.global);
  CHECK(diff.global < 1e-5);
  for (const auto& s : outs[0].report.spans) CHECK(s.name != "broadcast.bucket_order");
}

TEST_CASE("sps in one process (nn.DataParallel over 2 and 3 CPU replicas) equals single on the same batch") {
  TempDir d;
  for (const auto& [devices, batch] : std::vector<std::pair<int, int>>{{2, 4}, {3, 5}}) {
    auto ref = tiny("single", 1, batch);
    ref.final_params = d.path + "/single.pt";
    const auto ref_losses = losses(run(ref)[0]);
    auto o = tiny_replicas(devices, batch);  // 3 replicas of 5 samples: chunks 2, 2, 1
    o.final_params = d.path + "/dp.pt";
    const auto outs = run(o);
    REQUIRE(outs.size() == 1);
    const auto diff = compare_params(load_named_params(o.final_params), load_named_params(ref.final_params));
    MESSAGE("sps, " << devices << " replicas, micro-batch " << batch << ": relative parameter error vs single "
                    << diff.global << " (worst tensor " << diff.worst_name << " " << diff.worst << ")");
    CHECK(diff.global < 1e-5);
    CHECK(diff.worst < 1e-4);
    const auto l = losses(outs[0]);
    for (size_t k = 0; k < l.size(); ++k) CHECK(l[k] == doctest::Approx(ref_losses[k]).epsilon(1e-5));
  }
}

TEST_CASE("sps in one process: loss falls; the result has its phases and the reduce and broadcast ops") {
  auto o = tiny_replicas(2, 4, 25);
  o.grad_accum = 2;  // replicas accumulate locally; one reduce per optimizer step
  const auto outs = run(o);
  const auto l = losses(outs[0]);
  const double last = (l[l.size() - 1] + l[l.size() - 2] + l[l.size() - 3]) / 3;
  MESSAGE("sps in one process, 2 replicas: loss " << l.front() << " -> " << last);
  CHECK(last < l.front() - 0.5);
  const auto j = make_result(outs[0].info, {outs[0].report});
  CHECK(j["world"] == 1);
  CHECK(j["config"]["devices-per-process"] == 2);
  for (const char* phase : {"forward_s", "backward_s", "wait_s", "optimizer_s", "comm_s"}) {
    REQUIRE_MESSAGE(j["summary"]["phases"].contains(phase), phase);
    CHECK_MESSAGE(j["summary"]["phases"][phase]["median"].get<double>() > 0, phase);
  }
  // Per step: the whole model is reduced and broadcast once (tiny: well under one 10 MiB buffer).
  const int64_t param_bytes = 4 * j["parameters"].get<int64_t>();
  std::map<int, std::map<std::string, int64_t>> bytes;
  for (const auto& op : j["comm_ops"]) bytes[op["step"].get<int>()][op["name"].get<std::string>()] += op["bytes"].get<int64_t>();
  for (int step = 0; step < o.steps; ++step) {
    CAPTURE(step);
    CHECK(bytes[step]["reduce.grad0"] == param_bytes);
    CHECK(bytes[step]["broadcast.param0"] == param_bytes);
    CHECK(bytes[step].size() == 2);
  }
}

TEST_CASE("gradient accumulation: 2 micro-steps of 2 equal 1 micro-step of 4") {
  TempDir d;
  auto a = tiny("single", 1, 4, 4);
  a.final_params = d.path + "/a.pt";
  run(a);
  for (const char* s : {"single", "dps", "horovod"}) {
    auto b = tiny(s, std::string(s) == "single" ? 1 : 2, std::string(s) == "single" ? 2 : 1, 4);
    b.grad_accum = 2;
    b.final_params = d.path + "/b.pt";
    run(b);
    CHECK_MESSAGE(compare_params(load_named_params(b.final_params), load_named_params(a.final_params)).global < 1e-5, s);
  }
}

TEST_CASE("amp variants train: dps+amp (O2 bf16) and horovod+amp (O1 bf16, with and without double step)") {
  for (const char* s : {"dps+amp", "horovod+amp"}) {
    for (bool dbl : {false, true}) {
      if (dbl && std::string(s) == "dps+amp") continue;
      auto o = tiny(s, 2, 4, 25);
      o.double_step = dbl;
      const auto outs = run(o);
      const auto l = losses(outs[0]);
      const double first = l.front();
      const double last = (l[l.size() - 1] + l[l.size() - 2] + l[l.size() - 3]) / 3;
      MESSAGE(std::string(s) << std::string(dbl ? " (double step)" : "") << ": loss " << first << " -> " << last);
      CHECK(last < first - 0.5);
      CHECK(outs[0].report.param_checksum == doctest::Approx(outs[1].report.param_checksum).epsilon(1e-9));
    }
  }
}

TEST_CASE("O2 keeps fp32 master weights: parameters written are fp32 and differ from a pure-bf16 rounding") {
  TempDir d;
  auto o = tiny("dps+amp", 2, 2, 3);
  o.final_params = d.path + "/o2.pt";
  run(o);
  const auto p = load_named_params(o.final_params);
  const auto& w = p[4].second;  // h.0.attn.c_attn.weight
  CHECK(p[4].first == "h.0.attn.c_attn.weight");
  CHECK((w.scalar_type() == torch::kFloat));
  // Masters carry more precision than bf16 can hold.
  CHECK_FALSE(torch::equal(w, w.to(torch::kBFloat16).to(torch::kFloat)));
}

TEST_CASE("checkpoint/resume reproduces the losses and parameters of an uninterrupted run") {
  for (const char* s : {"single", "dps", "sps", "dps+amp", "sps-in-process"}) {
    TempDir d;
    const bool in_process = std::string(s) == "sps-in-process";
    const int np = std::string(s) == "single" || in_process ? 1 : 2;
    auto full = in_process ? tiny_replicas(2, 2, 8) : tiny(s, np, 2, 8);
    full.final_params = d.path + "/full.pt";
    const auto ref = losses(run(full)[0]);

    auto first = full;
    first.final_params.clear();
    first.checkpoint_dir = d.path + "/ckpt";
    first.checkpoint_every = 2;
    first.stop_after = 5;  // "interrupted" after step 4; the last checkpoint is after step 3
    const auto part1 = losses(run(first)[0]);
    CHECK(part1.size() == 5);
    CHECK(fs::exists(d.path + "/ckpt/checkpoint.pt"));

    auto second = first;
    second.stop_after = 0;
    second.resume = true;
    second.final_params = d.path + "/resumed.pt";
    const auto part2 = losses(run(second)[0]);
    REQUIRE(part2.size() == 3);  // steps 5..7: the checkpoint at the end of step 4 (stop_after) was written last
    for (size_t k = 0; k < part2.size(); ++k) CHECK_MESSAGE(part2[k] == ref[5 + k], s << " step " << 5 + k);
    const auto diff = compare_params(load_named_params(second.final_params), load_named_params(full.final_params));
    CHECK_MESSAGE(diff.global == 0.0, s);
  }
}

TEST_CASE("resume refuses a checkpoint of a different configuration") {
  TempDir d;
  auto a = tiny("single", 1, 2, 2);
  a.checkpoint_dir = d.path;
  run(a);
  auto b = tiny("single", 1, 3, 4);  // different micro-batch
  b.checkpoint_dir = d.path;
  b.resume = true;
  CHECK_THROWS_WITH(run(b), doctest::Contains("different run configuration"));
}

TEST_CASE("a non-finite loss stops the run with a clear error") {
  auto o = tiny("dps", 2, 2, 5);
  o.fault = "nan:2";
  CHECK_THROWS_WITH(run(o), doctest::Contains("non-finite loss"));
}

TEST_CASE("after a non-finite loss the last good checkpoint is intact and resumes exactly") {
  TempDir d;
  const auto ref = losses(run(tiny("dps", 2, 2, 5))[0]);
  auto bad = tiny("dps", 2, 2, 5);
  bad.checkpoint_dir = d.path + "/ckpt";
  bad.checkpoint_every = 1;
  bad.fault = "nan:2";
  CHECK_THROWS_WITH(run(bad), doctest::Contains("non-finite loss"));
  REQUIRE(fs::exists(d.path + "/ckpt/checkpoint.pt"));
  auto resumed = bad;
  resumed.fault.clear();
  resumed.resume = true;
  const auto rest = losses(run(resumed)[0]);
  REQUIRE(!rest.empty());
  REQUIRE(rest.size() <= ref.size());
  // The resumed run ends where the uninterrupted one ends, with the same losses.
  const size_t offset = ref.size() - rest.size();
  CHECK(offset == 2);  // resumes at the bad step: the checkpoint after step 1 is the last good one
  for (size_t k = 0; k < rest.size(); ++k) CHECK(rest[k] == ref[offset + k]);
}
