#include "apps/validate_commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/host_load.hpp"
#include "validate/calibrate.hpp"
#include "validate/validation.hpp"

namespace dptwin::apps {

namespace fs = std::filesystem;

const std::vector<OptionRow<CalibrateArgs>>& calibrate_table() {
  static const std::vector<OptionRow<CalibrateArgs>> t = {
      {"--backend", "communication backend measured", &CalibrateArgs::backend, {"gloo", "mpi"}},
      {"--ranks", "rank counts: 1 = compute microbenchmarks, >1 = collectives at that count", &CalibrateArgs::ranks},
      {"-o,--out", "profile YAML written", &CalibrateArgs::out},
      {"--raw-dir", "directory of the raw microbenchmark JSON (default: <out stem>.raw/)", &CalibrateArgs::raw_dir},
      {"--cluster", "topology the collective fit prices on (preset or cluster YAML)", &CalibrateArgs::cluster},
      {"--microbench", "path of dptwin-microbench (default: next to dptwin)", &CalibrateArgs::microbench},
      {"--input", "refit these raw microbenchmark JSON files (comma-separated) instead of running; several compute documents (or comm documents of one rank count) are merged as the passes of --passes are", &CalibrateArgs::inputs},
      {"--netns", "a matrix YAML whose `netns` section places the ranks in network namespaces", &CalibrateArgs::netns_matrix},
      {"--threads", "intra-op threads per rank", &CalibrateArgs::threads},
      {"--bind", "bind each microbenchmark rank to its own cores (auto: while ranks x threads fit the cores, as mpirun "
                 "does by default; core: always; none), as dptwin exec --bind (default: auto, or the --netns matrix's "
                 "`bind`); validate with the matrix's `bind` alike", &CalibrateArgs::bind, {"auto", "core", "none"}},
      {"--budget-s", "seconds of repetitions per microbenchmark case", &CalibrateArgs::budget_s},
      {"--max-bytes", "largest collective message (4 KiB .. this, x4 steps)", &CalibrateArgs::max_bytes},
      {"--quick", "a few shapes only (smoke tests)", &CalibrateArgs::quick},
      {"--passes", "run the microbenchmarks this many times and fit the median of each figure", &CalibrateArgs::passes},
      {"--steal-retries", "measure a run again (at most this many times) when the hypervisor stole over 2% of the CPU "
                          "time during it", &CalibrateArgs::steal_retries},
      {"--comm-rounds", "rounds of every communication probe within one comm run (a figure is the median over "
                        "them)", &CalibrateArgs::comm_rounds},
      {"--nice", "scheduling priority of the measured processes (-20: highest; needs root, else kept)", &CalibrateArgs::nice},
  };
  return t;
}

const std::vector<OptionRow<ValidateArgs>>& validate_table() {
  static const std::vector<OptionRow<ValidateArgs>> t = {
      {"file", "validation matrix YAML (default: the built-in localhost matrix)", &ValidateArgs::file},
      {"-p,--profile", "calibrated profile YAML (from dptwin calibrate)", &ValidateArgs::profile},
      {"-o,--out", "output directory: validation.json, validation.txt, runs/", &ValidateArgs::out_dir},
      {"--exec", "path of dptwin-exec (default: as dptwin exec finds it)", &ValidateArgs::exec_binary},
      {"--predict-only", "do not run: print the predictions only", &ValidateArgs::predict_only},
      {"--drift-compensation", "run a speed probe before each run and predict it at the speed measured then",
       &ValidateArgs::drift_compensation},
      {"--run-states", "probe the machine's speed before runs spread over the validation (at most 40 probes) and "
                       "predict every case at the spread of speeds read then (instead of during the calibration), "
                       "its collectives at the communication state its runs read", &ValidateArgs::run_states},
      {"--microbench", "path of dptwin-microbench for the speed probe (default: next to dptwin)", &ValidateArgs::microbench},
      {"--at-speed-of", "with --predict-only: predict at the machine speed, spread of speeds and communication "
                        "state another profile was measured at (compares two calibrations at one state of the machine)",
       &ValidateArgs::at_speed_of},
      {"--case-timeout-s", "kill a case after this many seconds", &ValidateArgs::case_timeout_s},
      {"--nice", "scheduling priority of the measured processes (-20: highest; needs root, else kept)", &ValidateArgs::nice},
      {"--trace", "write the measured and predicted timelines of one case side by side (Chrome trace JSON)",
       &ValidateArgs::trace},
      {"--trace-case", "the case --trace shows (1-based, as numbered in the progress lines)", &ValidateArgs::trace_case},
      {"--replay", "run nothing: take every case's measurements from this earlier validation.json of the same "
                   "matrix and predict them again from --profile, at the run states it recorded", &ValidateArgs::replay},
  };
  return t;
}

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

void log_line(const std::string& s) { std::cerr << s << std::endl; }

// Measurements on a shared machine: run (and let every child inherit) a high
// scheduling priority so that other work on the machine disturbs them less.
void raise_priority(int nice) {
  if (nice < -20 || nice > 19) throw InputError({"command line", 0, 0}, "--nice", "must be within -20..19");
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && now == nice) return;
  if (::setpriority(PRIO_PROCESS, 0, nice) != 0)
    std::cerr << fmt::format("note: cannot set scheduling priority {} ({}); measuring at {}\n", nice,
                             std::strerror(errno), now);
}

