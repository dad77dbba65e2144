// exec/comm_fwd.hpp — forward declarations of the communication interface for
// torch-free headers (the full interface, comm.hpp, pulls in ATen).
#pragma once

namespace dptwin::exec {
class Communicator;
class Work;
}  // namespace dptwin::exec
