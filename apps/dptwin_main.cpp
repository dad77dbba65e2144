// apps/dptwin_main.cpp — the `dptwin` command line: simulate scenarios, list what is built in.
//
//   dptwin simulate [FILE] [--format table|json|csv] [--out DIR] [--trace FILE] [--threads N] [--point K]
//   dptwin list presets|models|strategies|devices|scenarios
//   dptwin report [FILE] --out report.html [--profile P] [--validation V] [--token-budget T]
//   dptwin sweep [FILE] [--threads N] [--out DIR] [--format csv|json]   (mpirun -np K dptwin sweep ...)
//   dptwin plan [PLAN.yaml] --model M --tokens T [--days D] [--budget B] [--device-types ...] [--clusters ...]
//   dptwin exec ... | dptwin prepare-data ...   (execution backend, exec/)
//   dptwin --version
//
// Thin main: parsing, simulation and writing live in sim/ (report, sweep and
// plan in report/, their option tables in apps/report_commands.cpp). Exit codes: 0 ok,
// 2 bad input (InputError, bad flags), 1 any other failure.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/cli_table.hpp"
#include "apps/report_commands.hpp"
#include "apps/validate_commands.hpp"
#include "core/error.hpp"
#include "exec/data_prep.hpp"
#include "exec/launcher.hpp"
#include "models/gpt2.hpp"
#include "sim/output.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"
#include "topology/device_spec.hpp"

#ifndef DPTWIN_VERSION
#define DPTWIN_VERSION "unknown"
#endif

