// exec/data_parallel.hpp — one process driving model replicas on several
// devices: torch.nn.DataParallel, the mechanism of the paper's `sps`
// (`--strategy sps --devices-per-process K`, world size 1).
//
// Replica 0 is the training model itself on devices[0]; replicas 1..K-1 are
// models of the same configuration on devices[1..K-1]. Per optimizer step the
// trainer and the sps strategy drive them as DataParallel does:
//   replicate()          parameters of replica 0 copied onto every other replica
//                        through flat buffers of at most bucket_bytes
//                        (DataParallel's replicate -> broadcast_coalesced, 10 MiB);
//                        one comm span "broadcast.paramK" per buffer
//   forward(x, y)        the micro-batch is scattered along dim 0 into at most K
//                        chunks (torch.chunk sizes, as DataParallel's scatter), each
//                        replica runs its forward in its own thread; returns the
//                        micro-batch's loss sum_k (B_k / B) loss_k (detached, on devices[0])
//   backward(factor)     each replica runs backward of factor * (B_k / B) * loss_k in
//                        its own thread; replica gradients accumulate in place
//   reduce_gradients()   gradients of replicas 1..K-1 added onto replica 0's through
//                        flat buffers of at most bucket_bytes (reduce_add_coalesced);
//                        one comm span "reduce.gradK" per buffer; replica gradients zeroed
// so replica 0 holds the gradient of the whole micro-batch's mean loss and the
// optimizer steps there alone. Loss weights B_k / B make unequal chunks exact
// (DataParallel's gather + mean weights replicas equally; the same when K divides B).
//
// Devices: cuda:0..K-1 when CUDA is available (it must have K devices), else K
// replicas on the CPU (testable anywhere). Every replica thread (the caller runs
// replica 0) sets its own intra-op thread count to `threads_per_replica`.
//
// Exec-internal (LibTorch). Thread-safety: driven by the training thread only;
// the replica threads are internal.
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exec/gpt2_model.hpp"
#include "exec/measure.hpp"

namespace dptwin::exec {

// cuda:0..k-1 when `cuda` (throws std::runtime_error if fewer than k GPUs are
// visible), else k times the CPU.
std::vector<torch::Device> replica_devices(int k, bool cuda);

// Runs fn(0..n-1) in parallel: fn(0) on the caller, the others on persistent
// threads (one per extra replica, each with its own intra-op thread count).
// Rethrows the first exception once all have finished.
class ReplicaThreads {
 public:
  ReplicaThreads(int extra_threads, int intra_op_threads);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  // REQUIRES: 1 <= n <= extra_threads + 1.
  void run(int n, const std::function<void(int)>& fn);

 private:
  void loop(int k, int intra_op_threads);

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int n_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

class DataParallel {
 public:
  // The loss of one replica on its chunk, run in that replica's thread (the
  // trainer's forward: autocast scope + model loss).
  using LossFn = std::function<torch::Tensor(Gpt2Impl&, const torch::Tensor&, const torch::Tensor&)>;

  // REQUIRES: replicas.size() == devices.size() >= 1; replica k lives on
  // devices[k] with the same parameter list (order, shapes, dtypes) as replica 0.
  DataParallel(std::vector<Gpt2> replicas, std::vector<torch::Device> devices, int threads_per_replica,
               int64_t bucket_bytes, Recorder* rec, LossFn loss);

  int size() const { return static_cast<int>(replicas_.size()); }
  const std::vector<torch::Device>& devices() const { return devices_; }

  // Buffers (the causal masks) of replica 0 copied onto the others, once ("broadcast.buffersK").
  void copy_buffers();
  void replicate();
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y);
  // REQUIRES: forward() since the last backward().
  void backward(double factor);
  void reduce_gradients();

 private:
  // Copies replica 0's tensors lists[0] onto the other replicas' lists[k] through flat
  // buffers, recording one comm span "<label><index>" per buffer; returns the next index.
  // REQUIRES: one dtype in lists[0].
  int broadcast_from_first(const std::vector<std::vector<torch::Tensor>>& lists, const std::string& label, int index);

  std::vector<Gpt2> replicas_;
  std::vector<torch::Device> devices_;
  std::vector<std::vector<torch::Tensor>> params_;  // [replica][parameter], registration order
  int64_t bucket_bytes_;
  Recorder* rec_;
  LossFn loss_fn_;
  ReplicaThreads threads_;
  std::vector<torch::Tensor> losses_;  // per active replica, weighted, from the last forward
};

}  // namespace dptwin::exec
