// validate/validation.hpp — run a validation matrix for real, predict it, compare.
//
// For every case of a ValidationMatrix: dptwin-exec runs it (the exec launcher
// forks the ranks; emulated clusters start each rank inside its network
// namespace) and writes its result JSON; the simulator predicts the same
// configuration from a calibrated profile on the matrix's cluster. The report
// holds per-case predicted vs measured step time and breakdown, the error,
// and the summary (MAPE, worst case, Kendall tau of the strategy ranking within
// each configuration).
//
// JSON schema (read by `dptwin report --validation`; keep the field names):
//   {matrix, profile, cases: [{labels: {model, strategy, ranks, precision,
//    micro_batch, seq_len}, label, predicted_step_s, measured_step_s, error_pct,
//    predicted_breakdown: {compute_s, exposed_comm_s, hidden_comm_s, optimizer_s,
//    overhead_s}, measured_breakdown: {forward_s, backward_s, comm_s, wait_s,
//    optimizer_s, data_s}, measured_p10_s, measured_p90_s, status}],
//    summary: {cases, mape_pct, worst_pct, worst_case, kendall_tau, concordant,
//    discordant, ties, ties_unordered, discordant_band_only, ranking_correct,
//    ranking_tie_pct, host_steal_pct}}; per case also measured_rounds_s (each
//    round's median), host_steal_pct and host_steal_rounds_pct; with drift
//    compensation or run states, per case speed_ratio and
//    predicted_uncompensated_step_s, and in the summary compensated,
//    mape_uncompensated_pct, worst_uncompensated_pct; summary.components:
//    [{group, cases, step_error_median_pct, compute_error_median_pct,
//    rest_diff_median_ms}] (see ValidationSummary::components); with run
//    states, run_state_readings: [{class, s, cpu, form}] (the probes'
//    readings, what `--replay` prices the cases at again).
//
// Thread-safety: run_validation forks processes; call from one thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exec/process.hpp"
#include "sim/scenario.hpp"
#include "validate/matrix.hpp"

