// exec/comm_fwd.hpp — forward declarations of the communication interface for
// torch-free headers (the full interface, comm.hpp, pulls in ATen).
#pragma once

namespace dptwin::exec {
class Communicator;
class Work;

// How much nicer than its rank Gloo's event-loop thread runs by default
// (make_gloo_communicator).
inline constexpr int kGlooLoopNice = 19;
}  // namespace dptwin::exec
