// exec/result.hpp — per-rank reports, the one result JSON, the merged Chrome trace.
//
// Each rank turns its Recorder and per-step samples into a RankReport, sends it
// to rank 0 (as JSON text over the communicator), and rank 0 builds:
//  * make_result(): the result document, schema "dptwin.exec.result/1"
//    (documented in exec/README.md): configuration, per-step records (loss,
//    step time = slowest rank, phase times per rank), summary statistics over
//    the measured steps (warm-up excluded: median, mean, min, max, p10, p90,
//    stdev), tokens/s, peak memory, and every communication op;
//  * make_chrome_trace(): traceEvents with pid = rank, tid 0 = compute stream,
//    tid 1 = comm stream (ts/dur in microseconds), loadable in Perfetto.
//
// Torch-free. Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/measure.hpp"

namespace dptwin::exec {

struct StepSample {
  int step = 0;
  double loss = 0;       // this rank's mean loss over its micro-steps
  double lr = 0;
  double grad_norm = 0;  // global gradient norm before clipping (ranks that step)
  bool skipped = false;  // optimizer step skipped (loss-scale overflow)
};

struct RankReport {
  int rank = 0;
  std::string host;
  int pid = 0;
  int64_t peak_rss_bytes = 0;
  int64_t device_peak_bytes = 0;  // CUDA caching allocator high-water mark (0 on CPU)
  double param_checksum = 0;  // sum of |p| over parameters at the end (replica agreement)
  std::vector<StepSample> steps;
  std::vector<Span> spans;
};

nlohmann::json to_json(const RankReport& r);
RankReport rank_report_from_json(const nlohmann::json& j);

struct RunInfo {
  nlohmann::json config;        // options (resolved) and model
  int world = 1;
  int warmup_steps = 0;
  int64_t tokens_per_step = 0;  // global: world · grad_accum · micro_batch · seq_len
  int64_t parameters = 0;
  std::string corpus;
  std::string versions;         // e.g. "dptwin 0.1.0, libtorch 1.13.1"
  // The ranks' common time origin: "shared" (one kernel: rank 0's steady-clock
  // reading, cross-rank times exact) or "barrier" (each rank's barrier exit).
  std::string clock = "shared";
  // The host's communication state around the run (probe_comm_state, exec/comm.hpp):
  // seconds of a 4 KiB allreduce before and after training; empty on one rank and NCCL.
  std::vector<double> comm_state_s;
  int64_t comm_state_bytes = 0;
};

// Statistics of a sample (empty sample: all zero).
struct Stats {
  double median = 0, mean = 0, min = 0, max = 0, p10 = 0, p90 = 0, stdev = 0;
  int n = 0;
};
Stats compute_stats(std::vector<double> xs);
nlohmann::json to_json(const Stats& s);

// REQUIRES: reports sorted by rank, one per rank.
nlohmann::json make_result(const RunInfo& info, const std::vector<RankReport>& reports);
nlohmann::json make_chrome_trace(const std::vector<RankReport>& reports);

}  // namespace dptwin::exec
