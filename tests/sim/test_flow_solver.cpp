// Unit tests of sim/flow_solver: max-min fair rates and phase completion times,
// each case computed by hand in the comments.
#include "sim/flow_solver.hpp"

#include <doctest.h>

#include <chrono>
#include <vector>

using dptwin::sim::max_min_rates;
using dptwin::sim::RoutedFlow;
using dptwin::sim::transfer_seconds;

TEST_CASE("max-min: two flows sharing one link get half each") {
  // Link 0 carries 10 B/s; flows a and b both cross it: 10 / 2 = 5 each.
  const std::vector<int> r{0};
  const std::vector<double> cap{10};
  const auto rates = max_min_rates({{&r, 1}, {&r, 1}}, cap, 1e9);
  CHECK(rates[0] == doctest::Approx(5));
  CHECK(rates[1] == doctest::Approx(5));
}

TEST_CASE("max-min: a flow bottlenecked elsewhere leaves the rest to the others") {
  // Classic example (Bertsekas & Gallager; SimGrid's maxmin tests):
  //   link 0: capacity 10, flows a and b;  link 1: capacity 4, flows b and c.
  // Fair shares: link 0 -> 10/2 = 5, link 1 -> 4/2 = 2. Link 1 saturates first:
  // b = c = 2. Link 0 then has 10 - 2 = 8 left for a alone: a = 8.
  const std::vector<int> ra{0}, rb{0, 1}, rc{1};
  const std::vector<double> cap{10, 4};
  const auto rates = max_min_rates({{&ra, 1}, {&rb, 1}, {&rc, 1}}, cap, 1e9);
  CHECK(rates[0] == doctest::Approx(8));
  CHECK(rates[1] == doctest::Approx(2));
  CHECK(rates[2] == doctest::Approx(2));
}

TEST_CASE("max-min: three bottleneck levels") {
  // Links: l0 cap 1, l1 cap 2, l2 cap 3. Flows f0: l0,l1; f1: l1,l2; f2: l2; f3: l0.
  // Round 1 shares: l0 1/2 = 0.5, l1 2/2 = 1, l2 3/2 = 1.5 -> l0 bottleneck: f0 = f3 = 0.5.
  // Round 2: l1 has 2 - 0.5 = 1.5 for f1 alone -> 1.5; l2 has 3/2 = 1.5 for f1, f2 (tie)
  //   -> f1 = f2 = 1.5. l2 total 3 (saturated), l1 total 2 (saturated).
  const std::vector<int> r0{0, 1}, r1{1, 2}, r2{2}, r3{0};
  const std::vector<double> cap{1, 2, 3};
  const auto rates = max_min_rates({{&r0, 1}, {&r1, 1}, {&r2, 1}, {&r3, 1}}, cap, 1e9);
  CHECK(rates[0] == doctest::Approx(0.5));
  CHECK(rates[1] == doctest::Approx(1.5));
  CHECK(rates[2] == doctest::Approx(1.5));
  CHECK(rates[3] == doctest::Approx(0.5));
}

TEST_CASE("max-min: local flows get the local rate") {
  const std::vector<int> empty, r{0};
  const std::vector<double> cap{10};
  const auto rates = max_min_rates({{&empty, 1}, {nullptr, 1}, {&r, 1}}, cap, 123);
  CHECK(rates[0] == doctest::Approx(123));
  CHECK(rates[1] == doctest::Approx(123));
  CHECK(rates[2] == doctest::Approx(10));
}

TEST_CASE("transfer_seconds re-rates flows when one finishes") {
  // One link of 10 B/s; a carries 10 B, b carries 30 B.
  // 0..2 s: both at 5 B/s; a done at t = 2 (b has 30 - 10 = 20 B left).
  // 2..4 s: b alone at 10 B/s finishes its 20 B in 2 s. Total 4 s
  // (without re-rating b would need 30 / 5 = 6 s).
  const std::vector<int> r{0};
  const std::vector<double> cap{10};
  std::vector<double> link_bytes;
  const double t = transfer_seconds({{&r, 10}, {&r, 30}}, cap, 1e9, &link_bytes);
  CHECK(t == doctest::Approx(4));
  REQUIRE(link_bytes.size() == 1);
  CHECK(link_bytes[0] == doctest::Approx(40));
}

TEST_CASE("transfer_seconds: re-rating frees a shared bottleneck for a multi-link flow") {
  // Example above (link 0 cap 10: a, b; link 1 cap 4: b, c) with a = 16 B, b = 4 B, c = 8 B.
  // Rates (8, 2, 2): a done at 16/8 = 2 s, b done at 4/2 = 2 s, c has 8 - 4 = 4 B left.
  // Then c alone on link 1 at 4 B/s: 1 s more. Total 3 s.
  const std::vector<int> ra{0}, rb{0, 1}, rc{1};
  const std::vector<double> cap{10, 4};
  CHECK(transfer_seconds({{&ra, 16}, {&rb, 4}, {&rc, 8}}, cap, 1e9) == doctest::Approx(3));
}

TEST_CASE("transfer_seconds: zero-byte flows and empty phases take no time") {
  const std::vector<int> r{0};
  const std::vector<double> cap{10};
  CHECK(transfer_seconds({}, cap, 1) == 0);
  CHECK(transfer_seconds({{&r, 0}}, cap, 1) == 0);
}

TEST_CASE("max-min is fast on a 4,096-flow ring step") {
  // A ring step on a two-level fat-tree-like layout: 4,096 flows of up to 6 links.
  // Device i: up-link 2i, down-link 2i+1 (to/from its leaf); leaf j = i / 32 has
  // up/down links to the spine at 8192 + 2j, 8193 + 2j.
  const int n = 4096;
  std::vector<std::vector<int>> routes(n);
  std::vector<double> cap(8192 + 2 * 128, 25e9);
  for (int l = 8192; l < static_cast<int>(cap.size()); ++l) cap[l] = 200e9;
  for (int i = 0; i < n; ++i) {
    const int j = (i + 1) % n;
    if (i / 32 == j / 32) routes[i] = {2 * i, 2 * j + 1};
    else routes[i] = {2 * i, 8192 + 2 * (i / 32), 8193 + 2 * (j / 32), 2 * j + 1};
  }
  std::vector<RoutedFlow> flows;
  for (const auto& r : routes) flows.push_back({&r, 1e6});
  const auto t0 = std::chrono::steady_clock::now();
  const double t = transfer_seconds(flows, cap, 1e12);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Every flow is limited by its 25 GB/s device link: 1 MB / 25 GB/s = 40 us.
  CHECK(t == doctest::Approx(40e-6).scale(0));
  CHECK(wall < 0.1);
}
