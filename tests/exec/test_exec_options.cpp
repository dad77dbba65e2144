// tests/exec/test_exec_options.cpp — the declarative option table and its parser.
#include <doctest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/launcher.hpp"
#include "exec/options.hpp"

using namespace dptwin;
using namespace dptwin::exec;

namespace {

ExecOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dptwin-exec");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_exec_options(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("option table: unique long flags, help text, every field reachable") {
  std::set<std::string> flags;
  for (const auto& row : exec_option_table()) {
    const std::string f = row.flag;
    CHECK_MESSAGE(f.rfind("--", 0) == 0, f);
    CHECK_MESSAGE(flags.insert(f).second, "duplicate flag " << f);
    CHECK_MESSAGE(std::string(row.help).size() > 5, f);
    for (char c : f.substr(2)) CHECK_MESSAGE((std::islower(c) || std::isdigit(c) || c == '-'), f);
  }
  CHECK(flags.size() == exec_option_table().size());
  // Every table row parses a value back into its field: to_args(defaults changed) round-trips.
  ExecOptions o;
  o.strategy = "horovod+amp";
  o.np = 4;
  o.backend = "mpi";
  o.micro_batch = 3;
  o.lr = 1.25e-3;
  o.broadcast_buffers = false;
  o.rebuild_buckets = false;
  o.double_step = true;
  o.synthetic_tokens = 4096;
  o.gloo_loop_nice = 0;
  o.out = "r.json";
  std::vector<std::string> args = to_args(o);
  const ExecOptions back = parse(args);
  CHECK(back.strategy == "horovod+amp");
  CHECK(back.np == 4);
  CHECK(back.backend == "mpi");
  CHECK(back.micro_batch == 3);
  CHECK(back.lr == doctest::Approx(1.25e-3).scale(0));
  CHECK_FALSE(back.broadcast_buffers);
  CHECK_FALSE(back.rebuild_buckets);
  CHECK(back.double_step);
  CHECK(back.synthetic_tokens == 4096);
  CHECK(back.gloo_loop_nice == 0);
  CHECK(ExecOptions{}.gloo_loop_nice == kGlooLoopNiceAuto);
  CHECK(back.out == "r.json");
  CHECK(to_args(back) == args);
}

TEST_CASE("defaults and strategy-derived amp") {
  const auto d = parse({});
  CHECK(d.strategy == "dps");
  CHECK(d.bucket_cap_mb == 25.0);
  CHECK(d.first_bucket_mb == 1.0);
  CHECK(d.fusion_threshold_mb == 128.0);
  CHECK(d.cycle_time_ms == 1.0);
  CHECK(d.rebuild_buckets);
  CHECK_FALSE(parse({"--rebuild-buckets=false"}).rebuild_buckets);
  CHECK(d.devices_per_process == 1);
  CHECK(parse({"--strategy", "sps", "--devices-per-process", "4", "--micro-batch", "4"}).devices_per_process == 4);
  CHECK(resolved_amp(d) == "none");
  CHECK(resolved_amp(parse({"--strategy", "dps+amp"})) == "o2");
  CHECK(resolved_amp(parse({"--strategy", "horovod+amp"})) == "o1");
  CHECK(resolved_amp(parse({"--strategy", "horovod+amp", "--amp", "o2"})) == "o2");
  CHECK(resolved_amp(parse({"--precision", "bf16"})) == "o1");
  CHECK(resolved_half_dtype(parse({"--strategy", "dps+amp"})) == "bf16");
  CHECK(strategy_kind(parse({"--strategy", "dps+amp"})) == StrategyKind::Dps);
  CHECK(strategy_kind(parse({"--strategy", "horovod+amp"})) == StrategyKind::Horovod);
  CHECK(comm_backend(parse({"--backend", "mpi"})) == CommBackend::Mpi);
}

