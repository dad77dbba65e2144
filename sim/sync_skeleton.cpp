#include "sim/sync_skeleton.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "sim/build_common.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"

namespace dptwin::sim {

Time simulate_sync_skeleton(const DeviceProfile& profile, const topology::Topology& topo, const SyncSkeleton& sk,
                            int iterations) {
  DPTWIN_ASSERT(sk.ranks >= 2 && sk.ranks <= topo.num_devices(), "a skeleton of 2 or more of the topology's ranks");
  DPTWIN_ASSERT(iterations >= 1, "a skeleton of one or more iterations");
  const bool share_cores = !profile.host_sharing.empty();
  const DeviceProfile prof =
      profile.shared_by(sk.ranks, share_cores ? DeviceProfile::SharingMode::ByExecutor : DeviceProfile::SharingMode::Fixed);
  NetworkOptions no;
  no.calibration = prof.network;
  NetworkModel net(topo, no);
  StrategyOptions opts;
  StepContext ctx;
  ctx.prof = &prof;
  ctx.kind = StrategyKind::Dps;
  ctx.opts = &opts;
  ctx.topo = &topo;
  ctx.net = &net;
  for (int i = 0; i < sk.ranks; ++i) {
    ctx.ranks.push_back(i);
    ctx.sim_devices.push_back(i);
    if (share_cores) ctx.core_host.push_back(0);
  }
  ctx.ring_ranks = ctx.ranks;
  Simulation sim(1);
  Executor ex(sim, sk.ranks, executor_options(ctx));
  ctx.ex = &ex;
  ctx.sim = &sim;

  auto deps_of = [](const std::vector<TaskId>& t) {
    std::vector<std::vector<TaskId>> d;
    for (TaskId x : t) d.push_back({x});
    return d;
  };
  auto all = [&](CollectiveKind kind, double bytes, const char* name, const std::vector<TaskId>& after) {
    const Algorithm alg = kind == CollectiveKind::Broadcast ? Algorithm::ParameterServer : Algorithm::Ring;
    return add_collective_all(ctx, kind, alg, bytes, name, deps_of(after));
  };
  std::vector<TaskId> prev(sk.ranks, kNoTask);
  std::vector<std::vector<TaskId>> alone, optimizer;  // per iteration: the last alone allreduce's members, optimizers
  for (int it = 0; it < iterations; ++it) {
    auto mask = all(CollectiveKind::Broadcast, sk.mask_bytes, "mask broadcast", prev);
    auto scalar = all(CollectiveKind::Broadcast, sk.scalar_bytes, "scalar broadcast", mask);
    std::vector<TaskId> burst(sk.ranks), opt(sk.ranks);
    for (int r = 0; r < sk.ranks; ++r)
      burst[r] = ex.add_task(r, StreamKind::Compute, Category::Forward, sk.burst, ex.name_id("burst"), {scalar[r]});
    auto grad = all(CollectiveKind::AllReduce, sk.grad_bytes, "gradient allreduce", burst);
    for (int r = 0; r < sk.ranks; ++r)
      opt[r] = ex.add_task(r, StreamKind::Compute, Category::Optimizer, sk.optimizer, ex.name_id("optimizer"), {grad[r]});
    // The same collectives alone, behind barriers (4-byte allreduces).
    auto b1 = all(CollectiveKind::AllReduce, 4, "barrier", opt);
    auto m2 = all(CollectiveKind::Broadcast, sk.mask_bytes, "mask broadcast (alone)", b1);
    auto s2 = all(CollectiveKind::Broadcast, sk.scalar_bytes, "scalar broadcast (alone)", m2);
    auto b2 = all(CollectiveKind::AllReduce, 4, "barrier", s2);
    prev = all(CollectiveKind::AllReduce, sk.grad_bytes, "gradient allreduce (alone)", b2);
    alone.push_back(prev);
    optimizer.push_back(opt);
  }
  sim.run();
  std::vector<double> cycles;
  for (int it = 0; it < iterations; ++it) {
    Time start, end;
    for (int r = 0; r < sk.ranks; ++r) {
      DPTWIN_ASSERT(ex.finished(optimizer[it][r]), "the skeleton did not finish");
      // A rank enters the first broadcast when it leaves the previous
      // iteration's alone allreduce (the first iteration: at 0).
      if (it > 0) start = max(start, ex.end_of(alone[it - 1][r]));
      end = max(end, ex.end_of(optimizer[it][r]));
    }
    cycles.push_back((end - start).seconds());
  }
  std::nth_element(cycles.begin(), cycles.begin() + cycles.size() / 2, cycles.end());
  return Time::from_seconds(cycles[cycles.size() / 2]);
}

}  // namespace dptwin::sim
