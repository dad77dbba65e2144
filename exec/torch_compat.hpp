// exec/torch_compat.hpp — the few LibTorch APIs that differ between the
// versions dptwin-exec builds against: Debian's 1.13 (CPU) and the 2.x
// releases a CUDA build uses (pip wheels, libtorch-cxx11 archives).
//
//  * c10d: from 2.0 the Gloo and NCCL process groups are c10d::Backend
//    subclasses (ProcessGroup became a dispatching wrapper over backends);
//    in 1.13 they derive from c10d::ProcessGroup. Both expose the same
//    collective methods, so the communicator holds a C10dGroup.
//  * autocast: 2.4 replaced the per-device setters (set_cpu_enabled,
//    set_autocast_gpu_dtype, ...) with ones taking the device type.
//
// Exec-internal (LibTorch header).
#pragma once

#include <torch/version.h>

#define DPTWIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if DPTWIN_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace dptwin::exec {
using C10dGroup = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace dptwin::exec {
using C10dGroup = c10d::ProcessGroup;
}
#endif
