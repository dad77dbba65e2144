// report/analysis.hpp — what a capacity-planning report says about a set of results.
//
//   ReportPoint          a simulated point plus what the report needs around it
//                        (nodes spanned, price, step time with slower links)
//   group_points         splits points by model, cluster and device type
//   series_name          a point's curve in a chart (strategy + other varying labels)
//   recommend            fastest, cheapest and least link-sensitive point, with reasons
//   measure_sensitivity  re-simulates multi-node points with inter-node bandwidth halved
//
// recommend() and the helpers are pure functions of plain structs (unit-tested on
// hand-made results); measure_sensitivity() runs the simulator.
//
// Thread-safety: pure functions, except measure_sensitivity (runs sim::simulate_all).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/results.hpp"
#include "sim/scenario.hpp"

namespace dptwin::report {

struct ReportPoint {
  sim::PointResult result;
  std::string device_type;              // catalog name of the device
  int micro_batch = 1;                  // samples per device per micro-step
  int accumulation = 1;                 // micro-steps per optimizer step
  std::string precision;                // "fp32", "O2 bf16", ...
  int nodes = 1;                        // nodes the point spans
  double inter_node_gbps = 0;           // NIC port speed between nodes, Gb/s (0 = unknown / one node)
  double price_per_device_hour = 0;     // USD (0 = unknown)
  std::optional<double> halved_step_s;  // step time with inter-node bandwidth halved (multi-node ok points)

  // Relative slowdown (%) with halved inter-node bandwidth: 0 for a point on one
  // node, nullopt when not measured or not timed.
  std::optional<double> slowdown_pct() const;
};

// A label of the point ("" when absent).
std::string param(const sim::PointResult& r, const std::string& key);

// One model on one cluster with one device type: the unit of a report section.
struct Group {
  std::string title;            // "gpt2-xl on dgx-a100 (a100-sxm4-80gb)"
  std::vector<size_t> members;  // indices into the points, in input order
};
std::vector<Group> group_points(const std::vector<ReportPoint>& points);

// The curve a point belongs to: its strategy plus every other label that varies
// within `members`, except model, cluster, device_type, devices and note
// ("dps+amp mb=4", "dps bucket_cap=25 MiB").
std::string series_name(const std::vector<ReportPoint>& points, const std::vector<size_t>& members, size_t index);

// "8 x a100-sxm4-80gb, dps+amp, micro-batch 4, O2 bf16" — a configuration in words.
std::string describe_config(const ReportPoint& p);

struct Recommendation {
  std::string kind;              // "fastest", "cheapest", "least sensitive to slower links"
  std::optional<size_t> index;   // into the points; nullopt when nothing qualifies
  std::string config;            // describe_config of the point ("-" when none)
  std::string metric;            // the deciding figure, with its unit
  std::string reason;            // why this one and what limits it, in sentences
};

// Fastest = highest tokens/s; cheapest = lowest cost per million tokens (needs a
// price); least sensitive = smallest slowdown with halved inter-node bandwidth
// among points spanning several nodes (ties: higher throughput). Only points
// with status ok count. Always returns the three kinds, in that order.
std::vector<Recommendation> recommend(const std::vector<ReportPoint>& points, const std::vector<size_t>& members);

// Base inter-node (NIC port) bandwidth of a point's cluster in Gb/s: the
// scenario's override when set, else read from the built topology (NIC -> switch
// link). 0 when the cluster has no network (one node).
double inter_node_gbps(const sim::PointSpec& spec);

// Builds ReportPoints from specs and results (nodes, price, base bandwidth) and,
// when `sensitivity` is set, re-simulates every ok point spanning more than one
// node with ClusterSpec::inter_node_bandwidth halved (threads: 0 = all cores).
std::vector<ReportPoint> make_report_points(const std::vector<sim::PointSpec>& specs,
                                            std::vector<sim::PointResult> results, bool sensitivity,
                                            int threads = 0);

// Formatting shared by the report writers.
std::string format_duration(double seconds);  // "42 s", "3.5 h", "12.3 days"
std::string format_usd(double usd);           // "$0.012", "$1,234", "$1.2M"
std::string format_rate(double tokens_per_s); // "1.23M tokens/s"
std::string format_count(double n);           // "30B", "1.5T", "250M", "12k", "512"

}  // namespace dptwin::report
