// sim/output.hpp — writers for scenario results: table, JSON, CSV, Chrome trace.
//
//   write_table         aligned, human-readable; one row per point (the CLI default)
//   write_json          every field of every PointResult, units in key names
//   write_csv           one flat row per point, a header line (pandas-readable)
//   write_chrome_trace  Chrome trace-event JSON (chrome://tracing, Perfetto)
//
// The JSON and CSV schemas are documented in scenarios/README.md ("Outputs").
// Output is deterministic: identical results give byte-identical text (set
// OutputOptions::wall_time = false to also drop the simulator's wall time).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/results.hpp"
#include "sim/scenario.hpp"

namespace dptwin::sim {

// What is being reported (usually taken from the Scenario).
struct ReportHeader {
  std::string scenario;     // scenario name
  std::string description;  // one line
  std::string file;         // where it came from ("" when unknown)
};
ReportHeader header_of(const Scenario& sc);

struct OutputOptions {
  // Include the simulator's wall-clock time per point (JSON `wall_seconds`, CSV
  // column, table footer). It is the only field that changes between identical
  // runs; false writes null / leaves it out.
  bool wall_time = true;
};

void write_table(std::ostream& out, const ReportHeader& h, const std::vector<PointResult>& results,
                 const OutputOptions& opt = {});

// {scenario, description, file, points: [...]}; keys in a fixed order.
nlohmann::ordered_json to_json(const ReportHeader& h, const std::vector<PointResult>& results,
                               const OutputOptions& opt = {});
nlohmann::ordered_json point_to_json(const PointResult& r, size_t index, const OutputOptions& opt = {});
void write_json(std::ostream& out, const ReportHeader& h, const std::vector<PointResult>& results,
                const OutputOptions& opt = {});

// The CSV columns, in order (parameter columns come first and depend on the results).
std::vector<std::string> csv_columns(const std::vector<PointResult>& results, const OutputOptions& opt = {});
void write_csv(std::ostream& out, const std::vector<PointResult>& results, const OutputOptions& opt = {});

// Chrome trace-event JSON of the points that carry a timeline. With `only`
// set, just that point (processes "device N", "links"); otherwise every point
// with a timeline, process names prefixed "p<index> ". Writes an empty
// traceEvents list when no selected point has a timeline.
nlohmann::json chrome_trace(const std::vector<PointResult>& results, std::optional<size_t> only = std::nullopt);
void write_chrome_trace(std::ostream& out, const std::vector<PointResult>& results,
                        std::optional<size_t> only = std::nullopt);

}  // namespace dptwin::sim
