// exec/comm_nccl.cpp — NCCL backend through c10d::ProcessGroupNCCL.
//
// Compiled only when exec/meson.build finds a CUDA LibTorch and -Dnccl=enabled
// (defines DPTWIN_HAVE_NCCL); not built on CPU-only machines. Tensors must be
// CUDA tensors on the rank's device (the trainer places the model on
// cuda:LOCAL_RANK under this backend). NCCL reduces bf16 and fp16 natively.
#include "exec/comm_c10d.hpp"

#ifdef DPTWIN_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace dptwin::exec {

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& store_spec, int rank, int size,
                                                     std::chrono::duration<double> timeout) {
  const auto ms = std::chrono::milliseconds(static_cast<int64_t>(timeout.count() * 1000));
  auto store = make_c10d_store(store_spec, rank, size, ms);
  ProcessGroupFactory factory = [rank, size, ms](const c10::intrusive_ptr<c10d::Store>& s) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = ms;
    opts->is_high_priority_stream = false;
    return c10::intrusive_ptr<C10dGroup>(c10::make_intrusive<c10d::ProcessGroupNCCL>(s, rank, size, opts));
  };
  auto c = std::make_unique<C10dCommunicator>("nccl", store, factory, rank, size, /*reduces_bf16=*/true);
  c->set_timeout(timeout);
  return c;
}

}  // namespace dptwin::exec
#endif