// A profile file's figures (on the datasheet defaults), for checks before any
// run; errors name the file and say which argument it came from (`what`).
sim::DeviceProfile read_profile(const std::string& path, const char* what) {
  sim::DeviceProfile p;
  try {
    sim::apply_profile_document(load_yaml_file(path), p);
  } catch (const InputError& e) {
    throw e.with_context(fmt::format("while reading {} '{}'", what, path));
  }
  return p;
}

}  // namespace

int run_calibrate(const CalibrateArgs& a) {
  validate::CalibrateOptions o;
  o.backend = a.backend;
  o.ranks.clear();
  for (const auto& r : split(a.ranks)) {
    int v = 0;
    try {
      v = std::stoi(r);
    } catch (...) {
      v = 0;
    }
    if (v < 1 || v > 64) throw InputError({"command line", 0, 0}, "--ranks", fmt::format("bad rank count '{}'", r));
    o.ranks.push_back(v);
  }
  o.out = a.out;
  o.raw_dir = a.raw_dir;
  o.cluster = a.cluster;
  o.microbench = a.microbench;
  o.inputs = split(a.inputs);
  o.threads = a.threads;
  if (!a.bind.empty()) o.bind = a.bind;
  if (a.threads < 1) throw InputError({"command line", 0, 0}, "--threads", "must be >= 1");
  if (!(a.budget_s > 0)) throw InputError({"command line", 0, 0}, "--budget-s", "must be > 0");
  o.budget_s = a.budget_s;
  o.max_bytes = parse_bytes(a.max_bytes, "--max-bytes").value();
  if (o.max_bytes < 4096) throw InputError({"command line", 0, 0}, "--max-bytes", "must be at least 4 KiB");
  o.quick = a.quick;
  if (a.passes < 1 || a.passes > 20) throw InputError({"command line", 0, 0}, "--passes", "must be 1..20");
  if (a.passes > 1 && !a.inputs.empty())
    throw InputError({"command line", 0, 0}, "--passes", "--input refits documents already measured; drop --passes");
  o.passes = a.passes;
  if (a.steal_retries < 0 || a.steal_retries > 10)
    throw InputError({"command line", 0, 0}, "--steal-retries", "must be 0..10");
  o.steal_retries = a.steal_retries;
  if (a.comm_rounds < 1 || a.comm_rounds > 20) throw InputError({"command line", 0, 0}, "--comm-rounds", "must be 1..20");
  o.comm_rounds = a.comm_rounds;
  if (!a.netns_matrix.empty()) {
    validate::ValidationMatrix m = validate::load_matrix(a.netns_matrix);
    if (m.netns.namespaces.empty()) throw InputError({"command line", 0, 0}, "--netns", "the matrix has no netns section");
    o.emulated = true;
    o.netns = m.netns;
    o.netns.port += 700;  // keep clear of the ports validate uses
    if (a.bind.empty()) o.bind = m.bind;  // measured as that matrix's runs will be
  }
  o.log = log_line;
  if (o.inputs.empty()) raise_priority(a.nice);
  validate::CalibrateResult r = validate::run_calibration(o);
  std::cout << r.yaml;
  std::cerr << fmt::format("profile written to {} (fit diagnostics: {})\n", a.out,
                           fs::path(a.out).replace_extension(".fit.json").string());
  return 0;
}

