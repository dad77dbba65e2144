// apps/validate_commands.hpp — `dptwin calibrate` and `dptwin validate` (thin layers over validate/).
//
//   dptwin calibrate [--backend gloo|mpi] [--ranks 1,2,4] [--out profile.yaml] [--threads N]
//                    [--cluster localhost-cpu|FILE] [--input RAW.json ...] [--quick] [--passes N]
//   dptwin validate  [MATRIX.yaml] [--profile P] [--out DIR] [--predict-only]
//
// Each command declares its flags once in an OptionRow table (apps/cli_table.hpp).
// Usage from a main: `ValidateCommands vc(app);` before app.parse(), then
// `if (vc.parsed()) return vc.run();`.
#pragma once

#include <string>
#include <vector>

#include "apps/cli_table.hpp"

namespace dptwin::apps {

struct CalibrateArgs {
  std::string backend = "gloo";
  std::string ranks = "1,2,4";
  std::string out = "profile.yaml";
  std::string raw_dir;
  std::string cluster = "localhost-cpu";
  std::string microbench;
  std::string inputs;          // comma-separated raw documents to refit instead of running
  std::string netns_matrix;    // a matrix YAML whose `netns` section says where the ranks run
  int threads = 1;
  std::string bind;            // "" = validate::CalibrateOptions' default, or the --netns matrix's `bind`
  double budget_s = 0.15;
  std::string max_bytes = "256 MiB";
  bool quick = false;
  int passes = 1;
  int steal_retries = 2;
  int comm_rounds = 3;
  int nice = -20;
};
const std::vector<OptionRow<CalibrateArgs>>& calibrate_table();
int run_calibrate(const CalibrateArgs& a);

struct ValidateArgs {
  std::string file;            // matrix YAML ("" = the built-in default matrix)
  std::string profile;
  std::string out_dir = "validation";
  std::string exec_binary;
  bool predict_only = false;
  bool drift_compensation = false;
  bool run_states = false;     // --run-states: speed states read during the validation
  std::string microbench;      // dptwin-microbench for the speed probe ("" = next to dptwin)
  std::string at_speed_of;     // predict-only: at this profile's speed_reference and speed_states
  double case_timeout_s = 900;
  int nice = -20;
  std::string trace;           // side-by-side trace of one case ("" = none)
  int trace_case = 1;          // 1-based, as in the progress lines
  std::string replay;          // an earlier validation.json to predict again ("" = run the cases)
};
const std::vector<OptionRow<ValidateArgs>>& validate_table();
// Exit 0 when every case ran (whatever the error figures), 1 when some case failed.
int run_validate(const ValidateArgs& a);

// Registers both subcommands on `app`.
class ValidateCommands {
 public:
  explicit ValidateCommands(CLI::App& app);
  bool parsed() const;
  int run() const;

 private:
  CalibrateArgs cargs_;
  ValidateArgs vargs_;
  CLI::App* calibrate_ = nullptr;
  CLI::App* validate_ = nullptr;
};

}  // namespace dptwin::apps
