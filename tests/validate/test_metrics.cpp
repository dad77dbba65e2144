// MAPE, worst case and Kendall tau arithmetic (validate/metrics.hpp, validation.hpp).
#include <doctest.h>

#include <algorithm>

#include "validate/metrics.hpp"
#include "validate/validation.hpp"

using namespace dptwin::validate;

TEST_CASE("median: middle value, mean of the middle two, 0 when empty") {
  CHECK(median({3.0, 1.0, 2.0}) == doctest::Approx(2.0));
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == doctest::Approx(2.5));
  CHECK(median({}) == 0.0);
}

TEST_CASE("MAPE and worst case") {
  // errors: +10%, -20%, 0% => MAPE 10%, worst 20%.
  std::vector<double> m{1.0, 2.0, 4.0}, p{1.1, 1.6, 4.0};
  CHECK(mape_pct(p, m) == doctest::Approx(10.0));
  CHECK(worst_pct(p, m) == doctest::Approx(20.0));
  CHECK(error_pct(1.1, 1.0) == doctest::Approx(10.0));
  CHECK(mape_pct({}, {}) == 0);
}

TEST_CASE("Kendall tau: identical, reversed, one swap, groups") {
  std::vector<double> a{1, 2, 3, 4};
  CHECK(kendall(a, a).tau() == 1.0);
  CHECK(kendall(a, {4, 3, 2, 1}).tau() == -1.0);
  // One adjacent swap among 4 items: 6 pairs, 5 concordant, 1 discordant => (5-1)/6.
  RankAgreement r = kendall(a, {1, 3, 2, 4});
  CHECK(r.concordant == 5);
  CHECK(r.discordant == 1);
  CHECK(r.tau() == doctest::Approx(4.0 / 6.0));
  // Groups {0,1} and {2,3}: only 2 pairs compared; the second is reversed => tau 0.
  RankAgreement g = kendall(a, {1, 2, 4, 3}, {0, 0, 1, 1});
  CHECK(g.concordant == 1);
  CHECK(g.discordant == 1);
  CHECK(g.tau() == 0.0);
  // Ties count in the denominator: (1 - 0) / 2.
  CHECK(kendall({1, 1, 2}, {1, 2, 3}, {0, 0, 1}).tau() == 0.0);
  CHECK(kendall({1, 2, 5}, {1, 1, 3}).tau() == doctest::Approx(2.0 / 3.0));
}

TEST_CASE("summary: ranking within configurations, measured near-ties are ties") {
  auto mk = [](const char* strat, int ranks, double pred, double meas) {
    CaseOutcome c;
    c.c.strategy = strat;
    c.c.ranks = ranks;
    c.predicted_step_s = pred;
    c.measured_step_s = meas;
    return c;
  };
  // ranks 2: dps < horovod < sps measured and predicted (3 concordant pairs);
  // ranks 4: dps and horovod measured within 2% (a tie at 3%) but predicted reversed.
  std::vector<CaseOutcome> cs{mk("dps", 2, 1.0, 1.1),  mk("horovod", 2, 1.2, 1.3), mk("sps", 2, 2.0, 2.2),
                              mk("dps", 4, 1.5, 1.50), mk("horovod", 4, 1.4, 1.52)};
  ValidationSummary s = summarize(cs, 3.0);
  CHECK(s.cases == 5);
  CHECK(s.concordant == 3);
  CHECK(s.discordant == 0);
  CHECK(s.ties == 1);
  CHECK(s.ranking_correct);
  CHECK(s.kendall_tau == doctest::Approx(0.75));
  // With no tie band the ranks-4 pair is discordant.
  ValidationSummary strict = summarize(cs, 0.0);
  CHECK(strict.discordant == 1);
  CHECK_FALSE(strict.ranking_correct);
  // Worst case: the first case, -9.1%... the horovod x4 case, -7.9%, ... compute: errors
  // 1.0/1.1 -9.09, 1.2/1.3 -7.69, 2/2.2 -9.09, 0, 1.4/1.52 -7.89 => worst 9.09 (first in order).
  CHECK(s.worst_pct == doctest::Approx(100.0 / 11.0));
  CHECK(s.worst_case == cs[0].c.label());
}

TEST_CASE("Mann-Whitney: exact one-sided p-values of small samples") {
  CHECK(mann_whitney_p_less({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}) == doctest::Approx(1.0 / 252));  // complete separation
  CHECK(mann_whitney_p_less({1, 2, 3}, {4, 5, 6}) == doctest::Approx(1.0 / 20));
  // U = 4 for 5 vs 5: P(U <= 4) = (1 + 1 + 2 + 3 + 5) / 252.
  CHECK(mann_whitney_p_less({1, 2, 3, 4, 9.5}, {5, 6, 7, 8, 10}) == doctest::Approx(12.0 / 252));
  // U = 5: just above 5%.
  CHECK(mann_whitney_p_less({1, 2, 3, 4, 10.5}, {5, 6, 7, 8, 10}) > 0.05);
  CHECK(mann_whitney_p_less({6, 7, 8}, {1, 2, 3}) == doctest::Approx(1.0));  // the other way round
  CHECK(mann_whitney_p_less({}, {1.0}) == 1.0);
}

