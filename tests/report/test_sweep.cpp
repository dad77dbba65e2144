// Sweeps: rank shares, equality across thread counts, JSON round trip, the progress bar.
#include <doctest.h>

#include <sstream>

#include "report/result_json.hpp"
#include "report/sweep.hpp"
#include "sim/output.hpp"
#include "sim/simulate.hpp"

using namespace dptwin;
using namespace dptwin::report;

namespace {

sim::Scenario bucket_sweep() { return sim::load_builtin_scenario("bucket-sweep"); }

std::string json_of(const sim::Scenario& sc, const std::vector<sim::PointResult>& r) {
  sim::OutputOptions o;
  o.wall_time = false;
  std::ostringstream s;
  sim::write_json(s, sim::header_of(sc), r, o);
  return s.str();
}

std::string csv_of(const std::vector<sim::PointResult>& r) {
  sim::OutputOptions o;
  o.wall_time = false;
  std::ostringstream s;
  sim::write_csv(s, r, o);
  return s.str();
}

}  // namespace

TEST_CASE("rank shares partition the points round-robin") {
  CHECK(rank_share(7, 0, 3) == std::vector<size_t>{0, 3, 6});
  CHECK(rank_share(7, 1, 3) == std::vector<size_t>{1, 4});
  CHECK(rank_share(7, 2, 3) == std::vector<size_t>{2, 5});
  CHECK(rank_share(2, 3, 4).empty());
  CHECK(rank_share(5, 0, 1).size() == 5);
  size_t total = 0;
  for (int r = 0; r < 4; ++r) total += rank_share(1001, r, 4).size();
  CHECK(total == 1001);
}

TEST_CASE("sweep output is identical for 1, 2 and 4 threads") {
  const auto sc = bucket_sweep();
  MpiWorld one;  // a plain run: one rank
  SweepOptions o1, o2, o4;
  o1.threads = 1, o2.threads = 2, o4.threads = 4;
  const auto r1 = run_sweep(sc.points, one, o1);
  const auto r2 = run_sweep(sc.points, one, o2);
  const auto r4 = run_sweep(sc.points, one, o4);
  REQUIRE(r1.size() == sc.points.size());
  CHECK(json_of(sc, r1) == json_of(sc, r2));
  CHECK(json_of(sc, r1) == json_of(sc, r4));
  CHECK(csv_of(r1) == csv_of(r2));
}

TEST_CASE("results survive the JSON round trip exactly (how MPI ranks send them)") {
  const auto sc = bucket_sweep();
  const auto res = sim::simulate_all(sc.points, 2);
  std::vector<sim::PointResult> back;
  for (size_t i = 0; i < res.size(); ++i) {
    const auto text = sim::point_to_json(res[i], i).dump();
    back.push_back(point_from_json(nlohmann::ordered_json::parse(text)));
  }
  CHECK(json_of(sc, back) == json_of(sc, res));
  CHECK(csv_of(back) == csv_of(res));
  // a whole document
  const auto doc = nlohmann::ordered_json::parse(json_of(sc, res));
  CHECK(csv_of(points_from_json(doc)) == csv_of(res));
  CHECK_THROWS_AS(point_from_json(nlohmann::ordered_json::parse("{\"index\": 0}")), std::runtime_error);
}

TEST_CASE("mpi_gather without an active world places a rank's share in order") {
  std::vector<sim::PointResult> mine(2);
  mine[0].status = std::string(1, 'a');  // (GCC 12 warns, wrongly, on assigning a literal here: -Wrestrict)
  mine[1].status = std::string(1, 'b');
  auto out = mpi_gather(MpiWorld{}, 4, {1, 3}, mine);
  REQUIRE(out.size() == 4);
  CHECK(out[1].status == "a");
  CHECK(out[3].status == "b");
}

TEST_CASE("plain runs are not MPI runs") {
  // The test runner is not started by mpirun (unless someone does so on purpose).
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_SIZE"))
    CHECK_FALSE(launched_by_mpirun());
  MpiWorld w = mpi_start(nullptr, nullptr);
  CHECK(w.size >= 1);
  mpi_stop(w);
}

TEST_CASE("progress bar text") {
  CHECK(ProgressBar::render("sweep", 5, 10, 2.0, 10) == "sweep [#####.....] 5/10 (50%) 2.0 s, ~2 s left");
  CHECK(ProgressBar::render("sweep", 10, 10, 4.0, 4) == "sweep [####] 10/10 (100%) 4.0 s");
  std::ostringstream quiet;
  ProgressBar off(quiet, "x", false);
  off.update(1, 2);
  off.finish();
  CHECK(quiet.str().empty());
  std::ostringstream loud;
  ProgressBar on(loud, "x", true);
  on.update(2, 2);
  on.finish();
  CHECK(loud.str().find("2/2") != std::string::npos);
  CHECK(loud.str().ends_with("\n"));
}
