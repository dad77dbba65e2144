// report/report.hpp — the capacity-planning report (`dptwin report`).
//
//   build_report   simulates a scenario (with an optional calibration profile and
//                  token budget), re-simulates multi-node points with halved
//                  inter-node bandwidth, reads an optional validation result
//   render_html    one self-contained offline HTML file (inline CSS and SVG; no
//                  scripts, fonts or links to fetch)
//   render_markdown  the same findings as a short Markdown summary
//
// Thread-safety: build_report runs the simulator on a thread pool; render_* are
// pure functions of the ReportData.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "report/analysis.hpp"
#include "report/validation.hpp"
#include "sim/output.hpp"
#include "sim/scenario.hpp"

namespace dptwin::report {

struct ReportOptions {
  std::optional<std::string> profile_path;     // calibration profile YAML (its `device:` section)
  std::optional<std::string> validation_path;  // validation result JSON (report/validation.hpp)
  std::optional<double> token_budget;          // tokens; overrides the scenario's token_budget
  bool sensitivity = true;                     // re-simulate with halved inter-node bandwidth
  int threads = 0;                             // 0 = all cores
  std::string command_line;                    // shown in the report ("how it was made")
};

struct ReportData {
  sim::ReportHeader header;
  std::vector<ReportPoint> points;
  std::vector<Group> groups;
  std::vector<std::vector<Recommendation>> recommendations;  // per group
  std::optional<ValidationResult> validation;
  ReportOptions options;
  double simulate_seconds = 0;  // wall time of the simulations
};

// Applies a profile YAML's `device:` section (sim::apply_profile_yaml) on top of
// every point's device profile and records the path. Throws InputError.
void apply_profile_file(std::vector<sim::PointSpec>& points, const std::string& path);

// `progress(done, total)` is called as points finish (optional).
ReportData build_report(sim::Scenario scenario, const ReportOptions& options,
                        const std::function<void(size_t, size_t)>& progress = {});

std::string render_html(const ReportData& data);
std::string render_markdown(const ReportData& data);

}  // namespace dptwin::report
