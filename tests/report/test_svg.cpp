// Structure of the SVG chart builders: axes, ticks, units, legends, series, bars, OOM marks.
#include <doctest.h>

#include <string>

#include "report/svg.hpp"

using namespace dptwin::report;

namespace {
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("xml_escape and format_si") {
  CHECK(xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  CHECK(format_si(0) == "0");
  CHECK(format_si(0.5) == "0.5");
  CHECK(format_si(800) == "800");
  CHECK(format_si(2500) == "2500");  // below 10k: digits stay readable
  CHECK(format_si(15000) == "15k");
  CHECK(format_si(2e6) == "2M");
  CHECK(format_si(3.5e9) == "3.5G");
}

TEST_CASE("nice_ticks cover the range with 1-2-5 steps") {
  auto t = nice_ticks(0, 97);  // raw step 19.4 -> 20
  REQUIRE(t.size() == 6);
  CHECK(t.front() == 0);
  CHECK(t.back() == doctest::Approx(100));
  CHECK(t[1] - t[0] == doctest::Approx(20));
  auto u = nice_ticks(0.12, 0.31);  // raw 0.038 -> 0.05 steps from 0.1 to 0.35
  CHECK(u.front() <= 0.12);
  CHECK(u.back() >= 0.31);
  CHECK(u[1] - u[0] == doctest::Approx(0.05));
  auto flat = nice_ticks(5, 5);  // degenerate range still gives an axis
  CHECK(flat.size() >= 2);
}

TEST_CASE("log2_ticks are powers of two around the data") {
  auto t = log2_ticks(3, 40);
  CHECK(t == std::vector<double>{2, 4, 8, 16, 32, 64});
  CHECK(log2_ticks(1, 1).size() == 2);  // one device still has an axis
}

TEST_CASE("Scale maps linear and log2 domains") {
  Scale lin{0, 10, 100, 200, false};
  CHECK(lin(5) == doctest::Approx(150));
  Scale lg{1, 64, 0, 60, true};
  CHECK(lg(8) == doctest::Approx(30));  // log2(8)=3 of log2(64)=6
}

TEST_CASE("line_chart has axes, tick labels, units, a legend and one group per series") {
  LineChartSpec s;
  s.title = "Step time vs devices";
  s.x = AxisSpec{"devices", "", true, {}, {}};
  s.y = AxisSpec{"step time", "ms", false, {}, {}};
  s.series = {Series{"dps", {{1, 100}, {2, 110}, {4, 120}}}, Series{"horovod", {{1, 90}, {4, 140}}},
              Series{"empty", {}}};
  s.reference_y = 150;
  s.reference_label = "limit";
  const std::string svg = line_chart(s);
  CHECK(svg.starts_with("<svg"));
  CHECK(svg.ends_with("</svg>"));
  CHECK(count(svg, "<svg") == 1);
  CHECK(count(svg, "class=\"axis\"") == 2);
  CHECK(svg.find(">step time (ms)</text>") != std::string::npos);
  CHECK(svg.find(">devices</text>") != std::string::npos);
  CHECK(count(svg, "class=\"series\"") == 2);  // the empty series is left out
  CHECK(count(svg, "class=\"legend-entry\"") == 2);
  CHECK(svg.find(">dps</text>") != std::string::npos);
  CHECK(svg.find(">horovod</text>") != std::string::npos);
  CHECK(count(svg, "<polyline") == 2);
  CHECK(count(svg, "class=\"marker\"") == 5);
  CHECK(count(svg, "class=\"reference\"") == 1);
  // x ticks 1, 2, 4 (log2); y ticks from 0 to at least 150
  CHECK(svg.find(">4</text>") != std::string::npos);
  CHECK(svg.find(">150</text>") != std::string::npos);
  CHECK(svg.find("<script") == std::string::npos);
}

TEST_CASE("line_chart without data still draws axes and says so") {
  LineChartSpec s;
  s.title = "nothing";
  s.y = AxisSpec{"throughput", "tokens/s", false, {}, {}};
  const std::string svg = line_chart(s);
  CHECK(count(svg, "class=\"axis\"") == 2);
  CHECK(svg.find("no data") != std::string::npos);
  CHECK(count(svg, "class=\"legend-entry\"") == 0);
}

TEST_CASE("scatter (markers only) with a diagonal") {
  LineChartSpec s;
  s.lines = false;
  s.diagonal = true;
  s.series = {Series{"cases", {{1, 1.1}, {2, 1.9}}}};
  const std::string svg = line_chart(s);
  CHECK(count(svg, "<polyline") == 0);
  CHECK(count(svg, "class=\"marker\"") == 2);
  CHECK(count(svg, "class=\"reference\"") == 1);
}

TEST_CASE("bar_chart stacks layers, marks OOM bars and draws the capacity line") {
  BarChartSpec s;
  s.title = "memory";
  s.y = AxisSpec{"memory per device", "GiB", false, {}, {}};
  s.layers = {"weights", "activations"};
  s.bars = {Bar{"dps @8", {10, 20}, false}, Bar{"dps mb=8 @8", {10, 90}, true}, Bar{"zero", {0, 0}, false}};
  s.reference = 80;
  s.reference_label = "capacity 80 GiB";
  const std::string svg = bar_chart(s);
  CHECK(count(svg, "class=\"bar") == 3);
  CHECK(count(svg, "class=\"bar oom\"") == 1);
  CHECK(count(svg, ">OOM</text>") == 1);
  CHECK(count(svg, "<rect x=") == 2 + 2 + 0 + 1 + 2);  // background + 2 + 2 bars' layers + 2 legend boxes
  CHECK(count(svg, "class=\"legend-entry\"") == 2);
  CHECK(svg.find("capacity 80 GiB") != std::string::npos);
  CHECK(svg.find(">memory per device (GiB)</text>") != std::string::npos);
  CHECK(svg.find(">100</text>") != std::string::npos);  // axis reaches the tallest bar (100)
  CHECK(svg.find(">dps @8</text>") != std::string::npos);
}
