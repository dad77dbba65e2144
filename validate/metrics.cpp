#include "validate/metrics.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dptwin::validate {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double error_pct(double predicted, double measured) {
  DPTWIN_ASSERT(measured > 0, "a measured time must be positive");
  return 100.0 * (predicted - measured) / measured;
}

double mape_pct(const std::vector<double>& p, const std::vector<double>& m) {
  DPTWIN_ASSERT(p.size() == m.size(), "predicted and measured differ in length");
  if (p.empty()) return 0;
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::abs(error_pct(p[i], m[i]));
  return s / static_cast<double>(p.size());
}

double worst_pct(const std::vector<double>& p, const std::vector<double>& m) {
  DPTWIN_ASSERT(p.size() == m.size(), "predicted and measured differ in length");
  double w = 0;
  for (size_t i = 0; i < p.size(); ++i) w = std::max(w, std::abs(error_pct(p[i], m[i])));
  return w;
}

double RankAgreement::tau() const {
  const int n = concordant + discordant + ties;
  return n == 0 ? 1.0 : static_cast<double>(concordant - discordant) / n;
}

RankAgreement kendall(const std::vector<double>& a, const std::vector<double>& b, const std::vector<int>& group) {
  DPTWIN_ASSERT(a.size() == b.size(), "orderings differ in length");
  DPTWIN_ASSERT(group.empty() || group.size() == a.size(), "groups differ in length");
  RankAgreement r;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      if (!group.empty() && group[i] != group[j]) continue;
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 || db == 0) ++r.ties;
      else if ((da > 0) == (db > 0)) ++r.concordant;
      else ++r.discordant;
    }
  return r;
}

double mann_whitney_p_less(const std::vector<double>& faster, const std::vector<double>& slower) {
  const size_t n1 = faster.size(), n2 = slower.size();
  if (n1 == 0 || n2 == 0) return 1.0;
  double u = 0;
  for (double f : faster)
    for (double s : slower) u += f > s ? 1.0 : (f == s ? 0.5 : 0.0);
  // ways[i][j][k]: arrangements of i values of one sample and j of the other
  // with U = k (the null distribution, counted by the last value's sample).
  const size_t umax = n1 * n2;
  std::vector<std::vector<std::vector<double>>> ways(
      n1 + 1, std::vector<std::vector<double>>(n2 + 1, std::vector<double>(umax + 1, 0.0)));
  for (size_t i = 0; i <= n1; ++i)
    for (size_t j = 0; j <= n2; ++j) {
      if (i == 0 || j == 0) {
        ways[i][j][0] = 1;
        continue;
      }
      for (size_t k = 0; k <= i * j; ++k)
        ways[i][j][k] = (k >= j ? ways[i - 1][j][k - j] : 0.0) + ways[i][j - 1][k];
    }
  double total = 0, below = 0;
  for (size_t k = 0; k <= umax; ++k) {
    total += ways[n1][n2][k];
    if (static_cast<double>(k) <= u + 1e-9) below += ways[n1][n2][k];
  }
  return below / total;
}

}  // namespace dptwin::validate
