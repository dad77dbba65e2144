// sim/flow_solver.hpp — max-min fair sharing of links by concurrent flows.
//
// Pure functions, no events: given flows (each a route over directed links and
// a byte count) and link capacities, compute the max-min fair rates
// (progressive filling: raise every unfrozen flow's rate equally until a link
// saturates, freeze the flows crossing it, repeat), and the completion time of
// a phase in which all flows start together (when a flow finishes, the others
// are re-rated; the phase ends with its slowest flow).
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/units.hpp"

namespace dptwin::sim {

struct RoutedFlow {
  const std::vector<int>* route = nullptr;  // directed link ids; empty = local copy
  double bytes = 0;                          // bytes to move
};

// Max-min fair rates in bytes/s. `capacity[l]` is link l's capacity in bytes/s.
// A flow with an empty route gets `local_rate`.
// REQUIRES: every capacity > 0.
std::vector<double> max_min_rates(const std::vector<RoutedFlow>& flows, const std::vector<double>& capacity,
                                  double local_rate);

// Seconds until the last flow completes when all start at t=0 and rates are
// re-solved whenever a flow completes. Optionally returns each link's bytes carried.
double transfer_seconds(const std::vector<RoutedFlow>& flows, const std::vector<double>& capacity,
                        double local_rate, std::vector<double>* link_bytes = nullptr);

}  // namespace dptwin::sim
