// sim/build_common.hpp — shared machinery of the strategy builders (internal to sim/).
//
// A builder turns (workload, strategy, cluster) into executor tasks for one
// optimizer step per call. Executor "slots" are the simulated devices; slot i
// stands for device sim_devices[i] (all devices, or representatives when every
// device behaves the same — see SimulationOptions::all_devices).
#pragma once

#include <string>
#include <vector>

#include "models/workload.hpp"
#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
#include "sim/device_profile.hpp"
#include "sim/executor.hpp"
#include "sim/results.hpp"
#include "sim/scenario.hpp"
#include "sim/strategy.hpp"
#include "sim/timeline.hpp"

namespace dptwin::sim {

// One link-activity record per priced collective, for timelines.
struct CommRecord {
  std::vector<std::pair<int, double>> link_bytes;
  TaskId member = kNoTask;  // a member task: its start/end bound the activity
};

struct StepContext {
  const PointSpec* point = nullptr;
  const models::Workload* work = nullptr;
  const DeviceProfile* prof = nullptr;
  PrecisionMode prec;
  StrategyKind kind = StrategyKind::Single;
  const StrategyOptions* opts = nullptr;
  const topology::Topology* topo = nullptr;
  NetworkModel* net = nullptr;
  Executor* ex = nullptr;
  Simulation* sim = nullptr;
  std::vector<int> ranks;        // devices of the job, in rank order
  std::vector<int> ring_ranks;   // the same devices in ring order (see ring_order)
  std::vector<int> sim_devices;  // slot -> device
  // Slot -> the machine whose cores its rank shares with other simulated
  // slots (processor sharing in the Executor); empty: the profile's core
  // sharing is a fixed factor in `prof` (or there is none).
  std::vector<int> core_host;
  std::vector<CommRecord>* comm_records = nullptr;
  bool record_links = false;

  // Per-op times under this precision (launch overhead scaled by launch_factor).
  std::vector<Time> forward_times, backward_times;
  double launch_factor = 1.0;

  int slots() const { return static_cast<int>(sim_devices.size()); }
  int world() const { return static_cast<int>(ranks.size()); }
};

// The ranks reordered so that a ring follows each node's fastest links, as NCCL's
// topology search does (on a DGX-1 hybrid cube-mesh, rank order 0..7 would cross
// PCIe between GPU3 and GPU4). Within each node of at most 8 ranks, every order
// starting at the node's first rank is scored by its slowest hop, then its total
// bandwidth; the ring closes inside the node only for single-node jobs.
std::vector<int> ring_order(const topology::Topology& topo, const std::vector<int>& ranks);

// Fills forward_times/backward_times. `launch_factor` multiplies launch overheads
// (DataParallel's replicas share one Python interpreter for dispatch).
void compute_op_times(StepContext& ctx, double launch_factor = 1.0);

Time sum_forward(const StepContext& ctx);
// Sum of backward op times for ops [begin, end).
Time sum_backward(const StepContext& ctx, size_t begin, size_t end);

// Bytes of one full gradient set / weight set in the given dtype.
double gradient_bytes(const StepContext& ctx, DType dtype);
int tensor_count(const StepContext& ctx);
// Module buffers of HF GPT-2 (the causal-mask `attn.bias` per layer, n_positions^2 bytes).
double buffer_bytes(const StepContext& ctx);
// The messages of DDP's buffer broadcast: broadcast_coalesced flattens tensors
// of one dtype together, so the uint8 masks and the fp32 `masked_bias` scalars
// (models::gpt2_buffers) travel as two broadcasts, in registration order.
std::vector<double> buffer_broadcast_bytes(const StepContext& ctx);

// Optimizer-side work of one step on one device, as task durations.
struct OptimizerWork {
  Time unscale;    // AMP: unscale gradients + overflow check (0 when no loss scaling)
  Time clip;       // clip_grad_norm_(1.0)
  Time step;       // AdamW (on fp32 master weights under O2)
  Time master_copy;// O2: copy fp32 master weights back into the half model
  Time zero_grad;  // zero the gradients
  Time total() const { return unscale + clip + step + master_copy; }
};
OptimizerWork optimizer_work(const StepContext& ctx);

// The optimizer side of a step on one slot's compute stream, after `deps`:
// unscale + overflow check (AMP; skipped when `unscale` is false), clip, AdamW,
// master-weight copy. Stages of zero cost are left out. Returns the last task.
TaskId add_optimizer_tasks(StepContext& ctx, int slot, const OptimizerWork& ow, const std::vector<TaskId>& deps,
                           bool unscale = true, const char* step_name = "AdamW step");

// A collective over every slot, priced by the network for the full rank set.
std::vector<TaskId> add_collective_all(StepContext& ctx, CollectiveKind kind, Algorithm alg, double bytes,
                                       const std::string& name, const std::vector<std::vector<TaskId>>& deps,
                                       int root = 0, Category cat = Category::Communication);
// Same over a subset of slots (`slots`), priced for the devices `ranks`.
std::vector<TaskId> add_collective_on(StepContext& ctx, const std::vector<int>& slots, const std::vector<int>& ranks,
                                      CollectiveKind kind, Algorithm alg, double bytes, const std::string& name,
                                      const std::vector<std::vector<TaskId>>& deps, int root = 0,
                                      Category cat = Category::Communication);

// The algorithm for data-parallel allreduces: options.algorithm, with Auto resolved
// (ring within a node, hierarchical across nodes with several devices per node).
Algorithm allreduce_algorithm(const StepContext& ctx);

// Strategy builders: add one optimizer step. `prev[slot]` is the task the step
// must follow (kNoTask for the first step); returns the step's last task per slot.
std::vector<TaskId> build_single_step(StepContext& ctx, const std::vector<TaskId>& prev, int step);
std::vector<TaskId> build_sps_step(StepContext& ctx, const std::vector<TaskId>& prev, int step);
std::vector<TaskId> build_dps_step(StepContext& ctx, const std::vector<TaskId>& prev, int step);
// Horovod runs a background loop; it needs state across steps.
class HorovodRuntime;
std::vector<TaskId> build_horovod_step(StepContext& ctx, HorovodRuntime& rt, const std::vector<TaskId>& prev, int step);

// Whether sps runs as DataParallel (true) or as a central parameter server.
bool sps_uses_data_parallel(const StepContext& ctx);

// The executor's options for the context's profile, strategy and machines:
// overlap, jitter, the ranks' synchronisation costs, collectives that wait
// for compute, processor sharing of core_host's machines, Horovod's loop.
ExecutorOptions executor_options(const StepContext& ctx);

// DDP buckets of this configuration (for memory and reports).
int dps_bucket_count(const StepContext& ctx);

// Memory on the device with the largest footprint (sim/memory_model.cpp).
MemoryReport estimate_device_memory(const StepContext& ctx);

}  // namespace dptwin::sim