namespace {

// `--replay FILE`: the earlier validation's document, checked before anything
// is predicted; it may not be the file this validation writes.
nlohmann::json replayed_validation(const ValidateArgs& a) {
  const SourceLocation cl{"command line", 0, 0};
  if (a.predict_only || a.run_states || a.drift_compensation || !a.trace.empty() || !a.at_speed_of.empty())
    throw InputError(cl, "--replay",
                     "--replay predicts recorded runs: drop --predict-only, --run-states, --drift-compensation, "
                     "--trace and --at-speed-of");
  if (!path_exists(a.replay)) throw InputError(cl, "--replay", fmt::format("'{}' not found", a.replay));
  const fs::path written = fs::path(a.out_dir) / "validation.json";
  std::error_code ec;
  if (!a.out_dir.empty() && fs::equivalent(a.replay, written, ec))
    throw InputError(cl, "--out",
                     fmt::format("the replay would overwrite '{}', the validation it replays: choose another --out",
                                 a.replay));
  std::ifstream f(a.replay);
  nlohmann::json doc = nlohmann::json::parse(f, nullptr, false);
  if (doc.is_discarded())
    throw InputError({a.replay, 0, 0}, "validation.json", "not valid JSON (expected dptwin validate's validation.json)");
  if (!doc.is_object() || !doc.contains("cases") || !doc.at("cases").is_array())
    throw InputError({a.replay, 0, 0}, "cases", "missing: not a validation.json written by dptwin validate");
  if (doc.contains("run_state_readings")) {
    const nlohmann::json& r = doc.at("run_state_readings");
    if (!r.is_array()) throw InputError({a.replay, 0, 0}, "run_state_readings", "must be a list of probe readings");
    for (size_t i = 0; i < r.size(); ++i) {
      const nlohmann::json& x = r[i];
      if (!x.is_object() || !x.contains("class") || !x.at("class").is_string() || !x.contains("s") ||
          !x.at("s").is_number() || (x.contains("form") && !x.at("form").is_string()) ||
          (x.contains("cpu") && !x.at("cpu").is_number_integer()))
        throw InputError({a.replay, 0, 0}, fmt::format("run_state_readings[{}]", i),
                         "a reading is {class: <probe class>, s: <seconds>[, cpu, form]}");
    }
  }
  return doc;
}

}  // namespace

