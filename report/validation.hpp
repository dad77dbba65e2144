// report/validation.hpp — the validation result file that reports read.
//
// Schema "dptwin-validation/1" (JSON; written by `dptwin validate`, read by
// `dptwin report --validation FILE`). Documented in report/README.md:
//
//   { "schema": "dptwin-validation/1",          # optional; any name containing "validation"
//     "profile": "name or path",                 # optional: the calibration profile used
//     "cases": [ { "label": "dps 2 ranks fp32",  # text naming the case (default: its label fields)
//                  "labels": {"strategy": "dps", "ranks": 2, ...},   # optional label fields (or "params");
//                                                # without either, the case's other scalar fields
//                  "status": "ok",               # optional; a case not "ok", or with a null
//                                                # measured_step_s, is counted as not measured
//                  "predicted_step_s": 0.123,    # required, seconds, > 0
//                  "measured_step_s": 0.130,     # required, seconds, > 0
//                  "error_pct": -5.4 }, ... ],   # optional: 100 (predicted - measured) / measured
//                                                # (other case fields, e.g. breakdowns, are ignored)
//     "summary": { "mape_pct": 4.2,              # optional: mean |error_pct|
//                  "worst_pct": 9.1,             # optional: max |error_pct|
//                  "kendall_tau": 0.87 } }       # optional: rank correlation predicted vs measured
//
// Missing derived fields are computed from the cases (summary figures that are
// not numbers are recomputed too); unknown keys are ignored (so producers may
// add fields), but a case without numeric step times is an InputError naming the key.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dptwin::report {

struct ValidationCase {
  std::string label;
  std::vector<std::pair<std::string, std::string>> params;  // label fields, values as text
  double predicted_step_s = 0;
  double measured_step_s = 0;
  double error_pct = 0;  // 100 (predicted - measured) / measured
};

struct ValidationSummary {
  double mape_pct = 0;                // mean absolute percentage error
  double worst_pct = 0;               // largest absolute percentage error
  std::optional<double> kendall_tau;  // nullopt with fewer than two cases
};

struct ValidationResult {
  std::string profile;
  std::vector<ValidationCase> cases;  // measured cases
  size_t not_measured = 0;            // cases that did not run or have no measurement
  ValidationSummary summary;
};

// Parses the JSON text (`name` is used in messages). Throws InputError.
ValidationResult parse_validation(const std::string& json_text, const std::string& name);
ValidationResult load_validation(const std::string& path);

// Kendall's tau-a between two equally long sequences (concordant - discordant
// pairs over all pairs); nullopt with fewer than two values.
std::optional<double> kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dptwin::report
