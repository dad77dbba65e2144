// validate/metrics.hpp — error and ranking statistics of predictions vs measurements.
//
// Pure functions over plain vectors; inputs must have equal lengths.
#pragma once

#include <vector>

namespace dptwin::validate {

// Median of `v` (mean of the middle two for an even count; 0 when empty).
double median(std::vector<double> v);

// Signed error of one prediction in percent: 100 · (predicted - measured) / measured.
// REQUIRES: measured > 0.
double error_pct(double predicted, double measured);

// Mean absolute percentage error: 100/n · Σ |p_i - m_i| / m_i (0 for no cases).
double mape_pct(const std::vector<double>& predicted, const std::vector<double>& measured);

// Largest |error_pct| (0 for no cases).
double worst_pct(const std::vector<double>& predicted, const std::vector<double>& measured);

// Pairwise agreement of two orderings of the same items.
struct RankAgreement {
  int concordant = 0;   // pairs ordered the same way by both
  int discordant = 0;   // pairs ordered oppositely
  int ties = 0;         // pairs tied in either ordering (neither concordant nor discordant)
  // Kendall's tau-a over the compared pairs: (C - D) / (C + D + T); 1 when there is no pair.
  double tau() const;
};

// Compares the orderings of `a` and `b` over all pairs i < j. When `group` is
// given, only pairs with group[i] == group[j] are compared (strategies ranked
// within one configuration), and counts are pooled over the groups.
RankAgreement kendall(const std::vector<double>& a, const std::vector<double>& b, const std::vector<int>& group = {});

// Exact one-sided Mann-Whitney p-value that the values of `faster` tend to be
// smaller than those of `slower`: P(U <= U_observed) under the null of one
// distribution, U = #pairs (f, s) with f > s (+1/2 for equal values). Complete
// separation gives 1 / C(n1+n2, n1): 1/252 for 5 vs 5, 1/20 for 3 vs 3.
// 1 when either sample is empty.
double mann_whitney_p_less(const std::vector<double>& faster, const std::vector<double>& slower);

}  // namespace dptwin::validate
