// report/planner.hpp — `dptwin plan`: the fastest and the cheapest way to train a model.
//
// A PlanRequest (flags or a plan YAML) names a model, a token count and the
// limits (days, budget) and a candidate space: clusters and/or device types,
// device counts in powers of two, strategies, precisions and micro-batches.
// plan_candidates() expands the space into scenario points (through the
// scenario parser, so they mean exactly what a scenario file would), the
// simulator prices them on all cores, and evaluate_plan() keeps the feasible
// ones (fits in memory, runs, time to train <= days, cost <= budget), picks the
// fastest and the cheapest and explains each choice: why it wins and what
// stops it from going further (memory, communication share, cost, time).
//
// Thread-safety: pure functions except run_plan (runs the simulator).
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/yaml_reader.hpp"
#include "report/analysis.hpp"
#include "sim/scenario.hpp"

namespace dptwin::report {

struct PlanRequest {
  std::string model;                             // GPT-2 preset (`dptwin list models`); required
  double tokens = 0;                             // tokens to train; required, > 0
  std::optional<double> max_days;                // time-to-train limit, days (> 0)
  std::optional<double> budget_usd;              // cost-to-train limit, USD (> 0)
  std::vector<std::string> device_types;         // catalog names; empty = each cluster's own device
  std::vector<std::string> clusters;             // presets or files; empty = a preset per device type, or
                                                 // dgx-a100, dgx-h100, hgx-h200, dgx1-v100
  int min_devices = 1;                           // smallest count tried (rounded up to a power of two)
  int max_devices = 1024;                        // largest count tried (also capped by each cluster)
  std::vector<std::string> strategies;           // default: dps, horovod, dps+amp, horovod+amp
  std::vector<std::string> precisions;           // fp32, fp16, bf16; default all (bf16 only where supported)
  std::vector<int> micro_batches;                // default: 1, 2, 4, 8, 16
  std::optional<double> price_per_device_hour;   // USD; default: the device catalog's price
  int top = 10;                                  // rows of the top-N table
};

// The defaults above filled in and every field validated (InputError naming the flag/key).
PlanRequest normalized(PlanRequest r);

// A plan YAML: keys model, tokens, days, budget, device_types, clusters,
// min_devices, max_devices, strategies, precision, micro_batch,
// price_per_device_hour, top (lists may also be comma-separated text).
PlanRequest parse_plan(const YamlNode& root);
PlanRequest load_plan_file(const std::string& path);

// The candidate points of a (normalized) request.
std::vector<sim::PointSpec> plan_candidates(const PlanRequest& request);

struct PlanResult {
  std::vector<ReportPoint> points;       // every candidate, priced
  std::vector<std::string> cluster_of;   // cluster name per point
  std::vector<std::string> verdict;      // per point: "" = feasible, else "out of memory", "infeasible",
                                         // "exceeds N days", "exceeds budget", "no price"
  std::vector<size_t> feasible;          // feasible points, fastest first (ties: cheaper)
  std::optional<size_t> fastest, cheapest;
  std::string fastest_why, cheapest_why; // explanations in sentences
  std::string no_plan;                   // when nothing is feasible: why, with the nearest misses
  size_t oom = 0, infeasible = 0, too_slow = 0, over_budget = 0, no_price = 0;
  double seconds = 0;                    // wall time of the search
};

// Applies the constraints to priced candidates and explains the choices (pure).
PlanResult evaluate_plan(const PlanRequest& request, const std::vector<sim::PointSpec>& specs,
                         std::vector<sim::PointResult> results);

// plan_candidates + sim::simulate_all + evaluate_plan.
PlanResult run_plan(const PlanRequest& request, int threads = 0,
                    const std::function<void(size_t, size_t)>& progress = {});

// The human-readable answer: request, search summary, fastest and cheapest with
// their explanations, and the top-N feasible table.
void write_plan(std::ostream& out, const PlanRequest& request, const PlanResult& result);

}  // namespace dptwin::report
