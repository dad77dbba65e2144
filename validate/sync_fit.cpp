#include "validate/sync_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace dptwin::validate {

std::vector<double> simulated_sync_cycles(const sim::DeviceProfile& p, const topology::Topology& topo,
                                          const std::vector<std::pair<sim::SyncSkeleton, double>>& probes,
                                          const sim::DeviceProfile::SyncCost& cost) {
  sim::DeviceProfile q = p;
  q.sync_by_ranks = {cost};
  std::vector<double> out;
  for (const auto& pr : probes) {
    DPTWIN_ASSERT(pr.first.ranks == cost.ranks, "skeletons of the cost's rank count");
    out.push_back(sim::simulate_sync_skeleton(q, topo, pr.first).seconds());
  }
  return out;
}

Time skeleton_optimizer(const sim::DeviceProfile& p) {
  // x += 1e-3 y over 2^19 floats: two reads and a write of 2 MiB, one kernel.
  constexpr double kBytes = 3.0 * 4 * 524288;
  const double rate = p.spec.memory_bandwidth.value() * p.memory.at(kBytes);
  return (rate > 0 ? Time::from_seconds(kBytes / rate) : Time::zero()) + p.launch_overhead;
}

SyncCycleFit fit_sync_to_cycles(const sim::DeviceProfile& p, const topology::Topology& topo,
                                const std::vector<std::pair<sim::SyncSkeleton, double>>& probes,
                                const sim::DeviceProfile::SyncCost& start) {
  DPTWIN_ASSERT(!probes.empty(), "a cycle fit needs a skeleton");
  auto cost_with = [&](double latency) {
    sim::DeviceProfile::SyncCost c = start;
    c.ranks = probes.front().first.ranks;
    c.latency = Time::from_seconds(latency);
    return c;
  };
  auto error = [&](double latency) {
    const auto sims = simulated_sync_cycles(p, topo, probes, cost_with(latency));
    double e = 0;
    for (size_t i = 0; i < probes.size(); ++i) e += std::pow(sims[i] / probes[i].second - 1.0, 2);
    return e;
  };
  // A grid over [0, 4x the start's latency] (at least 5 ms), refined five
  // times around its best point.
  double lo = 0, hi = std::max(0.005, 4 * start.latency.seconds()), best_latency = 0;
  double best = std::numeric_limits<double>::infinity();
  constexpr int kGrid = 32;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i <= kGrid; ++i) {
      const double latency = lo + (hi - lo) * i / kGrid, e = error(latency);
      if (e < best - 1e-15) best = e, best_latency = latency;
    }
    const double d = (hi - lo) / kGrid;
    lo = std::max(0.0, best_latency - 2 * d), hi = best_latency + 2 * d;
  }
  SyncCycleFit f;
  f.cost = cost_with(best_latency);
  f.simulated_s = simulated_sync_cycles(p, topo, probes, f.cost);
  f.rms_rel_error = std::sqrt(best / static_cast<double>(probes.size()));
  return f;
}

}  // namespace dptwin::validate
