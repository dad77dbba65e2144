// report/charts.hpp — the report's charts, built from ReportPoints with report/svg.hpp.
//
// Each function returns one `<svg>` element for one group (model x cluster x
// device type); x axes are device counts (log2), y axes carry their units.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "report/analysis.hpp"
#include "report/svg.hpp"
#include "report/validation.hpp"

namespace dptwin::report {

// Curves of one metric per series (ok points only; x = devices used).
std::vector<Series> series_of(const std::vector<ReportPoint>& points, const Group& g,
                              double (*metric)(const ReportPoint&));

std::string chart_step_time(const std::vector<ReportPoint>& points, const Group& g);    // ms vs devices
std::string chart_throughput(const std::vector<ReportPoint>& points, const Group& g);   // tokens/s vs devices
std::string chart_efficiency(const std::vector<ReportPoint>& points, const Group& g);   // % vs devices, 100 % line
std::string chart_breakdown(const std::vector<ReportPoint>& points, const Group& g);    // stacked ms per step
std::string chart_memory(const std::vector<ReportPoint>& points, const Group& g);       // GiB vs capacity, OOM
std::string chart_cost(const std::vector<ReportPoint>& points, const Group& g);         // USD per M tokens
std::string chart_time_to_train(const std::vector<ReportPoint>& points, const Group& g);  // hours
std::string chart_sensitivity(const std::vector<ReportPoint>& points, const Group& g);  // % slowdown, halved links

bool any_cost(const std::vector<ReportPoint>& points, const Group& g);
bool any_time_to_train(const std::vector<ReportPoint>& points, const Group& g);
bool any_sensitivity(const std::vector<ReportPoint>& points, const Group& g);

std::string chart_validation_scatter(const ValidationResult& v);  // predicted vs measured (ms), y = x line
std::string chart_validation_errors(const ValidationResult& v);   // error % per case

}  // namespace dptwin::report