namespace dptwin::validate {

struct CaseOutcome {
  ValidationCase c;
  std::string status = "ok";          // ok | failed (exec failed; no error figures)
  std::string message;
  double predicted_step_s = 0;
  double measured_step_s = 0;
  double measured_p10_s = 0, measured_p90_s = 0;
  nlohmann::json predicted_breakdown = nlohmann::json::object();
  // Drift compensation: the speed probe's ratios now / at calibration
  // (matmul, elementwise, dispatch) the prediction was scaled by, and the
  // prediction without them; null when not compensated.
  nlohmann::json speed = nullptr;
  double predicted_uncompensated_step_s = 0;
  nlohmann::json measured_breakdown = nlohmann::json::object();
  // Each round's median step time (ascending); empty for a single round.
  std::vector<double> measured_rounds_s;
  // Percent of CPU time the hypervisor stole during the reported run, and
  // during each round (in the order of measured_rounds_s); -1: unknown.
  double host_steal_pct = -1;
  std::vector<double> host_steal_rounds_pct;
  // The host's communication state around each run (exec's 4 KiB allreduce
  // probe before and after training, every round; empty for one rank).
  std::vector<double> comm_state_s;
  // The state the prediction priced the collectives at (seconds; 0: the profile's).
  double comm_state_priced_s = 0;
};

struct ValidationSummary {
  int cases = 0;                 // cases with both figures
  double mape_pct = 0;
  double worst_pct = 0;
  std::string worst_case;
  double kendall_tau = 1;
  int concordant = 0, discordant = 0, ties = 0;
  int ties_unordered = 0;        // of the ties: pairs the rounds do not order (beyond the tie band)
  int discordant_band_only = 0;  // discordant pairs counting only the tie band (rounds ignored)
  bool ranking_correct = true;   // no discordant pair the measurement orders
  double host_steal_pct = -1;    // mean over the runs of the CPU time stolen (core/host_load.hpp); -1: unknown
  // Cases predicted at speeds probed during the validation (drift compensation
  // or --run-states): the same figures for their uncompensated predictions.
  int compensated = 0;
  double mape_uncompensated_pct = 0, worst_uncompensated_pct = 0;
  // Where the error lives, by group of cases ("fp32", "bf16", "x1", "x2", ...,
  // in that order; groups without a case are left out): the median signed
  // error of the step, of the compute (predicted compute_s against measured
  // forward_s + backward_s) and the median of the rest (step less compute
  // and optimizer: communication, waits, overheads), predicted minus measured.
  // Two errors of opposite sign that cancel in the step show here.
  struct ComponentError {
    std::string group;
    int cases = 0;
    double step_pct = 0, compute_pct = 0, rest_ms = 0;
  };
  std::vector<ComponentError> components;
  // How the profile's calibration ran its ranks where the matrix runs them
  // otherwise (calibration_mismatches; set by the caller, empty = they agree
  // or the profile does not record it).
  std::vector<std::string> profile_mismatches;
};

// Significance at which the rounds of two cases must order them (below).
inline constexpr double kRankingSignificance = 0.05;

// Computes the summary of outcomes (pure). Pairs of cases of one configuration
// (same group_key) count as ties when the measurement cannot order them: their
// step times are within `tie_pct` percent, or, with rounds, the rounds do not
// show the faster median's case faster at kRankingSignificance (one-sided
// Mann-Whitney over the rounds' medians: with 5 rounds each, at most 4 of the
// 25 round pairs may go the other way; with 3, none). Run-to-run noise must
// not decide a ranking.
ValidationSummary summarize(const std::vector<CaseOutcome>& cases, double tie_pct);

// `run_state_readings`: the `--run-states` probes' readings (run_validation's
// out-parameter), kept as "run_state_readings" so that `--replay` can price
// the runs at them again; null = none.
nlohmann::json to_json(const std::string& matrix, const std::string& profile, const std::vector<CaseOutcome>& cases,
                       const ValidationSummary& s, double tie_pct,
                       const nlohmann::json& run_state_readings = nullptr);
// A readable table: one row per case, then the summary lines.
std::string to_table(const std::vector<CaseOutcome>& cases, const ValidationSummary& s);

// How a profile's calibration ran its ranks (`calibrated_with`) against how
// the matrix runs them: one line per difference in threads, binding or
// backend ("bind: calibrated auto, the matrix runs none"); empty when they
// agree or the profile does not record it. The cluster is not compared: a
// profile of this host prices an emulated cluster's links from its topology.
std::vector<std::string> calibration_mismatches(const sim::DeviceProfile::Conditions& calibrated,
                                                const ValidationMatrix& m);

// The scenario point the simulator prices for a case: the matrix's cluster,
// the model as dptwin-exec runs it (fused GELU, no dropout), ring allreduce (what
// Gloo and MPI run on CPU tensors), sps as a central
// parameter server, the given profile document applied (name "" = defaults).
sim::PointSpec point_for_case(const ValidationMatrix& m, const ValidationCase& c, const std::string& profile_path);

// dptwin-exec arguments for a case (without the binary; --out appended by the caller).
std::vector<std::string> exec_args(const ValidationMatrix& m, const ValidationCase& c);

// `dptwin-microbench --mode speed` processes (binary), one per output path,
// bound as that many ranks of the matrix are (m.bind): bound ranks run on the
// cores their probes read, as `dptwin calibrate --bind` reads its suite's
// probes (pass p's suite as rank p). `first_slot` shifts them by that many
// ranks' cores: `--run-states` takes its one-process probes on every core in
// turn, since each core has slow phases of its own (validate/README, gap 10).
std::vector<exec::ProcessSpec> speed_probe_specs(const ValidationMatrix& m, const std::string& binary,
                                                const std::vector<std::string>& out_paths, int first_slot = 0);

struct ValidationOptions {
  std::string profile;        // profile YAML ("" = datasheet defaults)
  std::string out_dir;        // per-case exec results and the report land here
  std::string exec_binary;    // dptwin-exec ("" = find it like `dptwin exec`)
  bool predict_only = false;  // no runs: predictions only (measured fields 0)
  // dptwin-microbench to run `--mode speed` before every run (once with
  // predict_only): each prediction uses the profile at the speed measured then
  // (sim::DeviceProfile::at_speed). "" or a profile without speed_reference: off.
  std::string speed_probe;
  // dptwin-microbench to run `--mode speed` on one process before the runs
  // (`--run-states`; every run, or every k-th so that at most 40 probes run,
  // spread over the whole validation): after the runs, their quick readings'
  // median per class is the machine's level, which moves the profile
  // (sim::DeviceProfile::at_speed), and their spread around it replaces the
  // profile's speed_states (quantiles, as the fit builds them from the
  // compute suite's readings); every case is predicted at them, i.e. at the
  // mixture of the machine's fast and slow states during the validation
  // instead of the one during the calibration. Probes are microbenchmarks: no step time feeds a
  // prediction. Needs runs and a profile with speed states; not with speed_probe.
  // The runs' own comm-state readings (CaseOutcome::comm_state_s), by rank
  // count the median over the validation, then price the collectives
  // (sim::DeviceProfile::at_comm_state) where the profile records its comm state.
  std::string states_probe;
  // predict_only: every prediction at this speed instead (the speed_reference
  // and, where both profiles have them, the speed_states of another profile,
  // `--at-speed-of`): two calibrations compared at one state of the machine.
  sim::SpeedProbe fixed_speed;
  sim::SpeedStates fixed_states;
  // And the other profile's communication state (its comm_reference), where
  // both profiles record one.
  std::vector<std::pair<int, double>> fixed_comm_state;
  // A previous validation's document (its validation.json; null = run the
  // cases): nothing runs, each case takes its measured figures from the
  // document's case of the same label (a case it lacks fails), and the
  // prediction is made again from `profile`, at the run states the document
  // recorded (`run_state_readings` and each case's `comm_state_s`) where it
  // has them, else at the profile's own state. Re-scores a profile, refit or
  // model change against runs already made. Readings must be objects with a
  // string "class" and a number "s" (the app checks it).
  nlohmann::json replay;
  double case_timeout_s = 900;
  // With trace_path set: case trace_case (0-based) is traced in its last round
  // and the measured and predicted timelines are written there side by side
  // (validate/trace_compare.hpp).
  std::string trace_path;
  int trace_case = 0;
  std::function<void(const std::string&)> log;  // progress lines (may be empty)
};

// Runs and predicts every case. Exec failures are recorded per case (status
// "failed"), not thrown. Throws InputError for bad profiles or clusters; a
// replayed document without a case of the matrix fails that case (the app
// checks the document's shape first: apps/validate_commands.cpp).
// `run_state_readings`, where given, receives the `--run-states` readings the
// predictions were priced at, or a replayed document's readings (null when none).
std::vector<CaseOutcome> run_validation(const ValidationMatrix& m, const ValidationOptions& o,
                                        nlohmann::json* run_state_readings = nullptr);

// Reads the measured figures of an exec result JSON into `out`.
void read_exec_result(const nlohmann::json& result, CaseOutcome& out);

}  // namespace dptwin::validate