namespace dptwin::apps {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------ simulate

struct SimulateArgs {
  std::string file;
  std::string format = "table";
  std::string out_dir;
  std::string trace;
  int threads = 0;
  int point = -1;
  bool no_wall_time = false;
  bool quiet = false;
};

const std::vector<OptionRow<SimulateArgs>>& simulate_table() {
  static const std::vector<OptionRow<SimulateArgs>> t = {
      {"file", "scenario YAML file, or the name of a builtin scenario (default: the paper scenario, paper-hal)",
       &SimulateArgs::file},
      {"-f,--format", "what to print on stdout", &SimulateArgs::format, {"table", "json", "csv"}},
      {"-o,--out", "also write result.json, result.csv and result.txt into this directory (created if missing)",
       &SimulateArgs::out_dir},
      {"--trace", "write a Chrome-trace/Perfetto timeline of one point to this file", &SimulateArgs::trace},
      {"-j,--threads", "worker threads for the sweep (0 = all cores)", &SimulateArgs::threads},
      {"--point", "index of the point to trace (default: the first point whose status is ok)", &SimulateArgs::point},
      {"--no-wall-time", "leave the simulator's wall time out of the outputs (byte-identical reruns)",
       &SimulateArgs::no_wall_time},
      {"-q,--quiet", "print nothing on stdout (use with --out or --trace)", &SimulateArgs::quiet},
  };
  return t;
}

int run_simulate(const SimulateArgs& a) {
  sim::Scenario sc = load_any_scenario(a.file);
  if (sc.points.empty()) throw InputError({sc.file, 0, 0}, "", "the scenario has no points");
  if (a.point >= 0 && static_cast<size_t>(a.point) >= sc.points.size())
    throw InputError({}, "--point",
                     fmt::format("point {} does not exist (the scenario has {} points, 0..{})", a.point,
                                 sc.points.size(), sc.points.size() - 1));
  if (a.threads < 0) throw InputError({}, "--threads", "must be >= 0");
  if (!a.trace.empty() && a.point >= 0) sc.points[a.point].sim.trace = true;

  std::vector<sim::PointResult> results = sim::simulate_all(sc.points, a.threads);

  const sim::ReportHeader header = sim::header_of(sc);
  sim::OutputOptions opt;
  opt.wall_time = !a.no_wall_time;

  if (!a.trace.empty()) {
    size_t k = 0;
    if (a.point >= 0) {
      k = static_cast<size_t>(a.point);
    } else {
      auto it = std::find_if(results.begin(), results.end(), [](const auto& r) { return r.status == "ok"; });
      if (it == results.end())
        throw std::runtime_error("no point has status ok, so there is nothing to trace; pick one with --point K");
      k = static_cast<size_t>(it - results.begin());
    }
    std::vector<sim::PointResult> traced(results.size());
    if (results[k].timeline) {
      traced[k] = results[k];
    } else {  // re-run the selected point with a timeline (the result is otherwise the same)
      sim::PointSpec p = sc.points[k];
      p.sim.trace = true;
      traced[k] = sim::simulate_point(p);
    }
    write_file(a.trace, [&](std::ostream& o) { sim::write_chrome_trace(o, traced, k); });
    if (!a.quiet) std::cerr << fmt::format("trace of point {} written to {}\n", k, a.trace);
  }

  if (!a.out_dir.empty()) {
    fs::create_directories(a.out_dir);
    const fs::path dir(a.out_dir);
    write_file(dir / "result.json", [&](std::ostream& o) { sim::write_json(o, header, results, opt); });
    write_file(dir / "result.csv", [&](std::ostream& o) { sim::write_csv(o, results, opt); });
    write_file(dir / "result.txt", [&](std::ostream& o) { sim::write_table(o, header, results, opt); });
  }

  if (!a.quiet) {
    if (a.format == "json") sim::write_json(std::cout, header, results, opt);
    else if (a.format == "csv") sim::write_csv(std::cout, results, opt);
    else sim::write_table(std::cout, header, results, opt);
  }
  return 0;
}

// ------------------------------------------------------------------ list

struct ListArgs {
  std::string what;
};

const std::vector<OptionRow<ListArgs>>& list_table() {
  static const std::vector<OptionRow<ListArgs>> t = {
      {"what", "what to list", &ListArgs::what, {"presets", "models", "strategies", "devices", "scenarios"}},
  };
  return t;
}

int run_list(const ListArgs& a) {
  if (a.what == "presets") {
    std::cout << fmt::format("{:<16} {:>9} {:>9}  {}\n", "cluster", "dev/node", "max dev", "description");
    for (const auto& name : topology::cluster_preset_names()) {
      auto c = topology::load_cluster_preset(name);
      std::string maxdev = c.max_nodes ? std::to_string(*c.max_nodes * c.devices_per_node) : "-";
      std::cout << fmt::format("{:<16} {:>9} {:>9}  {}\n", name, c.devices_per_node, maxdev, c.description);
    }
  } else if (a.what == "models") {
    std::cout << fmt::format("{:<12} {:>6} {:>6} {:>6} {:>6} {:>7} {:>15}\n", "model", "layers", "width", "heads",
                             "ctx", "vocab", "parameters");
    for (const auto& m : models::gpt2_presets())
      std::cout << fmt::format("{:<12} {:>6} {:>6} {:>6} {:>6} {:>7} {:>15}\n", m.name, m.n_layer, m.n_embd,
                               m.n_head, m.n_ctx, m.vocab_size, models::parameter_count(m));
  } else if (a.what == "strategies") {
    for (auto k : sim::all_strategies())
      std::cout << fmt::format("{:<12} {}\n", sim::to_string(k), sim::describe(k));
  } else if (a.what == "devices") {
    std::cout << fmt::format("{:<18} {:>4} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "device", "kind", "fp32 TF/s",
                             "fp16 TF/s", "bf16 TF/s", "mem GiB", "mem GB/s");
    for (const auto& d : topology::device_catalog())
      std::cout << fmt::format("{:<18} {:>4} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.1f} {:>9.0f}\n", d.name,
                               d.kind == topology::DeviceKind::Gpu ? "gpu" : "cpu", d.fp32_peak.value() / 1e12,
                               d.fp16_peak.value() / 1e12, d.bf16_peak.value() / 1e12,
                               d.memory.value() / 1073741824.0, d.memory_bandwidth.value() / 1e9);
  } else if (a.what == "scenarios") {
    for (const auto& name : sim::builtin_scenario_names()) {
      std::string desc;
      try {
        auto sc = sim::load_builtin_scenario(name);
        desc = fmt::format("{} ({} points)", sc.description, sc.points.size());
      } catch (const std::exception& e) {
        desc = fmt::format("(cannot load: {})", e.what());
      }
      std::cout << fmt::format("{:<24} {}\n", name, desc);
    }
  }
  return 0;
}

// ------------------------------------------------------------------ exec / prepare-data
//
// `dptwin exec` and `dptwin prepare-data` belong to the execution backend
// (exec/launcher.hpp, exec/data_prep.hpp; torch-free, linked through
// exec_launch_dep). They own their option tables, so their arguments are
// handed over untouched, before CLI11 parses anything.

struct Delegated {
  const char* name;
  const char* help;
  int (*run)(int, char**);
};

const std::vector<Delegated>& delegated_commands() {
  static const std::vector<Delegated> t = {
      {"exec", "train for real with dptwin-exec worker ranks and measure (see `dptwin exec --help`)",
       &exec::run_exec_command},
      {"prepare-data", "turn text files into token shards, or make a synthetic corpus (see `dptwin prepare-data --help`)",
       &exec::run_prepare_data},
  };
  return t;
}

}  // namespace

