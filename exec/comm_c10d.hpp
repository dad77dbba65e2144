// exec/comm_c10d.hpp — a Communicator over a c10d process group (Gloo, NCCL).
//
// Exec-internal (used by comm_c10d.cpp for Gloo and comm_nccl.cpp for NCCL).
// Completion is observed through the c10d Work's future (or, for ops without
// one, a waiter thread), so Work timestamps are those of completion.
// Reductions of dtypes the process group cannot reduce (bf16 on Gloo in
// LibTorch 1.13) run on an fp32 copy that is copied back on completion;
// non-reducing ops move such dtypes bit-exactly as int16.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>

#include "exec/comm.hpp"
#include "exec/op_queue.hpp"
#include "exec/torch_compat.hpp"

namespace dptwin::exec {

// Builds the process group of a channel named `name` ("" for the world) over `store`.
using ProcessGroupFactory =
    std::function<c10::intrusive_ptr<C10dGroup>(const c10::intrusive_ptr<c10d::Store>& store)>;

class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(std::string backend, c10::intrusive_ptr<c10d::Store> store, ProcessGroupFactory factory,
                   int rank, int size, bool reduces_bf16);
  ~C10dCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }
  std::unique_ptr<Communicator> split(const std::string& name) override;

 protected:
  WorkPtr do_allreduce(at::Tensor& t, ReduceOp op) override;
  WorkPtr do_reduce(at::Tensor& t, int root, ReduceOp op) override;
  WorkPtr do_broadcast(at::Tensor& t, int root) override;
  WorkPtr do_allgather(at::Tensor& in, at::Tensor& out) override;
  WorkPtr do_reduce_scatter(at::Tensor& in, at::Tensor& out, ReduceOp op) override;
  WorkPtr do_send(at::Tensor& t, int dst, int tag) override;
  WorkPtr do_recv(at::Tensor& t, int src, int tag) override;
  WorkPtr do_barrier() override;

 private:
  // Issues a c10d work (`issue` hands it to the process group) and wraps it;
  // `after` runs on success before the Work completes.
  WorkPtr wrap(const char* kind, const std::function<c10::intrusive_ptr<c10d::Work>()>& issue,
               std::function<void()> after = {});
  // Tensor to hand to the process group for a reduction, and how to copy back.
  at::Tensor reducible(const at::Tensor& t) const;
  static at::Tensor transportable(const at::Tensor& t);

  std::string backend_;
  c10::intrusive_ptr<c10d::Store> store_;
  ProcessGroupFactory factory_;
  c10::intrusive_ptr<C10dGroup> pg_;
  int rank_, size_;
  bool reduces_bf16_;
  OpQueue waiter_;  // completes works whose c10d op has no future (send/recv)
};

c10::intrusive_ptr<c10d::Store> make_c10d_store(const std::string& spec, int rank, int size,
                                                std::chrono::milliseconds timeout);

}  // namespace dptwin::exec
