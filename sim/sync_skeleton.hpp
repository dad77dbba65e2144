// sim/sync_skeleton.hpp — the step-skeleton probe as the simulator runs it.
//
// `dptwin-microbench` times one training step's synchronisation skeleton
// without a model (exec/microbench SyncProbe): two buffer broadcasts from rank
// 0 (8 KiB, 8 bytes), a compute burst, the gradient allreduce entered straight
// from it, an optimizer stand-in, then the same collectives alone behind a
// barrier. Its measured cycle (from the ranks' entry into the first broadcast
// to the last rank's optimizer end) is a step in miniature. Beyond the cores
// the fit of a profile's synchronisation latency (DeviceProfile::SyncCost)
// asks the simulator to reproduce it (validate/sync_fit.hpp,
// fit_sync_to_cycles), so that the latency means what the simulator does with
// it: where ranks time-share cores the processor sharing already puts the
// last rank's burst end at the machine's whole work, and the sync costs price
// only what the real period adds to that.
#pragma once

#include "core/units.hpp"
#include "sim/device_profile.hpp"
#include "topology/topology.hpp"

namespace dptwin::sim {

struct SyncSkeleton {
  int ranks = 2;
  Time burst;                       // one rank's compute burst with a core of its own
  Time optimizer;                   // the optimizer stand-in (an elementwise update)
  double mask_bytes = 8192;         // the first broadcast (DDP's mask buffers)
  double scalar_bytes = 8;          // the second (its scalar buffers)
  double grad_bytes = 512 * 1024;   // the gradient allreduce
};

// The median cycle over `iterations` iterations of the skeleton on the ranks
// 0..ranks-1 of `topo`, priced by `profile` (not yet shared_by: this runs it
// for the skeleton's rank count, its core sharing task by task as the
// simulator runs a step). REQUIRES: ranks >= 2 and <= topo's devices.
Time simulate_sync_skeleton(const DeviceProfile& profile, const topology::Topology& topo, const SyncSkeleton& sk,
                            int iterations = 6);

}  // namespace dptwin::sim
