// exec/comm_fwd.hpp — forward declarations of the communication interface for
// torch-free headers (the full interface, comm.hpp, pulls in ATen).
#pragma once

namespace dptwin::exec {
class Communicator;
class Work;

// How much nicer than its rank Gloo's event-loop thread runs
// (make_gloo_communicator): kGlooLoopNice while the host's ranks x threads fit
// its cores, kGlooLoopNiceShared beyond. There the loop also competes with the
// other ranks' compute, and fully niced it receives only when they yield: a
// parameter server's reduce of small x4 on 2 cores ran 111-124 ms at 10, 124-137
// at 0 and 129-144 at 19 (exec/README "Gloo's event loop").
inline constexpr int kGlooLoopNice = 19;
inline constexpr int kGlooLoopNiceShared = 10;
inline constexpr int kGlooLoopNiceAuto = -1;  // an option's value: choose by the rule above

inline int resolve_gloo_loop_nice(int setting, int host_ranks, int threads, int cores) {
  if (setting != kGlooLoopNiceAuto) return setting;
  return host_ranks * threads <= cores ? kGlooLoopNice : kGlooLoopNiceShared;
}
}  // namespace dptwin::exec
