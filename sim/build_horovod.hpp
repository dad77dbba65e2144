// sim/build_horovod.hpp — Horovod's background loop (internal to sim/).
//
// hvd.DistributedOptimizer registers a hook per parameter; when a gradient is
// ready the hook enqueues an allreduce request. A background thread wakes every
// cycle_time (or when the previous cycle ends, if later: it negotiates in every
// cycle, idle or not), negotiates with rank 0 which tensors are ready on every
// rank (a small bit-vector allreduce when the response cache knows them, a
// gather + broadcast of requests otherwise), fuses ready tensors into buffers up to the
// fusion threshold (memcpy in), allreduces each buffer, and copies out (scaling
// by 1/size); on CPU ranks the loop thread runs those collectives itself, so
// its next cycle starts after them. optimizer.step() waits for every handle. With the paper's
// horovod+amp code (double_step), step() runs twice, and the second call
// allreduces every gradient again.
//
// The runtime builds every step's tasks itself, as the loop decides them, so
// it runs inside the simulation rather than before it.
#pragma once

#include <deque>
#include <unordered_map>
#include <vector>

#include "sim/build_common.hpp"

namespace dptwin::sim {

class HorovodRuntime {
 public:
  HorovodRuntime(StepContext& ctx, int steps);
  // Builds step 0 (each later step is built when its predecessor's optimizer is placed).
  void start();
  // [step][slot] last task of each step, complete after the simulation ran.
  const std::vector<std::vector<TaskId>>& step_ends() const { return step_end_; }
  int cycles() const { return cycles_; }
  int fused_buffers() const { return buffers_; }

 private:
  void build_step(int step, const std::vector<TaskId>& prev);
  void tensor_ready(int tensor);  // one more slot has this gradient
  void ensure_ticking();
  void tick();
  void place_optimizer();
  Time negotiation_time(size_t tensors, bool all_cached);
  Time idle_cycle();  // an idle cycle: the longer of cycle_time and an empty negotiation

  StepContext& ctx_;
  int steps_;
  int step_ = -1;
  int round_ = 0;                       // 0: first allreduce of the step, 1: double_step's second
  std::vector<int> ready_count_;        // per tensor: slots on which it is ready
  std::deque<int> ready_queue_;         // tensors ready on every slot, in order
  int outstanding_ = 0;                 // tensors of this round not yet negotiated
  std::vector<bool> cached_;            // response cache
  size_t cached_count_ = 0;             // tensors in it
  bool ticking_ = false;
  Time anchor_ = Time::zero();          // the loop's next cycle starts here or a whole number of cycles later
  std::vector<TaskId> backward_end_;    // per slot
  std::vector<TaskId> comm_end_;        // per slot: last copy-out of the round
  std::vector<std::vector<TaskId>> step_end_;
  int cycles_ = 0;
  int buffers_ = 0;
  OptimizerWork ow_;
  Time bits_time_ = Time::ns(-1);
  std::unordered_map<size_t, Time> request_time_;
};

}  // namespace dptwin::sim
