// bench/bench_collectives.cpp — network model benchmarks.
//
// 1. nccl-tests-style allreduce bus bandwidth (busbw = S/t x 2(n-1)/n) against
//    message size, 1 MB .. 4 GB, for 8-GPU dgx-a100, dgx-h100 and hgx-h200, with
//    the published nccl-tests figures (DESIGN.md §6) and the ratio to them.
// 2. The cost of pricing a ring allreduce on 1,024 and 4,096 GPUs (dgx-a100
//    fat-tree): topology build, first pricing (routes + max-min solve), a new
//    size (phase-pattern reuse) and a cached repeat; flows solved per second.
//
// Usage: bench_collectives [--quick]   (--quick: fewer sizes, 1,024 GPUs only)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "topology/cluster.hpp"

using namespace dptwin;
using namespace dptwin::sim;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CollectiveRequest allreduce(int n, Bytes b, Algorithm a = Algorithm::Ring, int channels = 1) {
  CollectiveRequest r;
  r.channels = channels;
  r.kind = CollectiveKind::AllReduce;
  r.algorithm = a;
  for (int i = 0; i < n; ++i) r.ranks.push_back(i);
  r.bytes = b;
  return r;
}

void bus_bandwidth_table(bool quick) {
  struct Row {
    const char* preset;
    double reference_gbs;  // nccl-tests ring allreduce busbw, 8 GPUs, large messages
  };
  const Row rows[] = {{"dgx-a100", 230}, {"dgx-h100", 370}, {"hgx-h200", 475}};
  // nccl-tests sizes: 1 MiB .. 4 GiB, x4 (x16 with --quick).
  std::vector<double> sizes;
  for (double s = mib(1).value(); s <= gib(4).value() * 1.001; s *= quick ? 16 : 4) sizes.push_back(s);
  std::printf("== allreduce bus bandwidth, 8 GPUs, ring (nccl-tests busbw = S/t x 2(n-1)/n) ==\n");
  std::printf("%-10s %12s %12s %12s %12s %10s %8s\n", "preset", "size", "time_us", "flow_GB/s", "analytic_GB/s",
              "ref_GB/s", "ratio");
  for (const Row& row : rows) {
    try {
      const topology::Topology topo = topology::build_topology(topology::load_cluster_preset(row.preset), 8);
      NetworkModel flow(topo, NetworkOptions{});
      NetworkOptions ao;
      ao.mode = NetworkMode::Analytic;
      NetworkModel analytic(topo, ao);
      for (double s : sizes) {
        const auto req = allreduce(8, bytes(s));
        const Time t = flow.cost(req).duration;
        const double bus = allreduce_bus_bandwidth(req.bytes, t, 8) / 1e9;
        const double bus_a = allreduce_bus_bandwidth(req.bytes, analytic.cost(req).duration, 8) / 1e9;
        std::printf("%-10s %12.0f %12.1f %12.1f %12.1f %10.0f %8.3f\n", row.preset, s, t.microseconds(), bus, bus_a,
                    row.reference_gbs, bus / row.reference_gbs);
      }
    } catch (const std::exception& e) {
      std::printf("%-10s unavailable: %s\n", row.preset, e.what());
    }
  }
}

void solve_timing(bool quick) {
  std::printf("\n== pricing a ring allreduce at scale (dgx-a100, fat-tree) ==\n");
  std::printf("%7s %10s %9s %12s %12s %12s %14s %10s\n", "gpus", "build_ms", "links", "first_ms", "newsize_ms",
              "cached_us", "flows/s(first)", "busbw_GB/s");
  std::vector<int> scales{1024};
  if (!quick) scales.push_back(4096);
  for (int n : scales) {
    try {
      double t0 = now_s();
      const topology::Topology topo = topology::build_topology(topology::load_cluster_preset("dgx-a100"), n);
      const double build = now_s() - t0;
      NetworkModel net(topo, NetworkOptions{});
      // First pricing: n routes looked up (computed by the topology) and one max-min solve of n flows.
      t0 = now_s();
      const auto req = allreduce(n, gib(1));
      const CollectiveCost& c = net.cost(req);
      const double first = now_s() - t0;
      // Another size on the same ranks: decomposition + phase-pattern reuse.
      t0 = now_s();
      net.cost(allreduce(n, mib(100)));
      const double newsize = now_s() - t0;
      // Cached: the key lookup only.
      t0 = now_s();
      constexpr int kRepeats = 100;
      for (int i = 0; i < kRepeats; ++i) net.cost(req);
      const double cached = (now_s() - t0) / kRepeats;
      // Re-solve the same phase directly (routes warm) to isolate the solver's rate.
      NetworkModel fresh(topo, NetworkOptions{});
      t0 = now_s();
      fresh.cost(req);
      const double warm = now_s() - t0;
      std::printf("%7d %10.1f %9d %12.2f %12.2f %12.2f %14.3g %10.1f\n", n, build * 1e3, topo.num_links(),
                  first * 1e3, newsize * 1e3, cached * 1e6, n / first,
                  allreduce_bus_bandwidth(req.bytes, c.duration, n) / 1e9);
      std::printf("        warm routes: pricing %.2f ms = %.3g flows/s\n", warm * 1e3, n / warm);
      t0 = now_s();
      const auto& h = net.cost(allreduce(n, gib(1), Algorithm::Hierarchical));
      std::printf("        hierarchical: %.2f ms, busbw %.1f GB/s\n", (now_s() - t0) * 1e3,
                  allreduce_bus_bandwidth(gib(1), h.duration, n) / 1e9);
      t0 = now_s();
      const auto& ch = net.cost(allreduce(n, gib(1), Algorithm::Ring, 8));
      const double ch_cold = now_s() - t0;
      NetworkModel fresh8(topo, NetworkOptions{});
      t0 = now_s();
      fresh8.cost(allreduce(n, gib(1), Algorithm::Ring, 8));
      const double ch_warm = now_s() - t0;
      std::printf("        ring x 8 channels (%d flows): %.2f ms (warm routes %.2f ms = %.3g flows/s), busbw %.1f GB/s\n",
                  8 * n, ch_cold * 1e3, ch_warm * 1e3, 8 * n / ch_warm,
                  allreduce_bus_bandwidth(gib(1), ch.duration, n) / 1e9);
    } catch (const std::exception& e) {
      std::printf("%7d unavailable: %s\n", n, e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bus_bandwidth_table(quick);
  solve_timing(quick);
  return 0;
}
