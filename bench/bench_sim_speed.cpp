// bench_sim_speed — how fast the simulator is (DESIGN.md §7 speed targets).
//
// Prints: the paper scenario (six strategies x 1..64 GPUs) on one thread and on
// all cores; one gpt2-xl step with DDP (bf16 O2) on 1,024 and 4,096 A100s
// (128 and 512 DGX A100 nodes on a fat-tree), once with representative devices
// (exact when devices are identical) and once simulating every device; events,
// events per second and peak resident memory.
//
// usage: bench_sim_speed [--quick]   (--quick skips the 4,096-GPU runs)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "models/gpt2.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

using namespace dptwin;
using namespace dptwin::sim;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

PointSpec xl_point(int devices, StrategyKind kind, bool all) {
  PointSpec p;
  p.model = *models::find_gpt2_preset("gpt2-xl");
  p.cluster = topology::load_cluster_preset("dgx-a100");
  p.devices = devices;
  p.strategy = kind;
  p.micro_batch = 1;
  p.options.amp = AmpLevel::O2;
  p.options.half = DType::BF16;
  p.profile = default_profile(p.cluster.device);
  p.sim.all_devices = all;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Scenario paper = load_builtin_scenario("paper-hal");
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("dptwin simulator speed (cores: %u)\n\n", cores);

  for (int threads : {1, static_cast<int>(cores)}) {
    double t0 = now_s();
    auto rs = simulate_all(paper.points, threads);
    double dt = now_s() - t0;
    int64_t ev = 0;
    for (const auto& r : rs) ev += r.events;
    std::printf("paper scenario: %zu points on %d thread(s): %.3f s (target < 1 s), %lld events\n", rs.size(), threads,
                dt, static_cast<long long>(ev));
  }
  std::printf("\n%-8s %6s %-15s %10s %12s %10s %12s %10s\n", "strategy", "GPUs", "devices simulated", "step (ms)",
              "events", "wall (s)", "events/s", "target");
  for (int n : {1024, 4096}) {
    if (quick && n > 1024) continue;
    for (StrategyKind k : {StrategyKind::Dps, StrategyKind::Horovod}) {
      for (bool all : {false, true}) {
        double t0 = now_s();
        PointResult r = simulate_point(xl_point(n, k, all));
        double dt = now_s() - t0;
        std::printf("%-8s %6d %-15d %10.1f %12lld %10.3f %12.3g %10s\n", to_string(k).c_str(), n, r.simulated_devices,
                    r.step_time_s ? *r.step_time_s * 1e3 : 0.0, static_cast<long long>(r.events), dt,
                    static_cast<double>(r.events) / dt,
                    k == StrategyKind::Dps ? (n == 1024 ? "< 1 s" : "< 5 s") : "-");
      }
    }
  }
  std::printf("\npeak resident memory: %.0f MiB\n", peak_rss_mib());
  return 0;
}
