// validate/sync_fit.hpp — the ranks' synchronisation latency beyond the
// cores, fitted so that the simulator runs the calibration's step-skeleton
// probe (sim/sync_skeleton.hpp) in its measured cycles. fit_profile
// (profile_fit.hpp) calls it for each rank count with more ranks than cores.
//
// Thread-safety: pure functions.
#pragma once

#include <utility>
#include <vector>

#include "core/units.hpp"
#include "sim/device_profile.hpp"
#include "sim/sync_skeleton.hpp"
#include "topology/topology.hpp"

namespace dptwin::validate {

// The ranks' synchronisation cost `start` (the probe's components: the
// arrival skew as the lag, the extra time over the collectives alone as the
// latency) with the latency that makes the simulator run the step-skeleton
// probe nearest its measured cycles (sim/sync_skeleton.hpp; `probes`:
// skeletons of one rank count, each with its measured cycle in seconds). For
// more ranks than cores, where the components count the ranks' turns at the
// cores twice: the extra time after the last arrival is partly the ranks
// that wait for a core, which the simulator's processor sharing already puts
// in the last rank's burst end (at 4 ranks on 2 cores the components priced
// the skeleton 2.5-5.6 ms over its 30 ms cycle, and tiny 4-rank steps 12-32%
// high in vdp1-vdp3). The lag stays the measured skew: fitting it to the
// cycles too made it a residual of two larger figures, 7.1 vs 8.6 ms in two
// calibrations in a row (the skew: 13.4 vs 13.1). Least squares of the
// relative errors over a grid of [0, 4x `start`'s latency] (at least 5 ms),
// refined around its best point.
struct SyncCycleFit {
  sim::DeviceProfile::SyncCost cost;
  std::vector<double> simulated_s;  // the skeletons' cycles with `cost`
  double rms_rel_error = 0;
};
SyncCycleFit fit_sync_to_cycles(const sim::DeviceProfile& p, const topology::Topology& topo,
                                const std::vector<std::pair<sim::SyncSkeleton, double>>& probes,
                                const sim::DeviceProfile::SyncCost& start);
// The skeleton's optimizer stand-in on `p`: 6 MiB on the memory curve, one kernel.
Time skeleton_optimizer(const sim::DeviceProfile& p);
// The skeletons' simulated cycles (seconds) with `cost` as the profile's only sync cost.
std::vector<double> simulated_sync_cycles(const sim::DeviceProfile& p, const topology::Topology& topo,
                                          const std::vector<std::pair<sim::SyncSkeleton, double>>& probes,
                                          const sim::DeviceProfile::SyncCost& cost);

}  // namespace dptwin::validate
