// report/validation.cpp — reading validation results (see validation.hpp).
#include "report/validation.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace dptwin::report {
namespace {

double number(const nlohmann::ordered_json& j, const std::string& key, const std::string& file, const std::string& path) {
  if (!j.contains(key)) throw InputError({file, 0, 0}, path + key, "missing (a number is required)");
  if (!j[key].is_number()) throw InputError({file, 0, 0}, path + key, "must be a number");
  return j[key].get<double>();
}

}  // namespace

std::optional<double> kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return std::nullopt;
  long long s = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double x = (a[i] - a[j]) * (b[i] - b[j]);
      s += x > 0 ? 1 : (x < 0 ? -1 : 0);
    }
  return static_cast<double>(s) / (static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

ValidationResult parse_validation(const std::string& text, const std::string& name) {
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::parse_error& e) {
    throw InputError({name, 0, 0}, "", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!doc.is_object()) throw InputError({name, 0, 0}, "", "a validation result must be a JSON object");
  ValidationResult v;
  if (doc.contains("schema") && doc["schema"].is_string() &&
      doc["schema"].get<std::string>().find("validation") == std::string::npos)
    throw InputError({name, 0, 0}, "schema", fmt::format("unknown schema '{}' (expected dptwin-validation/1)",
                                                        doc["schema"].get<std::string>()));
  if (doc.contains("profile") && doc["profile"].is_string()) v.profile = doc["profile"].get<std::string>();
  if (!doc.contains("cases") || !doc["cases"].is_array())
    throw InputError({name, 0, 0}, "cases", "missing or not a list of cases");
  size_t i = 0;
  for (const auto& c : doc["cases"]) {
    const std::string path = fmt::format("cases[{}].", i++);
    if (!c.is_object()) throw InputError({name, 0, 0}, path.substr(0, path.size() - 1), "must be an object");
    ValidationCase vc;
    // A case that did not run (status other than ok, no measurement) is counted, not plotted.
    if ((c.contains("status") && c["status"].is_string() && c["status"].get<std::string>() != "ok") ||
        (c.contains("measured_step_s") && c["measured_step_s"].is_null())) {
      ++v.not_measured;
      continue;
    }
    // Label fields: a `labels` (or `params`) object, or else the case's other scalar fields.
    static const std::set<std::string> reserved{"label", "labels", "params", "status", "message",
                                                "predicted_step_s", "measured_step_s", "error_pct"};
    const char* obj = c.contains("labels") && c["labels"].is_object()   ? "labels"
                      : c.contains("params") && c["params"].is_object() ? "params"
                                                                         : nullptr;
    const auto& fields = obj ? c[obj] : c;
    for (const auto& [k, val] : fields.items())
      if (!reserved.count(k) && (val.is_string() || val.is_number() || val.is_boolean()))
        vc.params.emplace_back(k, val.is_string() ? val.get<std::string>() : val.dump());
    if (c.contains("label") && c["label"].is_string()) {
      vc.label = c["label"].get<std::string>();
    } else {
      for (const auto& [k, val] : vc.params) vc.label += (vc.label.empty() ? "" : " ") + k + "=" + val;
      if (vc.label.empty()) throw InputError({name, 0, 0}, path + "label", "missing (text naming the case)");
    }
    vc.predicted_step_s = number(c, "predicted_step_s", name, path);
    vc.measured_step_s = number(c, "measured_step_s", name, path);
    if (!(vc.predicted_step_s > 0) || !(vc.measured_step_s > 0))
      throw InputError({name, 0, 0}, path + "measured_step_s", "step times must be > 0");
    vc.error_pct = c.contains("error_pct") && !c["error_pct"].is_null() ? number(c, "error_pct", name, path)
                                           : 100.0 * (vc.predicted_step_s - vc.measured_step_s) / vc.measured_step_s;
    v.cases.push_back(std::move(vc));
  }
  std::vector<double> pred, meas;
  double sum = 0, worst = 0;
  for (const auto& c : v.cases) {
    sum += std::abs(c.error_pct);
    worst = std::max(worst, std::abs(c.error_pct));
    pred.push_back(c.predicted_step_s);
    meas.push_back(c.measured_step_s);
  }
  v.summary.mape_pct = v.cases.empty() ? 0 : sum / static_cast<double>(v.cases.size());
  v.summary.worst_pct = worst;
  v.summary.kendall_tau = kendall_tau(pred, meas);
  if (doc.contains("summary") && doc["summary"].is_object()) {
    const auto& s = doc["summary"];
    // Figures of the producer win when they are numbers (it may compute tau per group).
    if (s.contains("mape_pct") && s["mape_pct"].is_number()) v.summary.mape_pct = s["mape_pct"].get<double>();
    if (s.contains("worst_pct") && s["worst_pct"].is_number()) v.summary.worst_pct = s["worst_pct"].get<double>();
    if (s.contains("kendall_tau") && s["kendall_tau"].is_number())
      v.summary.kendall_tau = s["kendall_tau"].get<double>();
  }
  return v;
}

ValidationResult load_validation(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, "", fmt::format("cannot open validation result '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_validation(ss.str(), path);
}

}  // namespace dptwin::report
