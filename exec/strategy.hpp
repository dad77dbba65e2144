// exec/strategy.hpp — a data-parallel strategy as seen by the training loop.
//
// The trainer runs, per optimizer step:
//   for each micro-step: before_forward(); forward; before_backward(last); backward
//   synchronize_gradients()                 // every rank that steps holds the global mean gradient
//   if (runs_optimizer()) clip + optimizer step
//   after_optimizer()                       // sps: parameters broadcast from rank 0
//   [double step: resynchronize_gradients(); clip + optimizer step again]
//   zero_grad()
// Strategies (DESIGN.md §2): single (no communication), sps (central parameter
// server on rank 0; with --devices-per-process K > 1, nn.DataParallel over K
// replicas in one process, see data_parallel.hpp), dps (DDP: bucketed allreduce from gradient hooks,
// overlapping backward), horovod (background negotiation + fusion buffer).
// Gradients are those of the model parameters (fp32, or bf16/fp16 under O2);
// averaging is over ranks (the loss of each rank is already a mean).
//
// Exec-internal header (LibTorch). Thread-safety: one instance per rank, driven
// by the training thread; implementations may run their own threads.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "exec/measure.hpp"
#include "exec/options.hpp"

namespace dptwin::exec {

class DataParallel;

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Once, before training: makes all replicas equal to rank 0's.
  virtual void setup() {}
  virtual void before_forward() {}
  // `sync`: whether this backward is the last micro-step (gradients are communicated).
  virtual void before_backward(bool /*sync*/) {}
  virtual void synchronize_gradients() = 0;
  virtual bool runs_optimizer() const { return true; }
  virtual void after_optimizer() {}
  // The paper's second optimizer.step() under Horovod: re-average all gradients.
  virtual void resynchronize_gradients() { synchronize_gradients(); }
  // Zeroes gradients in place (some strategies own the gradient storage).
  virtual void zero_grad();
  // dps: the parameter indices of each gradient bucket, in bucket (= allreduce)
  // order; after the rebuild, the concatenation is rank 0's readiness order.
  // Empty for strategies without buckets. For tests and diagnostics.
  virtual std::vector<std::vector<size_t>> gradient_buckets() const { return {}; }

 protected:
  std::vector<torch::Tensor> params_;
};

struct StrategyInputs {
  const ExecOptions* options = nullptr;
  std::vector<torch::Tensor> params;   // model parameters, registration order
  std::vector<torch::Tensor> buffers;  // model buffers (dps broadcast_buffers)
  Communicator* comm = nullptr;        // nullptr for single and sps in one process
  Recorder* recorder = nullptr;
  DataParallel* replicas = nullptr;    // sps in one process: the replica set (params are replica 0's)
};

// REQUIRES: comm != nullptr unless the kind is Single or Sps with replicas; all
// ranks call it together.
std::unique_ptr<Strategy> make_strategy(StrategyKind kind, StrategyInputs in);

// Implementations (one file each).
std::unique_ptr<Strategy> make_single_strategy(StrategyInputs in);
std::unique_ptr<Strategy> make_sps_strategy(StrategyInputs in);  // in.replicas: the in-process variant
std::unique_ptr<Strategy> make_ddp_strategy(StrategyInputs in);
std::unique_ptr<Strategy> make_horovod_strategy(StrategyInputs in);

// Helpers shared by implementations.
// Flattens `tensors` into buffers of at most `cap_bytes` (a tensor larger than
// the cap gets its own buffer); returns index lists in the given order.
std::vector<std::vector<size_t>> group_by_bytes(const std::vector<torch::Tensor>& tensors,
                                                const std::vector<size_t>& order, int64_t cap_bytes);
// Broadcasts `tensors` from `root` through flat buffers of at most cap_bytes.
void broadcast_coalesced(Communicator& comm, const std::vector<torch::Tensor>& tensors, int root, int64_t cap_bytes,
                         const char* label);

}  // namespace dptwin::exec
