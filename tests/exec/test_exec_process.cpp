// tests/exec/test_exec_process.cpp — process supervision, result statistics and JSON.
#include <doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/process.hpp"
#include "exec/result.hpp"

using namespace dptwin::exec;

namespace {

ProcessSpec sh(const std::string& script, const std::string& label) { return {{"/bin/sh", "-c", script}, {}, label, {}}; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("process group: all succeed, environment is passed") {
  ProcessSpec s = sh("test \"$RANK\" = 7", "rank 7");
  s.env = {{"RANK", "7"}};
  const auto out = run_process_group({s, sh("exit 0", "rank 1")}, 10);
  CHECK(out.ok);
  CHECK(out.failure.empty());
}

TEST_CASE("process group: a dead rank brings the others down quickly with its name") {
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = run_process_group({sh("sleep 30", "rank 0"), sh("sleep 0.2; kill -9 $$", "rank 1"),
                                      sh("sleep 30", "rank 2")},
                                     60, /*grace_s=*/1);
  CHECK(seconds_since(t0) < 5);
  CHECK_FALSE(out.ok);
  CHECK(out.failure.find("rank 1") != std::string::npos);
  CHECK(out.failure.find("signal 9") != std::string::npos);
  CHECK(out.results[0].killed_by_us);
  CHECK(out.results[2].killed_by_us);
}

TEST_CASE("process group: non-zero exit and a process that ignores SIGTERM") {
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = run_process_group({sh("trap '' TERM; sleep 30", "stubborn"), sh("sleep 0.3; exit 3", "rank 1")}, 60, 0.5);
  CHECK(seconds_since(t0) < 5);
  CHECK(out.failure == "rank 1 (pid " + std::to_string(out.results[1].pid) + ") exited with code 3");
  CHECK(out.results[0].signal == SIGKILL);
}

TEST_CASE("process group: timeout") {
  const auto out = run_process_group({sh("sleep 30", "rank 0")}, 0.3, 0.5);
  CHECK(out.timed_out);
  CHECK_FALSE(out.ok);
  CHECK(out.failure.find("did not finish") != std::string::npos);
}


// The launcher shares the cores with the ranks it times: it must sleep until a
// child exits, not wake every few milliseconds to poll (200 wake-ups a second).
TEST_CASE("process group: the launcher sleeps while its processes run, and still reacts at once") {
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = run_process_group({sh("sleep 1", "rank 0"), sh("sleep 1", "rank 1")}, 30);
  const double wall = seconds_since(t0);
  ::getrusage(RUSAGE_SELF, &after);
  CHECK(out.ok);
  CHECK(wall < 1.5);  // woken by the exits, not by a timeout
  // fork/exec and two reaps switch a handful of times; polling every 5 ms switched ~200.
  CHECK(after.ru_nvcsw - before.ru_nvcsw < 40);
}
TEST_CASE("stats: median, quantiles, stdev") {
  const Stats s = compute_stats({4, 1, 3, 2, 5});
  CHECK(s.n == 5);
  CHECK(s.median == 3);
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(s.mean == 3);
  CHECK(s.p10 == doctest::Approx(1.4));  // linear interpolation: 1 + 0.4·(2 - 1)
  CHECK(s.p90 == doctest::Approx(4.6));
  CHECK(s.stdev == doctest::Approx(std::sqrt(2.5)));  // sample stdev of 1..5
  CHECK(compute_stats({}).n == 0);
}

TEST_CASE("result: warm-up excluded, slowest rank sets the step time, trace per rank and stream") {
  auto rank = [](int r, double slow) {
    RankReport rep;
    rep.rank = r;
    rep.peak_rss_bytes = 100 + r;
    rep.device_peak_bytes = r == 0 ? 7000 : 5000;
    rep.param_checksum = 42;
    int64_t t0 = 0;  // a rank's steps follow each other, as in the trainer
    for (int s = 0; s < 4; ++s) {
      rep.steps.push_back({s, 5.0 - s + r, 1e-3, 1.0, false});
      const int64_t len = static_cast<int64_t>((s == 0 ? 9.0 : 1.0 + slow) * 1e8);
      rep.spans.push_back({"step", "compute", s, -1, t0, t0 + len, 0});
      rep.spans.push_back({"forward", "compute", s, -1, t0, t0 + len / 2, 0});
      rep.spans.push_back({"allreduce.bucket0", "comm", s, t0, t0 + 10, t0 + 1000010, 4096});
      t0 += len;
    }
    return rep;
  };
  RunInfo info;
  info.world = 2;
  info.warmup_steps = 1;
  info.tokens_per_step = 1000;
  const auto j = make_result(info, {rank(0, 0.0), rank(1, 0.5)});
  CHECK(j["schema"] == "dptwin.exec.result/1");
  const auto& s = j["summary"];
  CHECK(s["measured_steps"] == 3);
  CHECK(s["step_time_s"]["median"].get<double>() == doctest::Approx(0.15));  // rank 1: (1 + 0.5)·0.1 s
  CHECK(s["tokens_per_s"].get<double>() == doctest::Approx(1000 / 0.15));
  CHECK(s["peak_rss_bytes"] == 101);
  CHECK(s["device_peak_bytes"] == 7000);  // max over ranks, like the RSS
  CHECK(s["replicas_identical"] == true);
  CHECK(j["steps"][2]["loss"].get<double>() == doctest::Approx(3.5));  // mean of ranks: (3 + 4) / 2
  CHECK(j["steps"][0]["measured"] == false);
  CHECK(j["steps"][1]["ranks"][0]["comm_bytes"] == 4096);
  CHECK(j["comm_ops"].size() == 8);
  CHECK_FALSE(j.contains("comm_state"));  // no probe readings: no entry
  info.comm_state_s = {3e-4, 1e-4};
  info.comm_state_bytes = 4096;
  const auto probed = make_result(info, {rank(0, 0.0), rank(1, 0.5)});
  REQUIRE(probed.contains("comm_state"));
  CHECK(probed["comm_state"]["bytes"] == 4096);
  CHECK(probed["comm_state"]["readings_s"].size() == 2);
  CHECK(probed["comm_state"]["seconds"].get<double>() == doctest::Approx(2e-4));
  const auto t = make_chrome_trace({rank(0, 0), rank(1, 0)});
  int comm = 0, compute = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    (e["tid"] == 1 ? comm : compute) += 1;
    CHECK((e["pid"] == 0 || e["pid"] == 1));
  }
  CHECK(comm == 8);
  CHECK(compute == 8);  // forward spans; "step" spans are not drawn
  // Reports survive the JSON trip between ranks.
  const auto back = rank_report_from_json(to_json(rank(1, 0.5)));
  CHECK(back.spans.size() == 12);
  CHECK(back.steps[3].loss == doctest::Approx(3.0));
  CHECK(back.device_peak_bytes == 5000);
}

TEST_CASE("result: a step's time is the period of the last rank's ends, not the longest span") {
  // Two ranks that stagger, as ranks time-sharing cores do: each alternates a
  // long step (it waited for a core) and a short one, out of phase, so every
  // step has a 0.14 s span while the job completes a step every 0.10 s.
  auto rank = [](int r) {
    RankReport rep;
    rep.rank = r;
    int64_t t0 = 0;
    for (int s = 0; s < 5; ++s) {
      rep.steps.push_back({s, 1.0, 1e-3, 1.0, false});
      const double len = s == 0 ? 0.9 : ((s + r) % 2 == 1 ? 0.14 : 0.06);
      const int64_t end = t0 + static_cast<int64_t>(len * 1e9);
      rep.spans.push_back({"step", "compute", s, -1, t0, end, 0});
      t0 = end;
    }
    return rep;
  };
  RunInfo info;
  info.world = 2;
  info.warmup_steps = 1;
  info.tokens_per_step = 1000;
  const auto j = make_result(info, {rank(0), rank(1)});
  const auto& s = j["summary"];
  CHECK(s["step_time_s"]["mean"].get<double>() == doctest::Approx(0.10));  // ends 0.9, 1.04, 1.10, 1.24, 1.30
  CHECK(s["step_time_s"]["median"].get<double>() == doctest::Approx(0.10));
  CHECK(s["step_span_s"]["median"].get<double>() == doctest::Approx(0.14));
  CHECK(s["tokens_per_s"].get<double>() == doctest::Approx(1000 / 0.10));
  CHECK(j["steps"][0]["step_time_s"].get<double>() == doctest::Approx(0.9));  // no predecessor: its span
  CHECK(j["steps"][1]["step_time_s"].get<double>() == doctest::Approx(0.14));
  CHECK(j["steps"][2]["step_time_s"].get<double>() == doctest::Approx(0.06));
  CHECK(j["steps"][2]["step_span_s"].get<double>() == doctest::Approx(0.14));
}

TEST_CASE("binding: ranks to cores by policy") {
  using V = std::vector<int>;
  // auto: one core per rank while ranks x threads fit the cores, unbound beyond (as mpirun).
  CHECK(bind_cpus("auto", 0, 2, 1, 2) == V{0});
  CHECK(bind_cpus("auto", 1, 2, 1, 2) == V{1});
  CHECK(bind_cpus("auto", 3, 4, 1, 2).empty());
  CHECK(bind_cpus("auto", 1, 2, 2, 4) == V{2, 3});
  CHECK(bind_cpus("auto", 0, 1, 4, 2).empty());
  // core: always bound; more ranks than cores take the cores in turn.
  CHECK(bind_cpus("core", 3, 4, 1, 2) == V{1});
  CHECK(bind_cpus("core", 2, 4, 1, 2) == V{0});
  CHECK(bind_cpus("core", 0, 1, 4, 2) == V{0, 1});
  CHECK(bind_cpus("none", 0, 1, 1, 2).empty());
  CHECK_THROWS_AS(bind_cpus("socket", 0, 1, 1, 2), std::invalid_argument);
}

TEST_CASE("binding: a spawned process and its threads run on the CPUs of its spec") {
  char tmpl[] = "/tmp/dptwin-bind-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  ProcessSpec bound = sh("grep Cpus_allowed_list /proc/self/status > " + dir + "/bound", "bound");
  bound.cpus = {0};
  const ProcessSpec free = sh("grep Cpus_allowed_list /proc/self/status > " + dir + "/free", "free");
  REQUIRE(run_process_group({bound, free}, 10).ok);
  auto read = [&](const std::string& name) {
    std::ifstream f(dir + "/" + name);
    std::string line;
    std::getline(f, line);
    return line.substr(line.find(':') + 1);
  };
  const std::string b = read("bound"), f = read("free");
  CHECK(b.find_first_not_of(" \t") != std::string::npos);
  // Index 0 of the CPUs this process may use (CPU 0 unless a container limits them).
  const std::vector<int> usable = usable_cpus();
  REQUIRE_FALSE(usable.empty());
  CHECK(b.substr(b.find_first_not_of(" \t")) == std::to_string(usable[0]));
  if (usable.size() > 1) CHECK(f.substr(f.find_first_not_of(" \t")) != std::to_string(usable[0]));
  std::filesystem::remove_all(dir);
}