TEST_CASE("bad input names the flag") {
  CHECK(error_of({"--strategy", "zero"}).find("--strategy") != std::string::npos);
  CHECK(error_of({"--np", "0"}).find("--np") != std::string::npos);
  CHECK(error_of({"--strategy", "single", "--np", "2"}).find("--np") != std::string::npos);
  CHECK(error_of({"--model", "gpt5"}).find("unknown GPT-2 preset 'gpt5'") != std::string::npos);
  CHECK(error_of({"--model", "tiny", "--seq-len", "4096"}).find("--seq-len") != std::string::npos);
  CHECK(error_of({"--steps", "3", "--warmup-steps", "3"}).find("--warmup-steps") != std::string::npos);
  CHECK(error_of({"--precision", "fp16", "--amp", "o1"}).find("needs CUDA") != std::string::npos);
  CHECK(error_of({"--precision", "fp16", "--amp", "o2", "--device", "cpu", "--strategy", "single"}).find("needs CUDA") !=
        std::string::npos);
  CHECK(error_of({"--backend", "nccl", "--device", "cpu"}).find("--device") != std::string::npos);
  CHECK(error_of({"--device", "tpu"}).find("--device") != std::string::npos);
  CHECK(error_of({"--double-step"}).find("--double-step") != std::string::npos);
  CHECK(error_of({"--resume"}).find("--checkpoint-dir") != std::string::npos);
  CHECK(error_of({"--no-such-flag"}).find("no-such-flag") != std::string::npos);
  CHECK(error_of({"--fault", "explode"}).find("--fault") != std::string::npos);
  CHECK(error_of({"--fault", "kill:1"}).find("--fault") != std::string::npos);
  CHECK(error_of({"--fault", "nan:x"}).find("--fault") != std::string::npos);
  CHECK(error_of({"--fault", "kill:1:2"}).empty());
  CHECK(error_of({"--fault", "ckptkill:3"}).empty());
  CHECK(error_of({"--hvd-ring"}).find("--hvd-ring") != std::string::npos);
  CHECK(error_of({"--devices-per-process", "2", "--micro-batch", "2"}).find("only strategy 'sps'") != std::string::npos);
  CHECK(error_of({"--strategy", "sps", "--np", "2", "--devices-per-process", "2"}).find("--np 1") != std::string::npos);
  CHECK(error_of({"--strategy", "sps", "--devices-per-process", "3", "--micro-batch", "2"}).find("at least 3") !=
        std::string::npos);
  CHECK(error_of({"--strategy", "sps", "--devices-per-process", "0"}).find("--devices-per-process") != std::string::npos);
  CHECK(error_of({"--micro-batch", "x"}).find("--micro-batch") != std::string::npos);
  CHECK(error_of({"--gloo-loop-nice", "20"}).find("--gloo-loop-nice") != std::string::npos);
  CHECK(error_of({"--gloo-loop-nice", "-2"}).find("must be -1 (auto) or in [0, 19]") != std::string::npos);
}