int run_validate(const ValidateArgs& a) {
  validate::ValidationMatrix m = a.file.empty()
                                     ? validate::parse_matrix(load_yaml_string(validate::default_matrix_text(),
                                                                               "<built-in localhost-default>"),
                                                              ".")
                                     : validate::load_matrix(a.file);
  if (!a.profile.empty() && !path_exists(a.profile))
    throw InputError({"command line", 0, 0}, "--profile", fmt::format("profile '{}' not found", a.profile));
  // Read once, before any run: its errors are located, its figures checked below.
  const sim::DeviceProfile profile = a.profile.empty() ? sim::DeviceProfile{} : read_profile(a.profile, "profile");
  validate::ValidationOptions o;
  o.profile = a.profile.empty() ? "" : fs::absolute(a.profile).string();
  o.out_dir = a.out_dir;
  o.exec_binary = a.exec_binary;
  o.predict_only = a.predict_only;
  if (!a.replay.empty()) {
    o.replay = replayed_validation(a);
    const nlohmann::json& was = o.replay.contains("matrix") ? o.replay.at("matrix") : nlohmann::json();
    if (was.is_string() && was.get<std::string>() != m.name)
      std::cerr << fmt::format("warning: '{}' validated matrix '{}', this is '{}': cases are matched by label\n",
                               a.replay, was.get<std::string>(), m.name);
  }
  if (a.run_states && a.drift_compensation)
    throw InputError({"command line", 0, 0}, "--run-states", "choose --run-states or --drift-compensation, not both");
  if (a.drift_compensation && !a.profile.empty()) {
    const std::string mb = validate::find_microbench_binary(a.microbench);
    if (path_exists(mb)) o.speed_probe = mb;
    else std::cerr << "note: dptwin-microbench not found: predictions are not drift-compensated\n";
  }
  if (a.run_states) {
    const SourceLocation cl{"command line", 0, 0};
    if (a.predict_only) throw InputError(cl, "--run-states", "--run-states reads the machine during the runs; drop --predict-only");
    if (a.profile.empty()) throw InputError(cl, "--run-states", "--run-states needs --profile");
    if (profile.speed_reference.empty() || profile.speed_states.empty())
      throw InputError(cl, "--run-states",
                       fmt::format("profile '{}' records no speed_reference and speed_states (calibrate again)", a.profile));
    const std::string mb = validate::find_microbench_binary(a.microbench);
    if (!path_exists(mb)) throw InputError(cl, "--run-states", fmt::format("dptwin-microbench not found at '{}'", mb));
    o.states_probe = mb;
  }
  if (!a.at_speed_of.empty()) {
    if (!a.predict_only)
      throw InputError({"command line", 0, 0}, "--at-speed-of", "--at-speed-of applies to --predict-only");
    if (a.profile.empty()) throw InputError({"command line", 0, 0}, "--at-speed-of", "--at-speed-of needs --profile");
    if (!path_exists(a.at_speed_of))
      throw InputError({"command line", 0, 0}, "--at-speed-of", fmt::format("profile '{}' not found", a.at_speed_of));
    const sim::DeviceProfile other = read_profile(a.at_speed_of, "--at-speed-of profile");
    if (other.speed_reference.empty())
      throw InputError({"command line", 0, 0}, "--at-speed-of",
                       fmt::format("profile '{}' records no speed_reference", a.at_speed_of));
    o.fixed_speed = other.speed_reference;
    o.fixed_states = other.speed_states;
    o.fixed_comm_state = other.comm_reference;
  }
  o.case_timeout_s = a.case_timeout_s;
  if (!a.trace.empty()) {
    if (a.predict_only)
      throw InputError({"command line", 0, 0}, "--trace", "--trace needs a measured run; drop --predict-only");
    if (a.trace_case < 1 || a.trace_case > static_cast<int>(m.cases.size()))
      throw InputError({"command line", 0, 0}, "--trace-case",
                       fmt::format("case {} does not exist: the matrix has cases 1..{}", a.trace_case, m.cases.size()));
    o.trace_path = a.trace;
    o.trace_case = a.trace_case - 1;
  }
  o.log = log_line;
  if (a.profile.empty()) std::cerr << "note: no --profile: predictions use datasheet defaults (run dptwin calibrate)\n";
  if (!a.predict_only && a.replay.empty()) raise_priority(a.nice);
  // A profile measured with its ranks run otherwise (bound vs unbound,
  // threads, backend) prices collectives, lags and core sharing as they were
  // then: say so before the runs, and keep it with the results.
  std::vector<std::string> mismatches;
  if (!a.profile.empty()) {
    mismatches = validate::calibration_mismatches(profile.calibrated_with, m);
    if (!mismatches.empty())
      std::cerr << fmt::format("warning: profile '{}' was calibrated with its ranks run otherwise than {} runs them "
                               "({}); its collective, lag and sharing figures are those of its calibration's "
                               "conditions: calibrate with the matrix's settings (dptwin calibrate --threads, --bind, "
                               "--backend) for predictions of these runs\n",
                               a.profile, m.file.empty() ? std::string("the built-in matrix") : "'" + m.file + "'",
                               fmt::join(mismatches, "; "));
  }
  nlohmann::json run_state_readings;
  auto cases = validate::run_validation(m, o, &run_state_readings);
  auto s = validate::summarize(cases, m.ranking_tie_pct);
  s.profile_mismatches = mismatches;
  if (s.host_steal_pct > kStealWarnPct)
    std::cerr << fmt::format("warning: the hypervisor took {:.1f}% of this machine's CPU time during the runs "
                             "(/proc/stat steal): measured times follow that load\n", s.host_steal_pct);
  const std::string table = validate::to_table(cases, s);
  std::cout << table;
  if (!a.out_dir.empty()) {
    fs::create_directories(a.out_dir);
    nlohmann::json doc = validate::to_json(m.name, a.profile, cases, s, m.ranking_tie_pct, run_state_readings);
    // A replay's measurements are the replayed validation's: say so, lest they count twice.
    if (!a.replay.empty()) doc["replay_of"] = fs::absolute(a.replay).string();
    std::ofstream(fs::path(a.out_dir) / "validation.json") << doc.dump(1) << "\n";
    std::ofstream(fs::path(a.out_dir) / "validation.txt") << table;
    std::cerr << fmt::format("results in {}/validation.json and validation.txt\n", a.out_dir);
  }
  for (const auto& c : cases)
    if (c.status != "ok") return 1;
  return 0;
}

ValidateCommands::ValidateCommands(CLI::App& app) {
  calibrate_ = app.add_subcommand("calibrate", "run microbenchmarks on this machine and fit a device profile YAML");
  register_options(*calibrate_, cargs_, calibrate_table());
  validate_ = app.add_subcommand("validate", "run a matrix of real trainings, predict them, report the error");
  register_options(*validate_, vargs_, validate_table());
}

bool ValidateCommands::parsed() const { return calibrate_->parsed() || validate_->parsed(); }

int ValidateCommands::run() const {
  if (calibrate_->parsed()) return run_calibrate(cargs_);
  if (validate_->parsed()) return run_validate(vargs_);
  return kExitInputError;
}

}  // namespace dptwin::apps
