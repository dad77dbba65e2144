// sim/simulate.hpp — run one scenario point or a whole scenario.
//
// simulate_point() builds the cluster and the workload, prices the strategy's
// step with the discrete-event engine and returns every output of
// sim/results.hpp. It owns all its state (a Simulation per call), so points
// can run concurrently from several threads.
#pragma once

#include <functional>
#include <vector>

#include "sim/results.hpp"
#include "sim/scenario.hpp"

namespace dptwin::sim {

PointResult simulate_point(const PointSpec& point);

// Runs every point with `threads` workers (0 = all cores); results in point order.
// `progress` (optional) is called after each point with (done, total).
std::vector<PointResult> simulate_all(const std::vector<PointSpec>& points, int threads = 0,
                                      const std::function<void(size_t, size_t)>& progress = {});

}  // namespace dptwin::sim
