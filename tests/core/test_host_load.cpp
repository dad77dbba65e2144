// The hypervisor's stolen CPU time from /proc/stat text (core/host_load.hpp).
#include <doctest/doctest.h>

#include "core/host_load.hpp"

using namespace dptwin;

TEST_CASE("cpu times: the aggregate line, steal its 8th column, guest time not double counted") {
  const std::string text =
      "cpu  3555729 163111 353399 4185093 2706 0 21455 189829 7 9\n"
      "cpu0 1777864 81555 176699 2092546 1353 0 10727 94914 0 0\n"
      "intr 1 2 3\n";
  const CpuTimes t = parse_cpu_times(text);
  REQUIRE(t.ok);
  CHECK(t.steal == 189829);
  CHECK(t.total == 3555729ULL + 163111 + 353399 + 4185093 + 2706 + 0 + 21455 + 189829);  // guest columns left out
  CHECK_FALSE(parse_cpu_times("cpu0 1 2 3 4 5 6 7 8\n").ok);  // no aggregate line
  CHECK_FALSE(parse_cpu_times("cpu  1 2 3\n").ok);             // too short (no steal column)
}

TEST_CASE("steal_pct: the share of the ticks between two readings") {
  CpuTimes a{1000, 10, true}, b{3000, 110, true};
  CHECK(steal_pct(a, b) == doctest::Approx(5.0));  // 100 of 2000 ticks
  CHECK(steal_pct(b, a) == -1);                    // time went backwards: unknown
  CHECK(steal_pct(a, a) == -1);                    // no time passed
  CHECK(steal_pct(CpuTimes{}, b) == -1);           // unreadable
  CHECK(steal_pct(read_cpu_times("/nonexistent/stat"), b) == -1);
}

TEST_CASE("calm rounds: those at or below the warning share, or all when none is") {
  CHECK(calm_rounds({0.1, 12.0, 2.0}) == std::vector<bool>{true, false, true});
  CHECK(calm_rounds({-1, 30.0}) == std::vector<bool>{true, false});  // unknown counts as calm
  CHECK(calm_rounds({5.0, 30.0, 2.1}) == std::vector<bool>{true, true, true});
  CHECK(calm_rounds({}).empty());
}
