// validate/calibrate.hpp — `dptwin calibrate`: run the microbenchmarks, fit a profile.
//
// Runs dptwin-microbench in compute mode (one process) and in comm mode per
// rank count > 1, once or `passes` times (median of the passes) (Gloo: forked ranks with a file store, or inside
// network namespaces with a TCP store; MPI: through mpirun), keeps the raw
// documents, and fits them with fit_profile() into a profile YAML.
//
// Thread-safety: forks processes; call from one thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "validate/matrix.hpp"
#include "validate/profile_fit.hpp"

namespace dptwin::validate {

struct CalibrateOptions {
  std::string backend = "gloo";            // gloo | mpi
  std::vector<int> ranks{1, 2, 4};         // 1 = the compute run; others: comm runs
  std::string out = "profile.yaml";        // the profile YAML
  std::string raw_dir;                     // raw microbenchmark JSON (default: next to `out`)
  std::string microbench;                  // dptwin-microbench ("" = find it)
  std::string cluster = "localhost-cpu";   // topology the network fit prices collectives on (preset or path)
  std::vector<std::string> inputs;         // reuse these microbenchmark JSON files instead of running
  int threads = 1;
  std::string bind = "auto";               // ranks bound to cores (exec::bind_cpus), as dptwin exec --bind
  double budget_s = 0.15;                  // seconds of repetitions per case
  double max_bytes = 256.0 * 1024 * 1024;  // largest collective message
  bool quick = false;                      // few shapes (tests)
  bool emulated = false;                   // comm runs in network namespaces (netns below)
  NetnsLaunch netns;
  double timeout_s = 1800;
  // Passes of the whole microbenchmark sequence (compute, then comm per rank
  // count), one after another; the fit reads the median of each figure over
  // the passes (median_of_documents), so that one slow minute of a shared
  // machine does not set the profile. Raw documents: compute-pK.json, ...
  int passes = 1;
  // A run (the compute run, or one comm run) during which the hypervisor stole
  // more than kStealWarnPct of the CPU time is measured again, up to this many
  // times (the run's figures follow the host's load, not the machine); the
  // steal of every attempt is in the fit diagnostics (runs_steal_pct).
  int steal_retries = 2;
  // Rounds of every comm probe within one comm run (dptwin-microbench
  // --rounds): a figure is the median over the rounds, each a share of the
  // repetitions, so that it samples the whole run rather than one block.
  int comm_rounds = 3;
  std::function<void(const std::string&)> log;
};

// The element-wise median of documents of one structure: numbers at the same
// place are replaced by their median, objects and arrays are merged member by
// member (an array only where every document's has the same length), and
// anything else (strings, or parts whose structure differs) is the first
// document's. Empty input: null.
nlohmann::json median_of_documents(const std::vector<nlohmann::json>& docs);

struct CalibrateResult {
  FitReport fit;
  std::string yaml;                 // written to options.out
  std::vector<std::string> raw;     // raw document paths
};

// Finds dptwin-microbench: `hint`, $DPTWIN_MICROBENCH, next to the running
// executable's ../exec/microbench/ (build tree) or its own directory, PATH.
std::string find_microbench_binary(const std::string& hint);

CalibrateResult run_calibration(const CalibrateOptions& o);

}  // namespace dptwin::validate
