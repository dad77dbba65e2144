// apps/report_commands.cpp — `dptwin report`, `sweep` and `plan` (see report_commands.hpp).
#include "apps/report_commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "report/planner.hpp"
#include "report/report.hpp"
#include "report/sweep.hpp"
#include "sim/output.hpp"

namespace dptwin::apps {

namespace fs = std::filesystem;

sim::Scenario load_any_scenario(const std::string& file) {
  if (file.empty()) return sim::load_builtin_scenario("paper-hal");
  if (!path_exists(file)) {
    auto names = sim::builtin_scenario_names();
    std::string stem = file.ends_with(".yaml") ? file.substr(0, file.size() - 5) : file;
    if (std::find(names.begin(), names.end(), stem) != names.end()) return sim::load_builtin_scenario(stem);
  }
  return sim::load_scenario(file);
}

void write_file(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  // Parent folders are created; the file appears whole or not at all (temp + rename),
  // so an interrupted run never leaves a truncated result behind.
  std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  std::filesystem::path tmp = target;
  tmp += ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
    writer(out);
    out.close();
    if (!out) throw std::runtime_error(fmt::format("error while writing '{}'", path));
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot write '{}': {}", path, ec.message()));
}

namespace {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

}  // namespace

// ------------------------------------------------------------------ report

const std::vector<OptionRow<ReportArgs>>& report_table() {
  static const std::vector<OptionRow<ReportArgs>> t = {
      {"file", "scenario YAML file, or the name of a builtin scenario (default: the paper scenario, paper-hal)",
       &ReportArgs::file},
      {"-o,--out", "the HTML report to write; a Markdown summary goes next to it (same name, .md)", &ReportArgs::out},
      {"--profile", "calibration profile YAML: its `device:` section applies to every point", &ReportArgs::profile},
      {"--validation", "validation result JSON (schema in report/README.md): adds predicted-vs-measured charts",
       &ReportArgs::validation},
      {"--token-budget", "tokens to train, for time and cost to train (default: the scenario's token_budget)",
       &ReportArgs::token_budget},
      {"-j,--threads", "worker threads (0 = all cores)", &ReportArgs::threads},
      {"--no-sensitivity", "skip re-simulating multi-node points with halved inter-node bandwidth",
       &ReportArgs::no_sensitivity},
      {"-q,--quiet", "print nothing but errors", &ReportArgs::quiet},
  };
  return t;
}

int run_report(const ReportArgs& a, const std::string& command_line) {
  if (a.threads < 0) throw InputError({}, "--threads", "must be >= 0");
  if (a.token_budget < 0) throw InputError({}, "--token-budget", "must be > 0");
  if (a.out.empty()) throw InputError({}, "--out", "an output file is required");
  report::ReportOptions opt;
  if (!a.profile.empty()) opt.profile_path = a.profile;
  if (!a.validation.empty()) opt.validation_path = a.validation;
  if (a.token_budget > 0) opt.token_budget = a.token_budget;
  opt.sensitivity = !a.no_sensitivity;
  opt.threads = a.threads;
  opt.command_line = command_line;
  report::ProgressBar bar(std::cerr, "simulating", !a.quiet && stderr_is_terminal());
  auto data = report::build_report(load_any_scenario(a.file), opt, [&](size_t d, size_t t) { bar.update(d, t); });
  bar.finish();
  fs::path html(a.out);
  if (html.has_parent_path()) fs::create_directories(html.parent_path());
  fs::path md = html;
  md.replace_extension(".md");
  if (md == html) md += ".md";
  write_file(html.string(), [&](std::ostream& o) { o << report::render_html(data); });
  write_file(md.string(), [&](std::ostream& o) { o << report::render_markdown(data); });
  if (!a.quiet) {
    std::cout << fmt::format("report of {} ({} points, {} groups) written to {} and {}\n", data.header.scenario,
                             data.points.size(), data.groups.size(), html.string(), md.string());
    for (size_t g = 0; g < data.groups.size(); ++g) {
      std::cout << data.groups[g].title << "\n";
      for (const auto& r : data.recommendations[g])
        std::cout << fmt::format("  {:<33} {}{}\n", r.kind, r.config, r.metric == "-" ? "" : " (" + r.metric + ")");
    }
  }
  return 0;
}

// ------------------------------------------------------------------ sweep

const std::vector<OptionRow<SweepArgs>>& sweep_table() {
  static const std::vector<OptionRow<SweepArgs>> t = {
      {"file", "scenario YAML file (its list fields form the grid), or a builtin scenario name", &SweepArgs::file},
      {"-j,--threads", "worker threads per process (0 = all cores)", &SweepArgs::threads},
      {"-o,--out", "write results.csv and results.json into this directory (created if missing) instead of stdout",
       &SweepArgs::out_dir},
      {"-f,--format", "what to print on stdout when --out is not given", &SweepArgs::format, {"csv", "json"}},
      {"--no-wall-time", "leave the simulator's wall time out (byte-identical reruns)", &SweepArgs::no_wall_time},
      {"--no-progress", "no progress bar (it is drawn only when stderr is a terminal)", &SweepArgs::no_progress},
      {"-q,--quiet", "no summary line on stderr", &SweepArgs::quiet},
  };
  return t;
}

int run_sweep(const SweepArgs& a) {
  if (a.threads < 0) throw InputError({}, "--threads", "must be >= 0");
  report::MpiWorld world = report::mpi_start(nullptr, nullptr);
  struct Stop {
    report::MpiWorld& w;
    ~Stop() { report::mpi_stop(w); }
  } stop{world};
  const auto t0 = std::chrono::steady_clock::now();
  sim::Scenario sc = load_any_scenario(a.file);
  if (sc.points.empty()) throw InputError({sc.file, 0, 0}, "", "the scenario has no points");
  for (auto& p : sc.points) p.sim.trace = false;
  report::ProgressBar bar(std::cerr,
                          world.size > 1 ? fmt::format("rank 0 of {}", world.size) : std::string("sweep"),
                          world.rank == 0 && !a.no_progress && !a.quiet && stderr_is_terminal());
  report::SweepOptions so;
  so.threads = a.threads;
  so.progress = &bar;
  auto results = report::run_sweep(sc.points, world, so);
  if (world.rank != 0) return 0;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const sim::ReportHeader header = sim::header_of(sc);
  sim::OutputOptions opt;
  opt.wall_time = !a.no_wall_time;
  if (!a.out_dir.empty()) {
    fs::create_directories(a.out_dir);
    write_file((fs::path(a.out_dir) / "results.csv").string(), [&](std::ostream& o) { sim::write_csv(o, results, opt); });
    write_file((fs::path(a.out_dir) / "results.json").string(),
               [&](std::ostream& o) { sim::write_json(o, header, results, opt); });
  } else if (a.format == "json") {
    sim::write_json(std::cout, header, results, opt);
  } else {
    sim::write_csv(std::cout, results, opt);
  }
  if (!a.quiet) {
    size_t ok = 0;
    for (const auto& r : results) ok += r.status == "ok";
    std::cerr << fmt::format("swept {} points ({} ok) in {:.2f} s: {:.0f} points/s{}{}\n", results.size(), ok, secs,
                             static_cast<double>(results.size()) / std::max(secs, 1e-9),
                             world.size > 1 ? fmt::format(" over {} MPI ranks", world.size) : std::string(),
                             a.out_dir.empty() ? std::string() : fmt::format("; results in {}/", a.out_dir));
  }
  return 0;
}

// ------------------------------------------------------------------ plan

const std::vector<OptionRow<PlanArgs>>& plan_table() {
  static const std::vector<OptionRow<PlanArgs>> t = {
      {"file", "optional plan YAML (keys in report/README.md); flags override its values", &PlanArgs::file},
      {"-m,--model", "GPT-2 model preset to train (see `dptwin list models`)", &PlanArgs::model},
      {"-t,--tokens", "tokens to train, e.g. 10e9", &PlanArgs::tokens},
      {"-d,--days", "time-to-train limit in days (0 = none)", &PlanArgs::days},
      {"-b,--budget", "cost-to-train limit in USD (0 = none)", &PlanArgs::budget},
      {"--device-types", "comma-separated device types (see `dptwin list devices`); each runs on the preset built "
                         "around it, or on every --clusters entry",
       &PlanArgs::device_types},
      {"--clusters", "comma-separated cluster presets (default: dgx-a100,dgx-h100,hgx-h200,dgx1-v100)",
       &PlanArgs::clusters},
      {"--min-devices", "smallest device count tried (default 1)", &PlanArgs::min_devices},
      {"--max-devices", "largest device count tried, powers of two (default 1024)", &PlanArgs::max_devices},
      {"--strategies", "comma-separated strategies (default: dps,horovod,dps+amp,horovod+amp)", &PlanArgs::strategies},
      {"--precision", "comma-separated precisions: fp32, fp16, bf16 (default: all)", &PlanArgs::precision},
      {"--micro-batch", "comma-separated micro-batches per device (default: 1,2,4,8,16)", &PlanArgs::micro_batch},
      {"--price", "USD per device-hour for every device (default: the device catalog's price)", &PlanArgs::price},
      {"--top", "rows of the top-N table (default 10)", &PlanArgs::top},
      {"-j,--threads", "worker threads (0 = all cores)", &PlanArgs::threads},
  };
  return t;
}

int run_plan(const PlanArgs& a) {
  if (a.threads < 0) throw InputError({}, "--threads", "must be >= 0");
  report::PlanRequest req;
  if (!a.file.empty()) req = report::load_plan_file(a.file);
  if (!a.model.empty()) req.model = a.model;
  if (a.tokens != 0) req.tokens = a.tokens;
  if (a.days != 0) req.max_days = a.days;
  if (a.budget != 0) req.budget_usd = a.budget;
  if (!a.device_types.empty()) req.device_types = {a.device_types};
  if (!a.clusters.empty()) req.clusters = {a.clusters};
  if (a.min_devices != 0) req.min_devices = a.min_devices;
  if (a.max_devices != 0) req.max_devices = a.max_devices;
  if (!a.strategies.empty()) req.strategies = {a.strategies};
  if (!a.precision.empty()) req.precisions = {a.precision};
  if (!a.micro_batch.empty()) {
    req.micro_batches.clear();
    std::stringstream ss(a.micro_batch);
    std::string part;
    while (std::getline(ss, part, ',')) {
      try {
        size_t used = 0;
        const int v = std::stoi(part, &used);
        if (used != part.size() || v < 1) throw std::invalid_argument(part);
        req.micro_batches.push_back(v);
      } catch (const std::exception&) {
        throw InputError({}, "--micro-batch", fmt::format("'{}' is not a positive integer", part));
      }
    }
  }
  if (a.price >= 0) req.price_per_device_hour = a.price;
  if (a.top != 0) req.top = a.top;
  req = report::normalized(req);
  report::ProgressBar bar(std::cerr, "planning", stderr_is_terminal());
  const auto plan = report::run_plan(req, a.threads, [&](size_t d, size_t t) { bar.update(d, t); });
  bar.finish();
  report::write_plan(std::cout, req, plan);
  return plan.feasible.empty() ? kExitRuntimeError : 0;
}

}  // namespace dptwin::apps
