// report/report.cpp — building the report data (see report.hpp).
#include "report/report.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "sim/device_profile.hpp"
#include "sim/simulate.hpp"

namespace dptwin::report {

void apply_profile_file(std::vector<sim::PointSpec>& points, const std::string& path) {
  if (!path_exists(path))
    throw InputError({path, 0, 0}, "--profile", fmt::format("calibration profile '{}' not found", path));
  const YamlNode root = load_yaml_file(path);
  // Only the `device:` section prices a point; other top-level sections a
  // calibration may write (name, description, source, fitted links...) are not read here.
  const YamlNode device = root.at("device");
  for (auto& p : points) {
    try {
      sim::apply_profile_yaml(device, p.profile);
    } catch (const InputError& e) {
      throw e.with_context(fmt::format("while applying calibration profile '{}'", path));
    }
    p.calibration = path;
  }
}

ReportData build_report(sim::Scenario sc, const ReportOptions& opt,
                        const std::function<void(size_t, size_t)>& progress) {
  if (sc.points.empty()) throw InputError({sc.file, 0, 0}, "", "the scenario has no points");
  if (opt.profile_path) apply_profile_file(sc.points, *opt.profile_path);
  if (opt.token_budget) {
    if (!(*opt.token_budget > 0)) throw InputError({}, "--token-budget", "must be > 0");
    for (auto& p : sc.points) p.token_budget = *opt.token_budget;
  }
  for (auto& p : sc.points) p.sim.trace = false;

  ReportData d;
  d.header = sim::header_of(sc);
  d.options = opt;
  if (opt.validation_path) d.validation = load_validation(*opt.validation_path);

  const auto t0 = std::chrono::steady_clock::now();
  auto results = sim::simulate_all(sc.points, opt.threads, progress);
  d.points = make_report_points(sc.points, std::move(results), opt.sensitivity, opt.threads);
  d.simulate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  d.groups = group_points(d.points);
  for (const auto& g : d.groups) d.recommendations.push_back(recommend(d.points, g.members));
  return d;
}

}  // namespace dptwin::report
