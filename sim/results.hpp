// sim/results.hpp — the outputs of one scenario point.
//
// Every field is documented with its unit. Timing fields are absent (nullopt)
// when the configuration does not fit in memory (status "oom") or cannot run
// (status "infeasible"): an OOM configuration is reported, never silently timed.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/timeline.hpp"

namespace dptwin::sim {

struct Breakdown {
  double compute_s = 0;        // forward + backward kernels on the critical device
  double exposed_comm_s = 0;   // communication not hidden behind compute
  double hidden_comm_s = 0;    // communication overlapped with compute
  double optimizer_s = 0;      // clipping, unscale, optimizer step, master-weight copies
  double overhead_s = 0;       // framework costs and idle waits (negotiation, cycles, stragglers)
};

struct MemoryReport {            // bytes, on the device with the largest footprint
  double weights = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double master_weights = 0;
  double activations = 0;
  double workspace = 0;          // logits and their gradient, attention scores
  double comm_buffers = 0;       // DDP buckets, Horovod fusion buffer, broadcast buffers
  double gathered_outputs = 0;   // DataParallel: outputs gathered on device 0
  double framework_reserve = 0;  // CUDA context, allocator slack
  double peak = 0;               // sum of the above
  double capacity = 0;           // device memory
  int device = 0;                // which device this is
  bool oom = false;
};

struct PointResult {
  // The scenario point (label -> value), in a stable order: model, cluster,
  // device_type, devices, strategy, micro_batch, accumulation, precision, ...
  std::vector<std::pair<std::string, std::string>> params;
  std::string status = "ok";     // "ok" | "oom" | "infeasible"
  std::string message;           // reason for oom/infeasible, notes

  int devices = 0;               // devices used
  int64_t global_batch = 0;      // samples per optimizer step
  int64_t tokens_per_step = 0;

  std::optional<double> step_time_s;          // seconds per optimizer step
  std::optional<double> tokens_per_s;
  std::optional<double> samples_per_s;
  std::optional<double> scaling_efficiency;   // throughput / (devices x one-device throughput)
  std::optional<double> mfu;                  // model FLOPs (6N + 6LCT per token) / (devices x peak)
  Breakdown breakdown;
  MemoryReport memory;

  std::optional<double> cost_per_million_tokens;  // USD, when prices are known
  std::optional<double> time_to_train_s;          // seconds for the token budget, when given
  std::optional<double> cost_to_train;            // USD for the token budget

  // Simulator statistics.
  int64_t events = 0;
  int simulated_devices = 0;
  double wall_seconds = 0;

  std::optional<Timeline> timeline;  // when a trace was requested
};

}  // namespace dptwin::sim
