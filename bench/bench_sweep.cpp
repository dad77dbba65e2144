// bench_sweep — how fast `dptwin sweep` runs a 1,000-point grid, and how it scales with cores.
//
// The grid (built in code as a scenario, expanded by the scenario parser):
// the paper's GPT-2 on HAL, devices {2..32} x strategies {dps, horovod,
// dps+amp, horovod+amp} x micro-batch {1..16} x inter-node bandwidth
// {25..400 Gb/s} x inter-node latency {1, 5 us} = 5 x 4 x 5 x 5 x 2 = 1,000
// points. It runs the sweep (report::run_sweep, the code path of `dptwin
// sweep`) with 1 thread and with every core, checks both give the same
// results, and prints points/s and the speed-up.
//
// usage: bench_sweep [THREADS]   (default: all cores)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/yaml_reader.hpp"
#include "report/sweep.hpp"
#include "sim/output.hpp"
#include "sim/scenario.hpp"

using namespace dptwin;

namespace {

constexpr const char* kGrid = R"(name: bench-sweep
description: 1,000-point sweep for bench_sweep
model: paper
cluster: hal-v100
devices: [2, 4, 8, 16, 32]
strategy: [dps, horovod, dps+amp, horovod+amp]
micro_batch: [1, 2, 4, 8, 16]
inter_node_bandwidth: [25 Gb/s, 50 Gb/s, 100 Gb/s, 200 Gb/s, 400 Gb/s]
inter_node_latency: [1 us, 5 us]
)";

// Process CPU time (user + system, all threads), seconds.
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double timed_sweep(const sim::Scenario& sc, int threads, std::string& csv, double* cpu = nullptr) {
  report::SweepOptions o;
  o.threads = threads;
  const double c0 = cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = report::run_sweep(sc.points, report::MpiWorld{}, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cpu) *cpu = cpu_s() - c0;
  sim::OutputOptions out;
  out.wall_time = false;
  std::ostringstream text;
  sim::write_csv(text, results, out);
  csv = text.str();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = argc > 1 ? std::atoi(argv[1]) : cores;
  const sim::Scenario sc = sim::parse_scenario(load_yaml_string(kGrid, "bench_sweep grid"));
  const double n = static_cast<double>(sc.points.size());
  std::printf("bench_sweep: %zu points (paper GPT-2 on HAL: devices x strategies x micro-batch x link bandwidth "
              "x latency), %d hardware threads\n", sc.points.size(), cores);

  std::string csv1, csvn;
  timed_sweep(sc, threads, csvn);  // warm-up: presets, page cache
  double c1 = 0, cn = 0;
  const double t1 = timed_sweep(sc, 1, csv1, &c1);
  const double tn = timed_sweep(sc, threads, csvn, &cn);
  // CPU time / wall time shows how many cores the run really got (a busy machine gives fewer).
  std::printf("  1 thread   : %7.3f s  %8.0f points/s  (%.2f cores busy)\n", t1, n / t1, c1 / t1);
  std::printf("  %2d threads : %7.3f s  %8.0f points/s  (%.2f cores busy)\n", threads, tn, n / tn, cn / tn);
  std::printf("  speed-up   : %.2fx on %d threads (parallel efficiency %.0f%%)\n", t1 / tn, threads,
              100.0 * t1 / tn / threads);
  std::printf("  results identical across thread counts: %s\n", csv1 == csvn ? "yes" : "NO");
  return csv1 == csvn ? 0 : 1;
}