TEST_CASE("launch plan: gloo forks ranks with env, mpi goes through mpirun") {
  ExecOptions o = parse({"--np", "3", "--threads", "2", "--backend", "gloo"});
  auto specs = plan_launch(o, {"--np", "3"}, "/bin/worker", "/tmp/x");
  REQUIRE(specs.size() == 3);
  auto env_of = [](const ProcessSpec& s, const std::string& k) {
    for (const auto& [key, v] : s.env)
      if (key == k) return v;
    return std::string();
  };
  for (int r = 0; r < 3; ++r) {
    CHECK(specs[r].argv[0] == "/bin/worker");
    CHECK(env_of(specs[r], "RANK") == std::to_string(r));
    CHECK(env_of(specs[r], "WORLD_SIZE") == "3");
    CHECK(env_of(specs[r], "OMP_NUM_THREADS") == "2");
    CHECK(env_of(specs[r], "OPENBLAS_NUM_THREADS") == "2");
    CHECK(env_of(specs[r], "DPTWIN_STORE") == "file:/tmp/x/store");
    CHECK(env_of(specs[r], "LOCAL_WORLD_SIZE") == "3");  // the ranks sharing this host (Gloo's loop niceness)
  }
  // auto by default, as mpirun: bound while the ranks fit (3 x 2 threads: only on a machine of 6 cores or more).
  CHECK(specs[1].cpus == (3 * 2 <= usable_cores() ? std::vector<int>{2, 3} : std::vector<int>{}));
  o = parse({"--np", "3", "--threads", "2", "--bind", "auto"});
  CHECK(plan_launch(o, {}, "/bin/worker", "/tmp/x")[1].cpus == specs[1].cpus);
  o = parse({"--np", "3", "--threads", "2", "--bind", "core"});
  specs = plan_launch(o, {}, "/bin/worker", "/tmp/x");
  CHECK(specs[2].cpus == std::vector<int>{4 % usable_cores(), 5 % usable_cores()});
  o = parse({"--np", "1", "--bind", "none"});
  CHECK(plan_launch(o, {}, "/bin/worker", "/tmp/x")[0].cpus.empty());
  CHECK(error_of({"--bind", "socket"}).find("--bind") != std::string::npos);
  o = parse({"--np", "64", "--backend", "mpi"});
  specs = plan_launch(o, {"--np", "64"}, "/bin/worker", "/tmp/x");
  REQUIRE(specs.size() == 1);
  const auto& a = specs[0].argv;
  CHECK(a[0] == "mpirun");
  CHECK(a[2] == "64");
  CHECK(std::find(a.begin(), a.end(), "--oversubscribe") != a.end());  // 64 > cores here
  CHECK(*(std::find(a.begin(), a.end(), "--bind-to") + 1) == "none");   // oversubscribed: unbound
  CHECK(std::find(a.begin(), a.end(), "/bin/worker") != a.end());
  o = parse({"--np", "4", "--backend", "fake"});
  CHECK(plan_launch(o, {}, "/bin/worker", "/tmp/x").size() == 1);  // ranks are threads
}

TEST_CASE("device placement: --device, and auto by backend, strategy and in-process replicas") {
  CHECK(device_placement(parse({})) == "cpu");  // dps over gloo
  CHECK(device_placement(parse({"--strategy", "single"})) == "cuda_if_visible");
  CHECK(device_placement(parse({"--strategy", "sps", "--devices-per-process", "2", "--micro-batch", "4"})) ==
        "cuda_if_visible");
  CHECK(device_placement(parse({"--backend", "nccl", "--np", "2"})) == "cuda");
  CHECK(device_placement(parse({"--strategy", "single", "--device", "cpu"})) == "cpu");
  CHECK(device_placement(parse({"--device", "cuda"})) == "cuda");
  // fp16 is refused exactly where the placement is the CPU.
  CHECK_NOTHROW(parse({"--strategy", "single", "--precision", "fp16", "--amp", "o1"}));
  CHECK_NOTHROW(parse({"--device", "cuda", "--precision", "fp16", "--amp", "o1"}));
}

TEST_CASE("Gloo's loop niceness: a setting is kept, auto is 19 while the host's ranks fit its cores, 10 beyond") {
  CHECK(resolve_gloo_loop_nice(0, 4, 1, 2) == 0);
  CHECK(resolve_gloo_loop_nice(7, 1, 1, 2) == 7);
  CHECK(resolve_gloo_loop_nice(kGlooLoopNiceAuto, 2, 1, 2) == 19);
  CHECK(resolve_gloo_loop_nice(kGlooLoopNiceAuto, 1, 1, 1) == 19);
  CHECK(resolve_gloo_loop_nice(kGlooLoopNiceAuto, 4, 1, 2) == 10);    // 4 ranks on 2 cores
  CHECK(resolve_gloo_loop_nice(kGlooLoopNiceAuto, 2, 2, 2) == 10);    // 2 ranks x 2 threads on 2 cores
  CHECK(resolve_gloo_loop_nice(kGlooLoopNiceAuto, 8, 2, 16) == 19);
}