int main_impl(int argc, char** argv) {
  if (argc >= 2) {
    for (const auto& d : delegated_commands()) {
      if (std::string_view(argv[1]) != d.name) continue;
      std::string program = std::string("dptwin ") + d.name;
      std::vector<char*> args{program.data()};
      for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
      args.push_back(nullptr);
      return d.run(argc - 1, args.data());
    }
  }

  CLI::App app{"dptwin - a digital twin of data-parallel deep-learning training"};
  app.set_version_flag("--version", std::string("dptwin ") + DPTWIN_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  SimulateArgs sargs;
  CLI::App* simulate = app.add_subcommand("simulate", "simulate a scenario (default: the paper scenario)");
  register_options(*simulate, sargs, simulate_table());

  ListArgs largs;
  CLI::App* list = app.add_subcommand("list", "list built-in cluster presets, models, strategies, devices, scenarios");
  register_options(*list, largs, list_table());
  list->get_option("what")->required();

  ReportArgs rargs;
  CLI::App* report = app.add_subcommand("report", "write a self-contained HTML capacity-planning report (+ Markdown)");
  register_options(*report, rargs, report_table());

  SweepArgs wargs;
  CLI::App* sweep = app.add_subcommand("sweep", "run a scenario grid on all cores (or MPI ranks); CSV/JSON results");
  register_options(*sweep, wargs, sweep_table());

  PlanArgs pargs;
  CLI::App* plan = app.add_subcommand("plan", "find the fastest and the cheapest way to train a model on T tokens");
  register_options(*plan, pargs, plan_table());

  ValidateCommands vcmds(app);
  for (const auto& d : delegated_commands()) app.add_subcommand(d.name, d.help);  // listed in --help; run above

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitInputError;
  }

  if (simulate->parsed()) return run_simulate(sargs);
  if (list->parsed()) return run_list(largs);
  if (report->parsed()) {
    std::string command_line = "dptwin";
    for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
    return run_report(rargs, command_line);
  }
  if (sweep->parsed()) return run_sweep(wargs);
  if (plan->parsed()) return run_plan(pargs);
  if (vcmds.parsed()) return vcmds.run();
  return kExitInputError;
}

}  // namespace dptwin::apps

int main(int argc, char** argv) {
  try {
    return dptwin::apps::main_impl(argc, argv);
  } catch (const dptwin::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return dptwin::kExitInputError;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return dptwin::kExitRuntimeError;
  }
}
