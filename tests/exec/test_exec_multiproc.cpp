// tests/exec/test_exec_multiproc.cpp — real multi-process runs of dptwin-exec
// with the Gloo backend (built-in launcher) and the MPI backend (mpirun):
// data-parallel equivalence, every strategy on 1, 2 and 4 ranks, killed and
// stalled ranks, resume after a kill. Every launch has a timeout.
#include "torch_doctest.hpp"
#include "param_compare.hpp"
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "exec/comm.hpp"
#include "exec/process.hpp"
#include "temp_dir.hpp"
#include "worker_helpers.hpp"

using namespace dptwin::exec;
namespace fs = std::filesystem;
using dptwin::testing::TempDir;

namespace {

bool mpirun_available() { return mpi_available() && std::system("mpirun --version > /dev/null 2>&1") == 0; }

std::vector<std::string> backends() {
  std::vector<std::string> b;
  if (gloo_available()) b.push_back("gloo");
  if (mpirun_available()) b.push_back("mpi");
  return b;
}

struct Run {
  GroupOutcome outcome;
  double seconds = 0;
};

// dptwin-exec with `args` (it launches its own ranks), tiny model, bounded time.
// Defaults (tiny model, small corpus, 20 s comm timeout) unless `args` sets them:
// an option given twice is an input error, which would let a failure test pass.
Run exec(std::vector<std::string> args, double timeout_s = 120) {
  std::vector<std::string> argv{worker()};
  auto set = [&](const std::string& flag, const std::string& value) {
    if (std::find(args.begin(), args.end(), flag) == args.end()) argv.insert(argv.end(), {flag, value});
  };
  set("--model", "tiny");
  set("--synthetic-tokens", "32768");
  set("--comm-timeout-s", "20");
  set("--launch-timeout-s", std::to_string(static_cast<int>(timeout_s)));
  argv.insert(argv.end(), args.begin(), args.end());
  const auto t0 = std::chrono::steady_clock::now();
  Run r;
  r.outcome = run_process_group({ProcessSpec{argv, {}, "dptwin-exec", {}}}, timeout_s + 30);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

TEST_CASE("equivalence across processes: sps, dps, horovod on 2 ranks == single, for gloo and mpi") {
  TempDir d;
  const std::vector<std::string> common{"--steps", "5", "--lr", "3e-3", "--lr-warmup", "2", "--warmup-steps", "1"};
  auto args = common;
  for (const auto& a : {"--strategy", "single", "--micro-batch", "4", "--final-params"}) args.push_back(a);
  args.push_back(d.path + "/single.pt");
  REQUIRE(exec(args).outcome.ok);
  const auto expected = load_named_params(d.path + "/single.pt");
  for (const auto& backend : backends()) {
    for (const char* s : {"sps", "dps", "horovod"}) {
      auto a = common;
      const std::string out = d.path + "/" + backend + "_" + s;
      for (const auto& x : {std::string("--strategy"), std::string(s), std::string("--np"), std::string("2"),
                            std::string("--backend"), backend, std::string("--micro-batch"), std::string("2"),
                            std::string("--final-params"), out + ".pt", std::string("--out"), out + ".json"})
        a.push_back(x);
      const auto r = exec(a);
      REQUIRE_MESSAGE(r.outcome.ok, backend << " " << s << ": " << r.outcome.failure);
      const auto diff = compare_params(load_named_params(out + ".pt"), expected);
      MESSAGE(backend << " " << std::string(s) << ": relative parameter error vs single " << diff.global << " (worst tensor "
                      << diff.worst_name << " " << diff.worst << "; " << r.seconds << " s)");
      CHECK(diff.global < 1e-5);
      CHECK(diff.worst < 1e-4);
      const auto j = load_json(out + ".json");
      CHECK(j["summary"]["replicas_identical"] == true);
      CHECK(j["world"] == 2);
      if (std::string(s) == "dps") {
        // Buckets rebuilt once per rank from rank 0's order: both ranks allreduce the same buckets.
        std::vector<std::vector<std::string>> buckets(2);
        int order_ops = 0;
        for (const auto& op : j["comm_ops"]) {
          const auto name = op["name"].get<std::string>();
          order_ops += name == "broadcast.bucket_order";
          if (name.rfind("allreduce.bucket", 0) == 0)
            buckets[op["rank"].get<size_t>()].push_back(std::to_string(op["step"].get<int>()) + " " + name + " " +
                                                        std::to_string(op["bytes"].get<int64_t>()));
        }
        CHECK(order_ops == 2);
        CHECK(!buckets[0].empty());
        CHECK(buckets[0] == buckets[1]);
        // Both ranks share this kernel's steady clock, so their times are exact
        // across ranks: no rank finishes an allreduce before the other entered it.
        CHECK(j["clock"] == "shared");
        std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> spans;  // step+name -> [start, end] per rank
        for (const auto& op : j["comm_ops"]) {
          const auto name = op["name"].get<std::string>();
          if (name.rfind("allreduce.bucket", 0) != 0 || op["step"].get<int>() < 0) continue;
          spans[std::to_string(op["step"].get<int>()) + name].emplace_back(
              std::llround(op["start_s"].get<double>() * 1e9), std::llround(op["end_s"].get<double>() * 1e9));
        }
        int crossed = 0;
        for (const auto& [key, v] : spans)
          if (v.size() == 2 && (v[0].second < v[1].first || v[1].second < v[0].first)) ++crossed;
        CHECK(!spans.empty());
        CHECK(crossed == 0);
      }
    }
  }
}

TEST_CASE("sps in one process: dptwin-exec --devices-per-process 2 == single, with its comm ops") {
  TempDir d;
  const std::vector<std::string> common{"--steps", "5", "--lr", "3e-3", "--lr-warmup", "2", "--warmup-steps", "1",
                                        "--micro-batch", "4"};
  auto args = common;
  args.insert(args.end(), {"--strategy", "single", "--final-params", d.path + "/single.pt"});
  REQUIRE(exec(args).outcome.ok);
  auto a = common;
  a.insert(a.end(), {"--strategy", "sps", "--devices-per-process", "2", "--final-params", d.path + "/dp.pt", "--out",
                     d.path + "/dp.json"});
  const auto r = exec(a);
  REQUIRE_MESSAGE(r.outcome.ok, r.outcome.failure);
  const auto diff = compare_params(load_named_params(d.path + "/dp.pt"), load_named_params(d.path + "/single.pt"));
  MESSAGE("sps in one process (2 CPU replicas): relative parameter error vs single " << diff.global << "; " << r.seconds
                                                                                       << " s");
  CHECK(diff.global < 1e-5);
  const auto j = load_json(d.path + "/dp.json");
  CHECK(j["world"] == 1);
  int reduces = 0, broadcasts = 0;
  for (const auto& op : j["comm_ops"]) {
    reduces += op["name"] == "reduce.grad0";
    broadcasts += op["name"] == "broadcast.param0";
  }
  CHECK(reduces == 5);
  CHECK(broadcasts == 5);
}

TEST_CASE("horovod with dptwin's ring over send/recv on 3 ranks == single, gloo and mpi") {
  TempDir d;
  const std::vector<std::string> common{"--steps", "3", "--lr", "3e-3", "--lr-warmup", "2", "--warmup-steps", "1"};
  auto args = common;
  args.insert(args.end(), {"--strategy", "single", "--micro-batch", "6", "--final-params", d.path + "/single.pt"});
  REQUIRE(exec(args).outcome.ok);
  for (const auto& backend : backends()) {
    auto a = common;
    a.insert(a.end(), {"--strategy", "horovod", "--hvd-ring", "--np", "3", "--backend", backend, "--micro-batch", "2",
                       "--final-params", d.path + "/ring.pt"});
    const auto r = exec(a);
    REQUIRE_MESSAGE(r.outcome.ok, backend << ": " << r.outcome.failure);
    CHECK(compare_params(load_named_params(d.path + "/ring.pt"), load_named_params(d.path + "/single.pt")).global <
          1e-5);
  }
}

TEST_CASE("every strategy runs on 1, 2 and 4 ranks with gloo and mpi") {
  TempDir d;
  for (const auto& backend : backends()) {
    for (const char* s : {"single", "sps", "dps", "horovod", "dps+amp", "horovod+amp"}) {
      for (int np : {1, 2, 4}) {
        if (std::string(s) == "single" && np > 1) continue;
        const std::string out = d.path + "/r.json", trace = d.path + "/t.json";
        const auto r = exec({"--strategy", s, "--np", std::to_string(np), "--backend", backend, "--steps", "4",
                             "--warmup-steps", "1", "--out", out, "--trace", trace});
        REQUIRE_MESSAGE(r.outcome.ok, backend << " " << s << " np=" << np << ": " << r.outcome.failure);
        MESSAGE(backend << " " << std::string(s) << " np=" << np << ": " << r.seconds << " s");
        CHECK(r.seconds < 60);
        const auto j = load_json(out);
        CHECK(j["world"] == np);
        CHECK(j["steps"].size() == 4);
        CHECK(j["summary"]["tokens_per_s"].get<double>() > 0);
        CHECK(j["ranks"].size() == static_cast<size_t>(np));
        const auto t = load_json(trace);
        CHECK(t["traceEvents"].size() > 10);
        fs::remove(out);
        fs::remove(trace);
      }
    }
  }
}

TEST_CASE("a rank killed mid-step takes the job down within 30 s, naming the rank") {
  for (const auto& backend : backends()) {
    const auto r = exec({"--strategy", "dps", "--np", "3", "--backend", backend, "--steps", "50", "--fault", "kill:1:3"});
    CHECK_FALSE(r.outcome.ok);
    CHECK(r.outcome.results[0].exit_code != 2);  // a runtime failure, not rejected input
    CHECK(r.seconds < 30);
    MESSAGE(backend << ": killed rank detected in " << r.seconds << " s");
  }
}

TEST_CASE("a stalled rank makes its peers time out instead of hanging") {
  for (const auto& backend : backends()) {
    for (const char* strategy : {"dps", "horovod"}) {
      const auto r = exec({"--strategy", strategy, "--np", "2", "--backend", backend, "--steps", "50",
                           "--comm-timeout-s", "3", "--fault", "stall:1:2"},
                          60);
      CHECK_FALSE(r.outcome.ok);
      CHECK(r.outcome.results[0].exit_code != 2);  // a runtime failure, not rejected input
      CHECK(r.seconds >= 3);                       // it waited for the timeout ...
      CHECK(r.seconds < 30);                       // ... and no longer
      MESSAGE(backend << " " << std::string(strategy) << ": stalled rank detected in " << r.seconds << " s (timeout 3 s)");
    }
  }
}

TEST_CASE("killed inside a checkpoint write: the previous checkpoint survives and resumes") {
  if (!gloo_available()) return;
  TempDir d;
  const std::vector<std::string> base{"--strategy", "dps", "--np", "2", "--backend", "gloo", "--steps", "6"};
  auto full = base;
  full.insert(full.end(), {"--out", d.path + "/full.json"});
  REQUIRE(exec(full).outcome.ok);
  auto killed = base;
  // Checkpoints after steps 1 and 3; rank 0 dies inside the second write (after step 3).
  killed.insert(killed.end(), {"--checkpoint-dir", d.path + "/ckpt", "--checkpoint-every", "2", "--fault", "ckptkill:3"});
  CHECK_FALSE(exec(killed).outcome.ok);
  auto resumed = base;
  resumed.insert(resumed.end(), {"--checkpoint-dir", d.path + "/ckpt", "--resume", "--out", d.path + "/resumed.json"});
  REQUIRE(exec(resumed).outcome.ok);
  const auto a = load_json(d.path + "/full.json")["steps"];
  const auto b = load_json(d.path + "/resumed.json")["steps"];
  REQUIRE(b.size() == 4);  // resumed from the checkpoint of step 1: steps 2..5
  for (size_t k = 0; k < b.size(); ++k) CHECK(b[k]["loss"].get<double>() == a[2 + k]["loss"].get<double>());
}

TEST_CASE("resume after a killed run reproduces the uninterrupted losses (gloo, dps)") {
  if (!gloo_available()) return;
  TempDir d;
  const std::vector<std::string> base{"--strategy", "dps", "--np", "2", "--backend", "gloo", "--steps", "8"};
  auto full = base;
  full.insert(full.end(), {"--out", d.path + "/full.json"});
  REQUIRE(exec(full).outcome.ok);
  auto killed = base;
  killed.insert(killed.end(), {"--checkpoint-dir", d.path + "/ckpt", "--checkpoint-every", "3", "--fault", "kill:0:5"});
  CHECK_FALSE(exec(killed).outcome.ok);
  REQUIRE(fs::exists(d.path + "/ckpt/checkpoint.pt"));
  auto resumed = base;
  resumed.insert(resumed.end(), {"--checkpoint-dir", d.path + "/ckpt", "--resume", "--out", d.path + "/resumed.json"});
  REQUIRE(exec(resumed).outcome.ok);
  const auto a = load_json(d.path + "/full.json")["steps"];
  const auto b = load_json(d.path + "/resumed.json")["steps"];
  // Checkpoints after steps 2 and 5; the kill hits step 5 before its checkpoint:
  // the run resumes from the end of step 2 and replays steps 3..7.
  REQUIRE(b.size() == 5);
  for (size_t k = 0; k < b.size(); ++k) CHECK(b[k]["loss"].get<double>() == a[3 + k]["loss"].get<double>());
}
