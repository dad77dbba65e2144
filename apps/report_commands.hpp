// apps/report_commands.hpp — `dptwin report`, `dptwin sweep` and `dptwin plan` (thin layers over report/).
//
//   dptwin report [SCENARIO] --out report.html [--profile P] [--validation V] [--token-budget T]
//   dptwin sweep  [SCENARIO] [--threads N] [--out DIR] [--format csv|json]     (also under mpirun -np K)
//   dptwin plan   [PLAN.yaml] --model M --tokens T [--days D] [--budget B] [--device-types ...] [--clusters ...]
//
// Each command declares its flags once in an OptionRow table (apps/cli_table.hpp).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/cli_table.hpp"
#include "sim/scenario.hpp"

namespace dptwin::apps {

// A scenario file, or the name of a builtin scenario ("" = the paper scenario).
sim::Scenario load_any_scenario(const std::string& file);
// Writes a file through `writer`; std::runtime_error naming the path on failure.
void write_file(const std::string& path, const std::function<void(std::ostream&)>& writer);

struct ReportArgs {
  std::string file;
  std::string out = "report.html";
  std::string profile;
  std::string validation;
  double token_budget = 0;
  int threads = 0;
  bool no_sensitivity = false;
  bool quiet = false;
};
const std::vector<OptionRow<ReportArgs>>& report_table();
int run_report(const ReportArgs& a, const std::string& command_line);

struct SweepArgs {
  std::string file;
  std::string out_dir;
  std::string format = "csv";
  int threads = 0;
  bool no_wall_time = false;
  bool no_progress = false;
  bool quiet = false;
};
const std::vector<OptionRow<SweepArgs>>& sweep_table();
int run_sweep(const SweepArgs& a);

struct PlanArgs {
  std::string file;
  std::string model;
  double tokens = 0;
  double days = 0;
  double budget = 0;
  std::string device_types;
  std::string clusters;
  int min_devices = 0;
  int max_devices = 0;
  std::string strategies;
  std::string precision;
  std::string micro_batch;
  double price = -1;
  int top = 0;
  int threads = 0;
};
const std::vector<OptionRow<PlanArgs>>& plan_table();
// Exit 0 with a plan, 1 when no configuration is feasible (the message says why).
int run_plan(const PlanArgs& a);

}  // namespace dptwin::apps
