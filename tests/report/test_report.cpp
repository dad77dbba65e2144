// The report end to end in the library: simulate, recommend, render offline HTML and Markdown.
#include <doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "report/report.hpp"

using namespace dptwin;
using namespace dptwin::report;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("report of the pricing scenario: charts, recommendations, no network references") {
  ReportOptions o;
  o.threads = 2;
  auto d = build_report(sim::load_builtin_scenario("pricing-budget"), o);
  REQUIRE(d.groups.size() == 1);
  REQUIRE(d.recommendations[0].size() == 3);
  CHECK(d.recommendations[0][0].index.has_value());
  CHECK(d.recommendations[0][1].index.has_value());  // priced scenario
  CHECK(d.recommendations[0][2].index.has_value());  // 16..64 GPUs span several DGX nodes
  // sensitivity was measured for every ok multi-node point
  for (const auto& p : d.points)
    if (p.result.status == "ok" && p.nodes > 1) CHECK(p.halved_step_s.has_value());

  const std::string html = render_html(d);
  CHECK(html.starts_with("<!DOCTYPE html>"));
  // step, throughput, efficiency, sensitivity, cost, time to train, breakdown, memory
  CHECK(count(html, "<svg") == 8);
  CHECK(count(html, "<svg") == count(html, "</svg>"));
  CHECK(html.find("time to train (hours)") != std::string::npos);
  CHECK(html.find("cost (USD per million tokens)") != std::string::npos);
  CHECK(html.find("least sensitive to slower links") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  // the only "http" is the SVG namespace name, which is never fetched
  CHECK(count(html, "http") == count(html, "xmlns=\"http://www.w3.org/2000/svg\""));

  const std::string md = render_markdown(d);
  CHECK(md.starts_with("# Capacity-planning report: pricing-budget"));
  CHECK(md.find("| fastest |") != std::string::npos);
  CHECK(md.find("| cheapest |") != std::string::npos);
}

TEST_CASE("a --token-budget and a calibration profile change the figures") {
  auto sc = sim::load_builtin_scenario("bucket-sweep");
  ReportOptions base;
  base.threads = 2;
  base.sensitivity = false;
  auto a = build_report(sc, base);
  CHECK_FALSE(a.points[0].result.time_to_train_s.has_value());

  ReportOptions o = base;
  o.token_budget = 1e9;
  o.profile_path = temp_file("dptwin_test_profile.yaml", "name: slow\ndevice:\n  matmul: {max: 0.2, half_work: 2e9}\n");
  auto b = build_report(sc, o);
  REQUIRE(b.points[0].result.time_to_train_s.has_value());
  CHECK(*b.points[0].result.step_time_s > *a.points[0].result.step_time_s * 1.5);  // 0.2 vs 0.75 matmul efficiency
  CHECK(render_html(b).find("calibration profile:") != std::string::npos);

  o.profile_path = temp_file("dptwin_test_bad_profile.yaml", "device:\n  matmull: {max: 0.2}\n");
  CHECK_THROWS_WITH_AS(build_report(sc, o), doctest::Contains("matmull"), InputError);
  o.profile_path = "/nonexistent/profile.yaml";
  CHECK_THROWS_AS(build_report(sc, o), InputError);
}

TEST_CASE("a validation result adds its section") {
  ReportOptions o;
  o.threads = 2;
  o.sensitivity = false;
  o.validation_path = temp_file("dptwin_test_validation.json", R"({"cases": [
      {"label": "dps 2", "predicted_step_s": 0.5, "measured_step_s": 0.52},
      {"label": "dps 4", "predicted_step_s": 0.6, "measured_step_s": 0.58}]})");
  auto d = build_report(sim::load_builtin_scenario("bucket-sweep"), o);
  REQUIRE(d.validation.has_value());
  const std::string html = render_html(d);
  CHECK(html.find("id=\"validation\"") != std::string::npos);
  CHECK(html.find("Predicted vs measured step time") != std::string::npos);
  CHECK(render_markdown(d).find("MAPE") != std::string::npos);
}