TEST_CASE("summary: pairs the rounds do not order are ties the measurement cannot order") {
  auto mk = [](const char* strat, double pred, std::vector<double> rounds) {
    CaseOutcome c;
    c.c.strategy = strat;
    c.c.ranks = 2;
    c.predicted_step_s = pred;
    std::sort(rounds.begin(), rounds.end());
    c.measured_step_s = rounds[rounds.size() / 2];
    c.measured_rounds_s = rounds;
    return c;
  };
  // sps measured 20% slower than dps by the medians, but one sps round was
  // faster than one dps round: the measurement does not order them, so the
  // reversed prediction is not counted against the ranking.
  std::vector<CaseOutcome> overlap{mk("sps", 1.0, {1.0, 1.2, 1.4}), mk("dps", 1.2, {0.9, 1.0, 1.05})};
  ValidationSummary s = summarize(overlap, 3.0);
  CHECK(s.discordant == 0);
  CHECK(s.ties == 1);
  CHECK(s.ties_unordered == 1);
  CHECK(s.discordant_band_only == 1);  // reported: the tie band alone would call it discordant
  CHECK(s.ranking_correct);
  // Five rounds each, one contended sps round faster than three dps rounds (U = 3
  // of 25, p = 7/252): still ordered; the reversed prediction is discordant.
  std::vector<CaseOutcome> outlier{mk("sps", 1.0, {0.95, 1.2, 1.25, 1.3, 1.4}), mk("dps", 1.2, {0.9, 0.92, 1.0, 1.02, 1.05})};
  CHECK(summarize(outlier, 3.0).discordant == 1);
  // Every sps round slower than every dps round: ordered, and the reversed prediction is discordant.
  std::vector<CaseOutcome> apart{mk("sps", 1.0, {1.1, 1.2, 1.4}), mk("dps", 1.2, {0.9, 1.0, 1.05})};
  ValidationSummary t = summarize(apart, 3.0);
  CHECK(t.discordant == 1);
  CHECK(t.ties_unordered == 0);
  CHECK_FALSE(t.ranking_correct);
  // The rounds land in the JSON.
  const auto j = to_json("m", "p", apart, t, 3.0);
  CHECK(j["cases"][0]["measured_rounds_s"].size() == 3);
  CHECK(j["summary"]["ties_unordered"] == 0);
  CHECK(j["summary"]["discordant_band_only"] == 1);
}

TEST_CASE("summary: where the error lives, by precision and rank count") {
  using nlohmann::json;
  auto mk = [](const char* prec, int ranks, double pred, double meas, double pred_compute, double fwd, double bwd) {
    CaseOutcome c;
    c.c.strategy = "dps";
    c.c.precision = prec;
    c.c.ranks = ranks;
    c.predicted_step_s = pred;
    c.measured_step_s = meas;
    c.predicted_breakdown = {{"compute_s", pred_compute}, {"optimizer_s", 0.1}};
    c.measured_breakdown = {{"forward_s", fwd}, {"backward_s", bwd}, {"optimizer_s", 0.1}};
    return c;
  };
  // fp32 x2: step right (1.0 vs 1.0) but compute +20% (0.6 vs 0.5) and the
  // rest 0.1 s short (0.3 vs 0.4): two errors that cancel.
  // bf16 x2: step -10% (0.9 vs 1.0), compute right, rest 0.1 s short.
  // fp32 x1: step +10%, compute +10% (0.99 vs 0.9), rest 0.01 vs 0.
  std::vector<CaseOutcome> cs{mk("fp32", 2, 1.0, 1.0, 0.6, 0.2, 0.3), mk("bf16", 2, 0.9, 1.0, 0.5, 0.2, 0.3),
                              mk("fp32", 1, 1.1, 1.0, 0.99, 0.4, 0.5)};
  const ValidationSummary s = summarize(cs, 3.0);
  REQUIRE(s.components.size() == 4);  // fp32, bf16, x1, x2
  CHECK(s.components[0].group == "fp32");
  CHECK(s.components[0].cases == 2);
  CHECK(s.components[0].step_pct == doctest::Approx(5.0));      // median of 0 and +10
  CHECK(s.components[0].compute_pct == doctest::Approx(15.0));  // median of +20 and +10
  CHECK(s.components[0].rest_ms == doctest::Approx(-45.0));     // median of -100 and +10 ms
  CHECK(s.components[1].group == "bf16");
  CHECK(s.components[1].step_pct == doctest::Approx(-10.0));
  CHECK(s.components[1].compute_pct == doctest::Approx(0.0));
  CHECK(s.components[1].rest_ms == doctest::Approx(-100.0));
  CHECK(s.components[2].group == "x1");
  CHECK(s.components[2].cases == 1);
  CHECK(s.components[3].group == "x2");
  CHECK(s.components[3].cases == 2);
  CHECK(s.components[3].compute_pct == doctest::Approx(10.0));  // median of +20 and 0
  // In the JSON and the table.
  const json j = to_json("m", "p", cs, s, 3.0);
  CHECK(j["summary"]["components"].size() == 4);
  CHECK(j["summary"]["components"][1]["group"] == "bf16");
  CHECK(j["summary"]["components"][1]["step_error_median_pct"].get<double>() == doctest::Approx(-10.0));
  const std::string t = to_table(cs, s);
  CHECK(t.find("where the error lives") != std::string::npos);
  CHECK(t.find("fp32   2 cases  step   +5.0%  compute  +15.0%  rest  -45.00 ms") != std::string::npos);
  // A failed case is left out.
  cs.push_back(mk("bf16", 4, 1.0, 0.0, 0.5, 0.2, 0.3));
  cs.back().status = "failed";
  CHECK(summarize(cs, 3.0).components.size() == 4);
}
