// The validation result schema: parsing, derived fields, errors.
#include <doctest.h>

#include "core/error.hpp"
#include "report/charts.hpp"
#include "report/validation.hpp"

using namespace dptwin::report;

TEST_CASE("kendall tau") {
  CHECK(*kendall_tau({1, 2, 3}, {10, 20, 30}) == doctest::Approx(1));
  CHECK(*kendall_tau({1, 2, 3}, {30, 20, 10}) == doctest::Approx(-1));
  CHECK(*kendall_tau({1, 2, 3, 4}, {1, 2, 4, 3}) == doctest::Approx(4.0 / 6));  // 5 concordant, 1 discordant
  CHECK_FALSE(kendall_tau({1}, {1}).has_value());
}

TEST_CASE("a minimal file: derived error, MAPE, worst and tau are computed") {
  auto v = parse_validation(R"({"cases": [
      {"label": "dps 2 ranks", "params": {"strategy": "dps", "devices": 2}, "predicted_step_s": 1.1, "measured_step_s": 1.0},
      {"label": "dps 4 ranks", "predicted_step_s": 0.9, "measured_step_s": 1.0}]})",
                            "v.json");
  REQUIRE(v.cases.size() == 2);
  CHECK(v.cases[0].error_pct == doctest::Approx(10));
  CHECK(v.cases[1].error_pct == doctest::Approx(-10));
  CHECK(v.cases[0].params[1] == std::pair<std::string, std::string>{"devices", "2"});
  CHECK(v.summary.mape_pct == doctest::Approx(10));
  CHECK(v.summary.worst_pct == doctest::Approx(10));
  CHECK(*v.summary.kendall_tau == doctest::Approx(0));  // measured times tie: the one pair counts 0
}

TEST_CASE("given summary figures win; bad input names the key") {
  auto v = parse_validation(R"({"schema": "dptwin-validation/1", "profile": "p.yaml",
      "cases": [{"label": "a", "predicted_step_s": 2, "measured_step_s": 1, "error_pct": 100}],
      "summary": {"mape_pct": 7, "worst_pct": 9, "kendall_tau": 0.5}})",
                            "v.json");
  CHECK(v.profile == "p.yaml");
  CHECK(v.summary.mape_pct == 7);
  CHECK(*v.summary.kendall_tau == 0.5);
  CHECK_THROWS_WITH_AS(parse_validation(R"({"cases": [{"label": "a", "predicted_step_s": "x", "measured_step_s": 1}]})",
                                        "v.json"),
                       doctest::Contains("cases[0].predicted_step_s"), dptwin::InputError);
  CHECK_THROWS_AS(parse_validation("{", "v.json"), dptwin::InputError);
  CHECK_THROWS_AS(parse_validation(R"({"points": []})", "v.json"), dptwin::InputError);
  CHECK_THROWS_AS(parse_validation(R"({"schema": "dptwin.microbench/1", "cases": []})", "v.json"), dptwin::InputError);
}

TEST_CASE("validation charts: scatter with y = x and an error bar per case") {
  auto v = parse_validation(R"({"cases": [{"label": "a", "predicted_step_s": 1.05, "measured_step_s": 1},
      {"label": "b", "predicted_step_s": 1.5, "measured_step_s": 1}]})",
                            "v.json");
  const std::string scatter = chart_validation_scatter(v);
  CHECK(scatter.find("measured step time (ms)") != std::string::npos);
  CHECK(scatter.find("class=\"reference\"") != std::string::npos);
  const std::string bars = chart_validation_errors(v);
  CHECK(bars.find(">a</text>") != std::string::npos);
  CHECK(bars.find(">b</text>") != std::string::npos);
}

TEST_CASE("cases without `label` or `params` take their label from their scalar fields") {
  auto v = parse_validation(R"({"schema": "dptwin.validation/1", "cases": [
      {"strategy": "dps", "devices": 2, "predicted_step_s": 1.0, "measured_step_s": 1.0}],
      "summary": {"kendall_tau": {"overall": 1}}})",
                            "v.json");
  REQUIRE(v.cases.size() == 1);
  CHECK(v.cases[0].label == "strategy=dps devices=2");
  CHECK_FALSE(v.summary.kendall_tau.has_value());  // one case, and the given one is not a number
  CHECK_THROWS_AS(parse_validation(R"({"cases": [{"predicted_step_s": 1, "measured_step_s": 1}]})", "v.json"),
                  dptwin::InputError);
}

TEST_CASE("the shape `dptwin validate` writes: labels object, failed cases, extra fields") {
  auto v = parse_validation(R"({"matrix": "m.yaml", "profile": "p.yaml", "cases": [
      {"labels": {"model": "tiny", "strategy": "dps", "ranks": 2, "precision": "fp32", "micro_batch": 4, "seq_len": 64},
       "label": "tiny dps x2 fp32 mb4", "status": "ok", "predicted_step_s": 0.11, "measured_step_s": 0.1,
       "error_pct": 10.0, "measured_p10_s": 0.09, "predicted_breakdown": {"compute_s": 0.1}},
      {"labels": {"model": "tiny", "strategy": "sps", "ranks": 2}, "label": "tiny sps x2", "status": "failed",
       "message": "rank 1 died", "predicted_step_s": 0.2, "measured_step_s": null, "error_pct": null}],
      "summary": {"cases": 1, "mape_pct": 10.0, "worst_pct": 10.0, "worst_case": "tiny dps x2 fp32 mb4",
                  "kendall_tau": 1.0, "ranking_correct": true}})",
                            "v.json");
  REQUIRE(v.cases.size() == 1);
  CHECK(v.not_measured == 1);
  CHECK(v.cases[0].label == "tiny dps x2 fp32 mb4");
  CHECK(v.cases[0].params[1] == std::pair<std::string, std::string>{"strategy", "dps"});
  CHECK(v.summary.mape_pct == 10.0);
  CHECK(*v.summary.kendall_tau == 1.0);
}
