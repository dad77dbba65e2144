// Fits recover known parameters from synthetic data (validate/profile_fit.hpp).
#include <doctest.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "models/workload.hpp"
#include "topology/cluster.hpp"
#include "validate/calibrate.hpp"
#include "validate/profile_fit.hpp"
#include "validate/sync_fit.hpp"

using namespace dptwin;
using namespace dptwin::validate;

TEST_CASE("efficiency curve: recovers max and half_work at a fixed peak") {
  // t = launch + w / (peak · max · w/(w+h)) with peak 100 GFLOP/s, max 0.6, h 2e7, launch 5 us.
  const double peak = 100e9, mx = 0.6, h = 2e7, launch = 5e-6;
  std::vector<WorkSample> s;
  for (double w = 1e5; w <= 1e11; w *= 3) s.push_back({w, launch + w / (peak * mx * w / (w + h))});
  CurveFit f = fit_efficiency_curve(s, launch, peak, false);
  CHECK(f.curve.max == doctest::Approx(mx).epsilon(1e-6));
  CHECK(f.curve.half_work == doctest::Approx(h).epsilon(1e-6));
  CHECK(f.peak == peak);
  CHECK(f.rms_rel_error < 1e-9);
}

TEST_CASE("efficiency curve: a measured rate above the datasheet raises the peak") {
  // The data run at 250 GFLOP/s asymptotically but the datasheet says 100: with
  // fit_peak the peak becomes 250/0.9 so that max = 0.9; the times are unchanged.
  std::vector<WorkSample> s;
  for (double w = 1e6; w <= 1e10; w *= 4) s.push_back({w, w / (250e9 * w / (w + 1e6))});
  CurveFit f = fit_efficiency_curve(s, 0, 100e9, true, 0.9);
  CHECK(f.curve.max == doctest::Approx(0.9));
  CHECK(f.peak == doctest::Approx(250e9 / 0.9).epsilon(1e-6));
  CHECK(f.curve.half_work == doctest::Approx(1e6).epsilon(1e-6));
  // Without fit_peak the efficiency is clamped to 1 and the fit is worse.
  CurveFit g = fit_efficiency_curve(s, 0, 100e9, false);
  CHECK(g.curve.max == 1.0);
  CHECK(g.rms_rel_error > 0.5);
}

namespace {
CommSample synth(double bytes, double alpha, double factor) {
  CommSample s;
  s.bytes = bytes;
  s.steps = 6;                // e.g. a 4-rank ring allreduce: 2(n-1) steps
  s.latency_s = 6 * 1e-6;     // 1 us per step at datasheet figures
  s.transfer_s = bytes * 1.5 / 8e9;  // 2(n-1)/n · S / 8 GB/s
  s.seconds = s.latency_s + 6 * alpha + s.transfer_s / factor;
  return s;
}
}  // namespace

TEST_CASE("comm regimes: two size regimes are found and recovered") {
  // Small messages (<= 1 MiB): 20 us per step, 0.5 x the datasheet bandwidth;
  // large ones: 150 us per step, 0.12 x (a 64 MiB allreduce several times slower per byte).
  std::vector<CommSample> s;
  for (double b = 4096; b <= 256.0 * 1024 * 1024; b *= 4)
    s.push_back(b <= 1024.0 * 1024 ? synth(b, 20e-6, 0.5) : synth(b, 150e-6, 0.12));
  RegimeFit f = fit_comm_regimes(s);
  REQUIRE(f.regimes.size() == 2);
  CHECK(f.regimes[0].alpha.seconds() == doctest::Approx(20e-6).epsilon(1e-3).scale(0));
  CHECK(f.regimes[0].bandwidth_factor == doctest::Approx(0.5).epsilon(1e-3));
  CHECK(f.regimes[1].alpha.seconds() == doctest::Approx(150e-6).epsilon(1e-3).scale(0));
  CHECK(f.regimes[1].bandwidth_factor == doctest::Approx(0.12).epsilon(1e-3));
  // The boundary lies between the last small (1 MiB) and the first large (4 MiB) size.
  CHECK(f.regimes[0].up_to > 1024.0 * 1024);
  CHECK(f.regimes[0].up_to < 4.0 * 1024 * 1024);
  CHECK(f.regimes[1].up_to == 0);
  CHECK(f.rms_rel_error < 1e-6);
  // Each regime names the sizes its fit saw: the gap between them is priced by interpolation.
  CHECK(f.regimes[0].measured_from == 4096);
  CHECK(f.regimes[0].measured_to == 1024.0 * 1024);
  CHECK(f.regimes[1].measured_from == 4.0 * 1024 * 1024);
  CHECK(f.regimes[1].measured_to == 256.0 * 1024 * 1024);
}

TEST_CASE("comm regimes: one regime when the data show one") {
  std::vector<CommSample> s;
  for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) {
    CommSample x = synth(b, 30e-6, 0.4);
    x.seconds *= (static_cast<int>(std::log2(b)) % 2 ? 1.02 : 0.98);  // +-2% noise
    s.push_back(x);
  }
  RegimeFit f = fit_comm_regimes(s);
  CHECK(f.regimes.size() == 1);
  CHECK(f.regimes[0].bandwidth_factor == doctest::Approx(0.4).epsilon(0.05));
  CHECK(f.regimes[0].alpha.seconds() == doctest::Approx(30e-6).epsilon(0.1).scale(0));
}

TEST_CASE("nominal decomposition on localhost-cpu: 2-rank ring allreduce") {
  // localhost-cpu: per-rank shared-memory copy 10 GB/s x 0.8 = 8 GB/s, shared 32 GB/s.
  // Ring on 2 ranks: 2 steps, each moving S/2 per rank at 8 GB/s => transfer S / 8e9;
  // hop latency: 1 us split over the two rank hops => 1 us per step.
  auto topo = topology::build_topology(topology::load_cluster_preset("localhost-cpu"), 2);
  CommSample s = nominal_comm(topo, sim::CollectiveKind::AllReduce, sim::Algorithm::Ring, 2, 8e6, 0.01);
  CHECK(s.steps == 2);
  CHECK(s.transfer_s == doctest::Approx(8e6 / 8e9).epsilon(1e-3));
  CHECK(s.latency_s == doctest::Approx(2e-6).epsilon(1e-3).scale(0));
}

TEST_CASE("efficiency table: a rate that rises then falls (cache) is recovered") {
  // 50 GFLOP/s at 1e5 FLOPs, 100 at 1e7 (in cache), 50 at 1e9 (out of cache); peak
  // fitted as 100/0.95. Per bin the median efficiency at the bin's work.
  std::vector<WorkSample> s{{1e5, 1e5 / 50e9}, {1e7, 1e7 / 100e9}, {1e9, 1e9 / 50e9}};
  CurveFit f = fit_efficiency_table(s, 0, 1e11, true, 0.95);
  CHECK(f.peak == doctest::Approx(100e9 / 0.95));
  REQUIRE(f.curve.table.size() == 3);
  CHECK(f.curve.at(1e7) == doctest::Approx(0.95));
  CHECK(f.curve.at(1e9) == doctest::Approx(0.475));
  CHECK(f.curve.at(1e11) == doctest::Approx(0.475));  // held beyond the end
  // Halfway in log(work) between 1e7 and 1e9: halfway between 0.95 and 0.475.
  CHECK(f.curve.at(1e8) == doctest::Approx(0.7125));
  CHECK(f.rms_rel_error < 1e-9);
}

TEST_CASE("efficiency table: a dispatch-bound bin keeps its entry but sets no peak") {
  // Calls of 1e4 bytes take 1.1 us against 1 us of dispatch: 0.1 us above it
  // reads as 100 GB/s. The peak comes from the bins well above dispatch (20
  // GB/s at 1e6 bytes, 10 at 1e8), and the small bin's entry is clamped to 1.
  const double launch = 1e-6;
  std::vector<WorkSample> s{{1e4, launch + 1e4 / 100e9}, {1e6, launch + 1e6 / 20e9}, {1e8, launch + 1e8 / 10e9}};
  CurveFit f = fit_efficiency_table(s, launch, 1e9, true, 0.95);
  CHECK(f.peak == doctest::Approx(20e9 / 0.95));
  REQUIRE(f.curve.table.size() == 3);
  CHECK(f.curve.table[0].second == doctest::Approx(1.0));
  CHECK(f.curve.at(1e6) == doctest::Approx(0.95));
  CHECK(f.curve.at(1e8) == doctest::Approx(0.475));
  // Only dispatch-bound bins: the best of them sets the peak as before.
  std::vector<WorkSample> tiny{{1e3, launch + 1e3 / 50e9}, {1e4, launch + 1e4 / 100e9}};
  CHECK(fit_efficiency_table(tiny, launch, 1e9, true, 0.95).peak == doctest::Approx(100e9 / 0.95));
}

namespace {
// A compute-mode document with fp32 GEMMs at 50 GFLOP/s (the best bin sets the
// peak) and memory ops at 10 GB/s; the rows are left in `rows` for more.
nlohmann::json compute_doc(nlohmann::json& rows) {
  using nlohmann::json;
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}, {"threads", 1},
              {"dispatch", {{"plain_s", 1e-6}, {"backward_chain_s", 2e-6}, {"backward_fixed_s", 1e-5}}}};
  rows = json::array();
  for (double f : {1e6, 1e7, 1e8, 1e9}) rows.push_back({{"op", "matmul"}, {"dtype", "fp32"}, {"flops", f}, {"seconds", f / 50e9 + 1e-6}});
  for (double b : {1e4, 1e5, 1e6, 1e7}) rows.push_back({{"op", "elementwise"}, {"dtype", "fp32"}, {"bytes", b}, {"seconds", b / 10e9 + 1e-6}});
  return doc;
}
// The matmul / add / dispatch loop's times (the core-sharing probe), alike at every rank count.
nlohmann::json sharing_loop() { return {{"matmul_s", 0.01}, {"elementwise_s", 0.001}, {"dispatch_s", 1e-5}}; }

// A compute document of a 2-core machine, with the loop probe run alone.
nlohmann::json two_core_compute() {
  nlohmann::json rows;
  nlohmann::json compute = compute_doc(rows);
  compute["compute"] = rows;
  compute["cores"] = 2;
  compute["concurrency"] = sharing_loop();
  return compute;
}
// A comm document of n ranks on that machine: `kinds` at `sizes`, each at
// `fixed_s` + bytes / 1 GB/s; the loop probe; the step skeleton's 3- and
// 12-matmul bursts with their arrival skews and extra times.
nlohmann::json skeleton_comm(int n, const std::vector<const char*>& kinds, const std::vector<double>& sizes, double fixed_s,
                             std::array<double, 2> bursts, std::array<double, 2> skews, std::array<double, 2> extras) {
  nlohmann::json c = {{"schema", "dptwin.microbench/1"}, {"mode", "comm"}, {"backend", "gloo"}, {"ranks", n}, {"threads", 1}};
  c["collectives"] = nlohmann::json::array();
  for (const char* kind : kinds)
    for (double b : sizes)
      c["collectives"].push_back({{"kind", kind}, {"backend", "gloo"}, {"ranks", n}, {"bytes", b}, {"seconds", fixed_s + b / 1e9}});
  c["concurrency"] = sharing_loop();
  c["sync"] = {{"ranks", n},
               {"skeletons",
                {{{"matmuls", 3}, {"burst_s", bursts[0]}, {"arrival_skew_s", skews[0]}, {"extra_s", extras[0]}},
                 {{"matmuls", 12}, {"burst_s", bursts[1]}, {"arrival_skew_s", skews[1]}, {"extra_s", extras[1]}}}}};
  return c;
}
}  // namespace

TEST_CASE("fit_profile: activation and O1-linear tables from their microbenchmark rows") {
  using nlohmann::json;
  json rows;
  json doc = compute_doc(rows);
  for (double f : {1e6, 1e7, 1e8, 1e9}) rows.push_back({{"op", "matmul"}, {"dtype", "bf16"}, {"flops", f}, {"seconds", f / 150e9 + 1e-6}});
  // GELU: 5 ns per element forward and 6 backward in fp32, 12 and 18 in bf16.
  for (double n : {1e4, 1e5, 1e6}) {
    for (auto [pass, dt, ns] : {std::tuple{"forward", "fp32", 5.0}, std::tuple{"backward", "fp32", 6.0},
                                std::tuple{"forward", "bf16", 12.0}, std::tuple{"backward", "bf16", 18.0}}) {
      const double fpe = std::string(pass) == "forward" ? models::kGeluFlopsPerElementForward : models::kGeluFlopsPerElementBackward;
      rows.push_back({{"op", "activation"}, {"pass", pass}, {"dtype", dt}, {"elements", n}, {"flops", fpe * n},
                      {"seconds", n * ns * 1e-9 + 1e-6}});
    }
  }
  doc["compute"] = rows;
  // The speed probe before and after the suite: the reference is their geometric mean.
  doc["speed_reference"] = {{"start", {{"matmul_s", 4e-3}, {"elementwise_s", 1e-4}, {"dispatch_s", 2e-6}}},
                            {"end", {{"matmul_s", 9e-3}, {"elementwise_s", 4e-4}, {"dispatch_s", 8e-6}}}};
  // An O1 linear (fwd + bwd = 3 GEMMs) at 60 GFLOP/s overall.
  doc["autocast_linear"] = json::array();
  for (double f : {1e6, 1e7, 1e8})
    doc["autocast_linear"].push_back(
        {{"shape", {1, 1, 1}}, {"flops", f}, {"fp32_s", 3 * (f / 35e9 + 1e-6)}, {"o1_s", 3 * (f / 60e9 + 1e-6)}});
  const topology::ClusterSpec cluster = topology::load_cluster_preset("localhost-cpu");
  const FitReport r = fit_profile(doc, {}, "gloo", cluster);
  const sim::DeviceProfile& p = r.profile;
  const double peak = p.spec.fp32_peak.value();
  // Time of the fused GELU forward of 1e5 elements recovered from the table: 0.5 ms.
  auto gelu_s = [&](const sim::EfficiencyCurve& c, double fpe, double n) { return fpe * n / (peak * c.at(fpe * n)); };
  CHECK(gelu_s(p.activation, models::kGeluFlopsPerElementForward, 1e5) == doctest::Approx(5e-4).epsilon(0.01).scale(0));
  CHECK(gelu_s(p.activation_backward, models::kGeluFlopsPerElementBackward, 1e5) == doctest::Approx(6e-4).epsilon(0.01).scale(0));
  CHECK(gelu_s(p.activation_half, models::kGeluFlopsPerElementForward, 1e5) == doctest::Approx(1.2e-3).epsilon(0.01).scale(0));
  CHECK(gelu_s(p.activation_half_backward, models::kGeluFlopsPerElementBackward, 1e5) == doctest::Approx(1.8e-3).epsilon(0.01).scale(0));
  CHECK(p.speed_reference.matmul_s == doctest::Approx(6e-3).scale(0));
  CHECK(p.speed_reference.elementwise_s == doctest::Approx(2e-4).scale(0));
  CHECK(p.speed_reference.dispatch_s == doctest::Approx(4e-6).scale(0));
  // O1 linear: per-GEMM rate 60 GFLOP/s against the fitted bf16 peak.
  REQUIRE_FALSE(p.matmul_o1.table.empty());
  CHECK(1e8 / (p.spec.bf16_peak.value() * p.matmul_o1.at(1e8)) == doctest::Approx(1e8 / 60e9).epsilon(0.01));
  // Its fp32 pass: fp32 linears at 35 GFLOP/s per GEMM against the fitted fp32 peak (the GEMM table's 50).
  REQUIRE_FALSE(p.matmul_linear.table.empty());
  CHECK(1e8 / (peak * p.matmul_linear.at(1e8)) == doctest::Approx(1e8 / 35e9).epsilon(0.01).scale(0));
  CHECK(1e8 / (peak * p.matmul.at(1e8)) == doctest::Approx(1e8 / 50e9).epsilon(0.05).scale(0));
}

TEST_CASE("speed normalisation: every probed figure rescaled to the readings' median speed") {
  using nlohmann::json;
  auto probe = [](const char* cls, double s) { return json{{"class", cls}, {"s", s}}; };
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}};
  // Three fp32 GEMMs, the second in a phase 2x slower (its probe read 2x too).
  doc["compute"] = json::array({{{"op", "matmul"}, {"seconds", 1.0}, {"min_s", 0.9}, {"probe", probe("matmul", 1.0)}},
                                {{"op", "matmul"}, {"seconds", 4.0}, {"min_s", 3.6}, {"probe", probe("matmul", 2.0)}},
                                {{"op", "matmul"}, {"seconds", 3.0}, {"probe", probe("matmul", 1.0)}},
                                {{"op", "add"}, {"seconds", 1e-6}, {"probe", probe("dispatch", 4e-6)}},
                                {{"op", "add"}, {"seconds", 3e-6}}});  // no reading: kept
  doc["dispatch"] = {{"plain_s", 6e-6}, {"backward_fixed_s", 20e-6}};
  doc["dispatch_probe"] = {{"plain_s", probe("dispatch", 2e-6)}, {"backward_fixed_s", probe("dispatch", 2e-6)}};
  doc["autocast_linear"] = json::array({{{"fp32_s", 1.0}, {"o1_s", 2.0}, {"fp32_probe", probe("matmul", 1.0)},
                                         {"o1_probe", probe("matmul_bf16", 0.1)}}});
  const SpeedReference ref = probe_reference({doc});
  CHECK(ref.at("matmul") == doctest::Approx(1.0));       // median of 1, 2, 1, 1
  CHECK(ref.at("dispatch") == doctest::Approx(2e-6).scale(0));    // median of 4, 2, 2 us
  CHECK(ref.at("matmul_bf16") == doctest::Approx(0.1));
  const json n = normalized_to_speed(doc, ref);
  CHECK(n["compute"][0]["seconds"].get<double>() == doctest::Approx(1.0));
  CHECK(n["compute"][1]["seconds"].get<double>() == doctest::Approx(2.0));  // the slow phase's 4 s at the common speed
  CHECK(n["compute"][1]["min_s"].get<double>() == doctest::Approx(1.8));
  CHECK(n["compute"][3]["seconds"].get<double>() == doctest::Approx(0.5e-6).scale(0));
  CHECK(n["compute"][4]["seconds"].get<double>() == doctest::Approx(3e-6).scale(0));
  CHECK(n["dispatch"]["plain_s"].get<double>() == doctest::Approx(6e-6).scale(0));
  CHECK(n["autocast_linear"][0]["o1_s"].get<double>() == doctest::Approx(2.0));
  CHECK(n["normalized_to"]["matmul"].get<double>() == doctest::Approx(1.0));
  // Normalised once only; a reading 10x off is clamped to 5x.
  CHECK(normalized_to_speed(n, {{"matmul", 3.0}}) == n);
  CHECK(normalized_to_speed(doc, {{"matmul", 10.0}})["compute"][0]["seconds"].get<double>() == doctest::Approx(5.0));
  // Documents without readings: no reference, unchanged.
  json old = {{"compute", json::array({{{"op", "matmul"}, {"seconds", 1.0}}})}};
  CHECK(probe_reference({old}).empty());
  CHECK(normalized_to_speed(old, probe_reference({old})) == old);
  // The reference of several passes is the median over all their readings.
  json fast = doc;
  for (auto& r : fast["compute"])
    if (r.contains("probe")) r["probe"]["s"] = r["probe"]["s"].get<double>() / 4;
  fast["autocast_linear"][0]["fp32_probe"]["s"] = 0.25;
  CHECK(probe_reference({doc, fast}).at("matmul") == doctest::Approx(0.75));  // median of 1,2,1,1 and 0.25,0.5,0.25,0.25
}

TEST_CASE("speed normalisation: a dispatch figure read three times is the median of its reads, each at the common speed") {
  using nlohmann::json;
  auto read = [](double seconds, double probe_s) { return json{{"seconds", seconds}, {"probe", {{"class", "dispatch"}, {"s", probe_s}}}}; };
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}};
  doc["compute"] = json::array({{{"op", "add"}, {"seconds", 1e-6}, {"probe", {{"class", "dispatch"}, {"s", 2e-6}}}}});
  // backward_chain_s: 6 us next to a 2 us reading, 12 us in a slow mode (reading 3 us), 5 us next to 2 us;
  // `dispatch` repeats the middle read, as the suite writes it.
  doc["dispatch_reads"] = {{"backward_chain_s", json::array({read(6e-6, 2e-6), read(12e-6, 3e-6), read(5e-6, 2e-6)})},
                           {"plain_s", json::array({read(2e-6, 2e-6), read(2e-6, 2e-6), read(2e-6, 2e-6)})}};
  doc["dispatch"] = {{"backward_chain_s", 12e-6}, {"plain_s", 2e-6}};
  doc["dispatch_probe"] = {{"backward_chain_s", {{"class", "dispatch"}, {"s", 3e-6}}}, {"plain_s", {{"class", "dispatch"}, {"s", 2e-6}}}};
  // The reference counts every read's reading once (the middle read not twice): 2 (case), 2, 3, 2, 2, 2, 2 us.
  const SpeedReference ref = probe_reference({doc});
  CHECK(ref.at("dispatch") == doctest::Approx(2e-6).scale(0));
  CHECK(probe_readings({doc}).size() == 7);
  const json n = normalized_to_speed(doc, ref);
  // Reads at the reference speed: 6, 8 (12 x 2/3), 5 us -> median 6 us (the middle read alone: 8).
  CHECK(n["dispatch"]["backward_chain_s"].get<double>() == doctest::Approx(6e-6).scale(0));
  CHECK(n["dispatch_reads"]["backward_chain_s"][1]["seconds"].get<double>() == doctest::Approx(8e-6).scale(0));
  CHECK(n["dispatch"]["plain_s"].get<double>() == doctest::Approx(2e-6).scale(0));
  // One read far off is outvoted: 6, 8, 20 us at the reference -> 8.
  json off = doc;
  off["dispatch_reads"]["backward_chain_s"][2] = read(20e-6, 2e-6);
  CHECK(normalized_to_speed(off, ref)["dispatch"]["backward_chain_s"].get<double>() == doctest::Approx(8e-6).scale(0));
  // The fit prices a kernel launch at half a (forward + backward) chain node, from the median.
  json rows;
  json full = compute_doc(rows);
  full["compute"] = rows;
  for (const char* k : {"dispatch_reads", "dispatch", "dispatch_probe"}) full[k] = doc[k];
  const FitReport r = fit_profile(full, {}, "gloo", topology::load_cluster_preset("localhost-cpu"));
  CHECK(r.profile.launch_overhead.seconds() == doctest::Approx(3e-6).scale(0));
}

TEST_CASE("speed normalisation: a short case follows the dispatch reading taken next to it, by its time") {
  using nlohmann::json;
  // bf16 calls: all dispatch up to 30 us, none from 1 ms, log-linear between.
  for (CallKind k : {CallKind::GemmHalf, CallKind::MemoryHalf}) {
    CHECK(dispatch_share(k, 1e-6) == 1.0);
    CHECK(dispatch_share(k, 30e-6) == 1.0);
    CHECK(dispatch_share(k, 1e-3) == 0.0);
    CHECK(dispatch_share(k, 5.0) == 0.0);
    CHECK(dispatch_share(k, std::sqrt(30e-6 * 1e-3)) == doctest::Approx(0.5));
    CHECK(dispatch_share(k, 100e-6) > dispatch_share(k, 300e-6));
  }
  // fp32 GEMMs: all dispatch up to 10 us, the passes' shares from 30 us (half
  // decades, log-linear between), none from 100 ms.
  CHECK(dispatch_share(CallKind::GemmFp32, 5e-6) == 1.0);
  CHECK(dispatch_share(CallKind::GemmFp32, 1e-5) == doctest::Approx(1.0));
  CHECK(dispatch_share(CallKind::GemmFp32, std::pow(10.0, -4.5)) == doctest::Approx(0.50));
  CHECK(dispatch_share(CallKind::GemmFp32, 1e-4) == doctest::Approx(0.45));
  CHECK(dispatch_share(CallKind::GemmFp32, std::pow(10.0, -2.5)) == doctest::Approx(0.17));
  CHECK(dispatch_share(CallKind::GemmFp32, std::pow(10.0, -1.5)) == doctest::Approx(0.07));
  CHECK(dispatch_share(CallKind::GemmFp32, 0.0) == 1.0);
  CHECK(dispatch_share(CallKind::GemmFp32, 1e-3) == doctest::Approx(0.20));
  CHECK(dispatch_share(CallKind::GemmFp32, std::sqrt(1e-4 * std::sqrt(1e-4 * 1e-3))) == doctest::Approx((0.45 + 0.28) / 2));
  CHECK(dispatch_share(CallKind::GemmFp32, 0.1) == 0.0);
  CHECK(dispatch_share(CallKind::GemmFp32, 5.0) == 0.0);
  // fp32 memory-class calls: three quarters dispatch at every size from 30 us (more below).
  CHECK(dispatch_share(CallKind::MemoryFp32, 1e-6) == 1.0);
  CHECK(dispatch_share(CallKind::MemoryFp32, std::pow(10.0, -4.5)) == doctest::Approx(0.75));
  CHECK(dispatch_share(CallKind::MemoryFp32, 20e-6) > 0.75);
  CHECK(dispatch_share(CallKind::MemoryFp32, 1e-3) == doctest::Approx(0.75));
  CHECK(dispatch_share(CallKind::MemoryFp32, 5.0) == doctest::Approx(0.75));
  // Host copies: their class's probe alone, however short.
  CHECK(dispatch_share(CallKind::HostCopy, 1e-5) == 0.0);
  CHECK(dispatch_share(CallKind::HostCopy, 1e-3) == 0.0);
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}};
  auto row = [](double seconds, double dispatch) {
    return json{{"op", "matmul"}, {"seconds", seconds}, {"probe", {{"class", "matmul_bf16"}, {"s", 1e-3}, {"dispatch_s", dispatch}}}};
  };
  // The GEMM probe at its reference; the dispatch probe read 2x its reference next to the first three cases.
  doc["compute"] = json::array({row(20e-6, 4e-6), row(std::sqrt(30e-6 * 1e-3), 4e-6), row(5e-3, 4e-6), row(1e-3, 2e-6),
                                {{"op", "add"}, {"seconds", 1e-6}, {"probe", {{"class", "dispatch"}, {"s", 2e-6}}}}});
  const SpeedReference ref = {{"matmul_bf16", 1e-3}, {"dispatch", 2e-6}};
  const json n = normalized_to_speed(doc, ref);
  CHECK(n["compute"][0]["seconds"].get<double>() == doctest::Approx(10e-6).scale(0));  // all dispatch: halved
  CHECK(n["compute"][1]["seconds"].get<double>() == doctest::Approx(std::sqrt(30e-6 * 1e-3) / std::sqrt(2.0)).epsilon(1e-3).scale(0));
  CHECK(n["compute"][2]["seconds"].get<double>() == doctest::Approx(5e-3).scale(0));  // long: its class's probe alone
  CHECK(n["compute"][3]["seconds"].get<double>() == doctest::Approx(1e-3).scale(0));
  CHECK(n["compute"][4]["seconds"].get<double>() == doctest::Approx(1e-6).scale(0));
  // Without a dispatch reference, the class's probe alone.
  CHECK(normalized_to_speed(doc, {{"matmul_bf16", 1e-3}})["compute"][0]["seconds"].get<double>() == doctest::Approx(20e-6).scale(0));
  // An fp32 GEMM of 1 ms and a memory-class call of 1 ms (fp32, and bf16 by
  // its row's dtype), their class probes at the reference, the dispatch one 2x
  // slow: the kind's share of the call follows the dispatch ratio.
  json kinds = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}};
  kinds["compute"] = json::array(
      {{{"op", "matmul"}, {"dtype", "fp32"}, {"seconds", 1e-3}, {"probe", {{"class", "matmul"}, {"s", 5e-3}, {"dispatch_s", 4e-6}}}},
       {{"op", "softmax"}, {"dtype", "fp32"}, {"seconds", 1e-3}, {"probe", {{"class", "elementwise"}, {"s", 4e-4}, {"dispatch_s", 4e-6}}}},
       {{"op", "softmax"}, {"dtype", "bf16"}, {"seconds", 1e-3}, {"probe", {{"class", "elementwise"}, {"s", 4e-4}, {"dispatch_s", 4e-6}}}}});
  // An optimizer row (no dtype: fp32 memory), a host copy (its class alone,
  // as at_speed moves host_memcpy) and an autocast row's two passes (fp32
  // GEMM and bf16 GEMM by their probes' classes), all of 1 ms.
  const json dispatch_slow = {{"class", "elementwise"}, {"s", 4e-4}, {"dispatch_s", 4e-6}};
  kinds["optimizer"] = json::array({{{"params", 4096}, {"tensors", 1}, {"seconds", 1e-3}, {"probe", dispatch_slow}}});
  kinds["memcpy"] = json::array({{{"bytes", 33554432.0}, {"seconds", 1e-3}, {"probe", dispatch_slow}}});
  kinds["autocast_linear"] = json::array(
      {{{"flops", 2e6}, {"fp32_s", 1e-3}, {"fp32_probe", {{"class", "matmul"}, {"s", 5e-3}, {"dispatch_s", 4e-6}}},
        {"o1_s", 1e-3}, {"o1_probe", {{"class", "matmul_bf16"}, {"s", 1e-3}, {"dispatch_s", 4e-6}}}}});
  const json nk = normalized_to_speed(kinds, {{"matmul", 5e-3}, {"matmul_bf16", 1e-3}, {"elementwise", 4e-4}, {"dispatch", 2e-6}});
  CHECK(nk["compute"][0]["seconds"].get<double>() == doctest::Approx(1e-3 * std::pow(0.5, 0.20)).scale(0));
  CHECK(nk["compute"][1]["seconds"].get<double>() == doctest::Approx(1e-3 * std::pow(0.5, 0.75)).scale(0));
  CHECK(nk["compute"][2]["seconds"].get<double>() == doctest::Approx(1e-3).scale(0));  // bf16: none from 1 ms
  CHECK(nk["optimizer"][0]["seconds"].get<double>() == doctest::Approx(1e-3 * std::pow(0.5, 0.75)).scale(0));
  CHECK(nk["memcpy"][0]["seconds"].get<double>() == doctest::Approx(1e-3).scale(0));
  CHECK(nk["autocast_linear"][0]["fp32_s"].get<double>() == doctest::Approx(1e-3 * std::pow(0.5, 0.20)).scale(0));
  CHECK(nk["autocast_linear"][0]["o1_s"].get<double>() == doctest::Approx(1e-3).scale(0));
}

TEST_CASE("speed normalisation: a GELU call is its plain dispatch by the dispatch ratio and a kernel by its class") {
  using nlohmann::json;
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", "compute"}};
  // The plain dispatch read twice: 1 us at the reference (2 us), 3 us at 2x it: 1 and 1.5 us at the reference, median 1.25 us.
  doc["dispatch_reads"]["plain_s"] = json::array({{{"seconds", 1e-6}, {"probe", {{"class", "dispatch"}, {"s", 2e-6}}}},
                                                  {{"seconds", 3e-6}, {"probe", {{"class", "dispatch"}, {"s", 4e-6}}}}});
  auto gelu = [](double seconds, double mm, double dispatch) {
    return json{{"op", "activation"}, {"seconds", seconds}, {"probe", {{"class", "matmul_bf16"}, {"s", mm}, {"dispatch_s", dispatch}}}};
  };
  doc["compute"] = json::array({gelu(10e-6, 1e-3, 4e-6),   // dispatch 2x slow, the kernel's class at the reference
                                gelu(10e-6, 2e-3, 2e-6),   // the class 2x slow, dispatch at the reference
                                gelu(1e-3, 2e-3, 4e-6),    // a long one, both 2x: halved
                                gelu(2e-6, 1e-3, 8e-6),    // shorter than its dispatch part at this reading: 5% kept as kernel
                                {{"op", "activation"}, {"seconds", 10e-6}, {"probe", {{"class", "dispatch"}, {"s", 4e-6}}}},
                                {{"op", "activation"}, {"seconds", 2e-6}, {"probe", {{"class", "dispatch"}, {"s", 8e-6}}}},
                                {{"op", "matmul"}, {"seconds", 10e-6}, {"probe", {{"class", "matmul_bf16"}, {"s", 1e-3}, {"dispatch_s", 4e-6}}}}});
  const SpeedReference ref = {{"matmul_bf16", 1e-3}, {"dispatch", 2e-6}};
  const json n = normalized_to_speed(doc, ref);
  const double plain = 1.25e-6;
  CHECK(n["compute"][0]["seconds"].get<double>() == doctest::Approx(plain + (10e-6 - 2 * plain)).scale(0));
  CHECK(n["compute"][1]["seconds"].get<double>() == doctest::Approx(plain + (10e-6 - plain) / 2).scale(0));
  CHECK(n["compute"][2]["seconds"].get<double>() == doctest::Approx(0.5e-3).scale(0));
  CHECK(n["compute"][3]["seconds"].get<double>() == doctest::Approx(plain + 0.05 * 2e-6).scale(0));
  // An older document's short GELU read by the dispatch probe alone: that ratio, as before, however short.
  CHECK(n["compute"][4]["seconds"].get<double>() == doctest::Approx(5e-6).scale(0));
  CHECK(n["compute"][5]["seconds"].get<double>() == doctest::Approx(0.5e-6).scale(0));
  // Any other short call: all dispatch (dispatch_share), halved.
  CHECK(n["compute"][6]["seconds"].get<double>() == doctest::Approx(5e-6).scale(0));
  CHECK(n["dispatch"]["plain_s"].get<double>() == doctest::Approx(plain).scale(0));
  // Without dispatch figures, a GELU call follows its class alone.
  json bare = doc;
  bare.erase("dispatch_reads");
  CHECK(normalized_to_speed(bare, ref)["compute"][1]["seconds"].get<double>() == doctest::Approx(5e-6).scale(0));
  // A document with one read of the plain dispatch (3 us at 2x the reference: 1.5 us there).
  json one = bare;
  one["dispatch"] = {{"plain_s", 3e-6}};
  one["dispatch_probe"] = {{"plain_s", {{"class", "dispatch"}, {"s", 4e-6}}}};
  CHECK(normalized_to_speed(one, ref)["compute"][1]["seconds"].get<double>() == doctest::Approx(1.5e-6 + (10e-6 - 1.5e-6) / 2).scale(0));
  // A plain dispatch figure that is not a number: left as it is, and the GELU call by its class.
  one["dispatch"]["plain_s"] = "fast";
  CHECK(normalized_to_speed(one, ref)["compute"][1]["seconds"].get<double>() == doctest::Approx(5e-6).scale(0));
}

TEST_CASE("fit_profile: a probed document is fitted at its readings' median speed, which becomes its reference") {
  using nlohmann::json;
  json rows;
  json doc = compute_doc(rows);
  // fp32 GEMMs at 100 GFLOP/s, half of them measured in a phase 2x slower (probe 2 ms instead of 1 ms).
  int k = 0;
  for (double f : {1e6, 1e7, 1e8, 1e9, 1e10}) {
    const bool slow = k++ % 2 == 1;
    rows.push_back({{"op", "matmul"}, {"dtype", "fp32"}, {"flops", f}, {"seconds", (f / 100e9) * (slow ? 2 : 1)},
                    {"probe", {{"class", "matmul"}, {"s", slow ? 2e-3 : 1e-3}}}});
  }
  for (auto& r : rows)
    if (!r.contains("probe")) r["probe"] = {{"class", "elementwise"}, {"s", 1e-4}};
  rows.push_back({{"op", "matmul"}, {"dtype", "bf16"}, {"flops", 1e9}, {"seconds", 1e9 / 400e9},
                  {"probe", {{"class", "matmul_bf16"}, {"s", 5e-4}}}});
  rows.push_back({{"op", "matmul"}, {"dtype", "bf16"}, {"flops", 1e8}, {"seconds", 1e8 / 400e9},
                  {"probe", {{"class", "matmul_bf16"}, {"s", 5e-4}}}});
  doc["compute"] = rows;
  doc["dispatch_probe"] = {{"plain_s", {{"class", "dispatch"}, {"s", 3e-6}}}};
  const FitReport r = fit_profile(doc, {}, "gloo", topology::load_cluster_preset("localhost-cpu"));
  const sim::DeviceProfile& p = r.profile;
  CHECK(p.speed_reference.matmul_s == doctest::Approx(1e-3).scale(0));  // median of 1, 2, 1, 2, 1 ms
  CHECK(p.speed_reference.matmul_bf16_s == doctest::Approx(5e-4).scale(0));
  CHECK(p.speed_reference.elementwise_s == doctest::Approx(1e-4).scale(0));
  CHECK(p.speed_reference.dispatch_s == doctest::Approx(3e-6).scale(0));
  // Every GEMM at the reference speed: 100 GFLOP/s for the largest.
  CHECK(1e10 / (p.spec.fp32_peak.value() * p.matmul.at(1e10)) == doctest::Approx(0.1).epsilon(0.02));
  CHECK(1e9 / (p.spec.fp32_peak.value() * p.matmul.at(1e9)) == doctest::Approx(0.01).epsilon(0.02));
}

TEST_CASE("fit_profile: rank synchronisation from the step-skeleton probe") {
  using nlohmann::json;
  json rows;
  json compute = compute_doc(rows);
  compute["compute"] = rows;
  json comm = {{"schema", "dptwin.microbench/1"}, {"mode", "comm"}, {"backend", "gloo"}, {"ranks", 4}, {"threads", 1}};
  comm["collectives"] = json::array();
  for (const char* kind : {"allreduce", "broadcast"})
    for (double b : {4096.0, 65536.0, 1048576.0})
      comm["collectives"].push_back({{"kind", kind}, {"backend", "gloo"}, {"ranks", 4}, {"bytes", b}, {"seconds", 1e-4 + b / 1e9}});
  // Skew 5 ms after a 25 ms burst and 10 ms after 100 ms: 10 ms after 100 ms on
  // the random-walk law for both (their implied exponent is 0.5 too); extra
  // time over the collectives alone 8 and 12 ms, two collectives after compute each.
  comm["sync"] = {{"ranks", 4},
                  {"skeletons",
                   {{{"matmuls", 3}, {"burst_s", 0.025}, {"arrival_skew_s", 0.005}, {"extra_s", 0.008}},
                    {{"matmuls", 12}, {"burst_s", 0.1}, {"arrival_skew_s", 0.01}, {"extra_s", 0.012}}}}};
  const topology::ClusterSpec cluster = topology::load_cluster_preset("localhost-cpu");
  const FitReport r = fit_profile(compute, {comm}, "gloo", cluster);
  // Each table names the algorithm its alphas were fitted per step of: Gloo's
  // broadcast measured as one fan-out step, the allreduce as a ring.
  REQUIRE(r.profile.network.size() == 2);
  for (const auto& t : r.profile.network) {
    CAPTURE(t.collective);
    REQUIRE(t.algorithm);
    CHECK(*t.algorithm == (t.collective == "broadcast" ? sim::Algorithm::ParameterServer : sim::Algorithm::Ring));
  }
  REQUIRE(r.profile.sync_by_ranks.size() == 1);
  const auto& c = r.profile.sync_by_ranks[0];
  CHECK(c.ranks == 4);
  CHECK(c.lag.seconds() == doctest::Approx(0.010));
  CHECK(c.exponent == doctest::Approx(0.5));
  CHECK(c.latency.seconds() == doctest::Approx(0.005));
  CHECK(r.diagnostics["sync_probe_exponent"]["4"].get<double>() == doctest::Approx(0.5));
  // Resolved for the rank count: nothing for one rank.
  CHECK(r.profile.shared_by(4).sync_lag.seconds() == doctest::Approx(0.010));
  CHECK(r.profile.shared_by(1).sync_lag == Time::zero());
  CHECK(r.profile.shared_by(1).sync_latency == Time::zero());
  // Time-sliced ranks (no core count, or more ranks than cores): no skew between cores.
  CHECK(r.profile.speed_states.rank_skew.empty());
  // Two ranks with a core each: the skew in proportion to the burst, the
  // least-squares 2% through 0.5 ms after 25 ms and 2 ms after 100 ms, as
  // the host's state (speed_states.rank_skew); no random-walk lag.
  {
    json two = comm;
    two["ranks"] = 2;
    two["cores"] = 2;
    for (auto& c : two["collectives"]) c["ranks"] = 2;
    two["sync"]["ranks"] = 2;
    two["sync"]["skeletons"][0]["arrival_skew_s"] = 0.0005;
    two["sync"]["skeletons"][1]["arrival_skew_s"] = 0.002;
    json four = comm;
    four["cores"] = 2;
    const FitReport s = fit_profile(compute, {two, four}, "gloo", cluster);
    REQUIRE(s.profile.speed_states.rank_skew.size() == 1);
    CHECK(s.profile.speed_states.rank_skew[0].first == 2);
    CHECK(s.profile.speed_states.rank_skew[0].second == doctest::Approx(0.02));
    CHECK(s.profile.speed_states.cores == 2);
    CHECK(s.profile.shared_by(2).sync_lag == Time::zero());
    CHECK(s.profile.shared_by(2).sync_skew == doctest::Approx(0.02));
    CHECK(s.profile.shared_by(2).sync_latency.seconds() == doctest::Approx(0.005));
    // The 4 ranks on 2 cores keep their random-walk lag and no skew.
    CHECK(s.profile.shared_by(4).sync_lag.seconds() == doctest::Approx(0.010));
    CHECK(s.profile.shared_by(4).sync_skew == 0.0);
    CHECK(s.diagnostics["rank_skew"]["2"]["random_walk_lag_s"].get<double>() > 0);
    // Two threads a rank: 2 ranks fill 4 cores' worth, time-sliced on 2: the random walk.
    two["threads"] = 2;
    const FitReport t = fit_profile(compute, {two, four}, "gloo", cluster);
    CHECK(t.profile.speed_states.rank_skew.empty());
    CHECK(t.profile.shared_by(2).sync_lag.seconds() > 0);
  }
  // With the bursts' start spread measured, the extra time less it: 3 and 5 ms
  // of the 8 and 12 ms (the late start comes back as skew, which the lag prices).
  comm["sync"]["skeletons"][0]["extra_less_spread_s"] = 0.003;
  comm["sync"]["skeletons"][1]["extra_less_spread_s"] = 0.005;
  CHECK(fit_profile(compute, {comm}, "gloo", cluster).profile.sync_by_ranks.at(0).latency.seconds() ==
        doctest::Approx(0.002));
  // The skew's trimmed mean, where there is one, instead of its median: twice
  // the skew, twice the lag.
  comm["sync"]["skeletons"][0]["arrival_skew_mean_s"] = 0.010;
  comm["sync"]["skeletons"][1]["arrival_skew_mean_s"] = 0.020;
  CHECK(fit_profile(compute, {comm}, "gloo", cluster).profile.sync_by_ranks.at(0).lag.seconds() ==
        doctest::Approx(0.020));
  // The comm-state reference; how far the tables followed it from pass to
  // pass (calibrate's comm_state_exponent) is a diagnostic only: the profile
  // maps by the ratio itself.
  comm["comm_state"] = {{"seconds", 2e-3}, {"exponent_fit", 0.4}, {"exponent_pairs", 99}};
  const FitReport with_state = fit_profile(compute, {comm}, "gloo", cluster);
  REQUIRE(with_state.profile.comm_reference.size() == 1);
  CHECK(with_state.profile.comm_reference[0].second == doctest::Approx(2e-3));
  CHECK(with_state.profile.comm_state_exponent.empty());
  CHECK(with_state.profile.comm_state_exponent_for(4) == 1.0);
  CHECK(with_state.diagnostics["comm_state_exponent"]["4"]["exponent"].get<double>() == doctest::Approx(0.4));
  CHECK(with_state.diagnostics["comm_state_exponent"]["4"]["points"].get<int>() == 99);
  // Compute slowdown while communication runs: the median of the probe's paired
  // ratios where it has one, else the ratio of its two medians.
  comm["overlap"] = {{"compute_alone_s", 0.1}, {"compute_with_comm_s", 0.15}, {"comm_alone_s", 0.05}, {"slowdown", 0.3}};
  CHECK(fit_profile(compute, {comm}, "gloo", cluster).profile.overlap_slowdown == doctest::Approx(0.3));
  comm["overlap"].erase("slowdown");
  CHECK(fit_profile(compute, {comm}, "gloo", cluster).profile.overlap_slowdown == doctest::Approx(0.5));
  // The probe's stall (how much of the allreduce waited for the compute) by
  // the document's rank count; documents without it leave the list empty.
  CHECK(fit_profile(compute, {comm}, "gloo", cluster).profile.comm_stall_by_ranks.empty());
  comm["overlap"]["stall"] = 0.93;
  const FitReport stalled = fit_profile(compute, {comm}, "gloo", cluster);
  REQUIRE(stalled.profile.comm_stall_by_ranks.size() == 1);
  CHECK(stalled.profile.comm_stall_by_ranks[0].first == comm.value("ranks", 0));
  CHECK(stalled.profile.comm_stall_by_ranks[0].second == doctest::Approx(0.93));
  CHECK(stalled.profile.shared_by(2).comm_stall == doctest::Approx(0.93));
  CHECK(stalled.profile.comm_stall_one_by_ranks.empty());
  comm["overlap"]["stall_one"] = 0.05;  // rank 0 alone computing: its transfers ran on an idle core
  const FitReport one = fit_profile(compute, {comm}, "gloo", cluster);
  REQUIRE(one.profile.comm_stall_one_by_ranks.size() == 1);
  CHECK(one.profile.shared_by(2).comm_stall_one == doctest::Approx(0.05));
  comm.erase("overlap");
  // A collective's price: the mean of its rounds' medians where the document
  // has it, else the median. 1 ms more in every mean -> a larger fixed cost.
  const auto allreduce_alpha = [&](const json& doc) {
    for (const auto& t : fit_profile(compute, {doc}, "gloo", cluster).profile.network)
      if (t.collective == "allreduce") return t.regimes.at(0).alpha.seconds();
    return -1.0;
  };
  const double alpha_median = allreduce_alpha(comm);
  json with_mean = comm;
  for (auto& row : with_mean["collectives"]) row["mean_s"] = row["seconds"].get<double>();
  CHECK(allreduce_alpha(with_mean) == doctest::Approx(alpha_median));
  for (auto& row : with_mean["collectives"]) row["mean_s"] = row["seconds"].get<double>() + 1e-3;
  CHECK(allreduce_alpha(with_mean) > alpha_median + 1e-4);
  // The comm-state probe's run median becomes the tables' reference state
  // (none without it), written in the profile YAML's network section.
  CHECK(r.profile.comm_reference.empty());
  json probed = comm;
  probed["comm_state"] = {{"kind", "allreduce"}, {"bytes", 4096}, {"ranks", 4}, {"seconds", 1.5e-4},
                          {"readings_s", {1.4e-4, 1.5e-4, 1.9e-4}}};
  const FitReport pr = fit_profile(compute, {probed}, "gloo", cluster);
  REQUIRE(pr.profile.comm_reference.size() == 1);
  CHECK(pr.profile.comm_reference[0].first == 4);
  CHECK(pr.profile.comm_reference[0].second == doctest::Approx(1.5e-4));
  CHECK(pr.diagnostics["comm_state_probe"]["4"]["seconds"].get<double>() == doctest::Approx(1.5e-4));
  CHECK(profile_yaml(pr.profile, "t", "test", "gloo").find("- {ranks: 4, allreduce_4k: 150 us}") != std::string::npos);
  // A probe without skeletons is a malformed document.
  comm["sync"] = {{"ranks", 4}};
  CHECK_THROWS_AS(fit_profile(compute, {comm}, "gloo", cluster), InputError);
}

TEST_CASE("fit_profile: Horovod's loop probe gives the slowdown by ranks; its negotiations while computing are diagnostics") {
  using nlohmann::json;
  json rows;
  json compute = compute_doc(rows);
  compute["compute"] = rows;
  auto comm_at = [&](int n, json loop) {
    json c = {{"schema", "dptwin.microbench/1"}, {"mode", "comm"}, {"backend", "gloo"}, {"ranks", n}, {"threads", 1}};
    c["collectives"] = json::array();
    for (double b : {4096.0, 65536.0, 1048576.0})
      c["collectives"].push_back({{"kind", "allreduce"}, {"backend", "gloo"}, {"ranks", n}, {"bytes", b}, {"seconds", 1e-4 + b / 1e9}});
    c["horovod_loop"] = std::move(loop);
    return c;
  };
  const topology::ClusterSpec cluster = topology::load_cluster_preset("localhost-cpu");
  const json two = {{"slowdown", 0.4}, {"negotiation_s", 4e-4}, {"negotiation_busy_s", 4.5e-4}, {"negotiation_busy_mean_s", 1.3e-3}};
  const json four = {{"slowdown", 0.3}, {"negotiation_s", 3e-3}, {"negotiation_busy_s", 9e-3}, {"negotiation_busy_mean_s", 1.1e-2}};
  const FitReport r = fit_profile(compute, {comm_at(2, two), comm_at(4, four)}, "gloo", cluster);
  CHECK(r.profile.shared_by(2).background_loop_slowdown == doctest::Approx(0.4));
  CHECK(r.profile.shared_by(4).background_loop_slowdown == doctest::Approx(0.3));
  CHECK(r.diagnostics["negotiation_probe_s"]["2"].get<double>() == doctest::Approx(4e-4).scale(0));
  CHECK(r.diagnostics["negotiation_busy_probe_s"]["2"]["median"].get<double>() == doctest::Approx(4.5e-4).scale(0));
  CHECK(r.diagnostics["negotiation_busy_probe_s"]["4"]["trimmed_mean"].get<double>() == doctest::Approx(1.1e-2).scale(0));
  // Documents from before the busy timing fit the same way, without the diagnostic.
  const FitReport old = fit_profile(compute, {comm_at(2, {{"slowdown", 0.4}, {"negotiation_s", 4e-4}})}, "gloo", cluster);
  CHECK(old.profile.shared_by(2).background_loop_slowdown == doctest::Approx(0.4));
  CHECK_FALSE(old.diagnostics.contains("negotiation_busy_probe_s"));
}

TEST_CASE("fit_profile: core sharing beyond the cores: time-slicing, the skeleton reported") {
  using nlohmann::json;
  json compute = two_core_compute();
  auto comm_at = [&](int n, double short_burst, double long_burst) {
    return skeleton_comm(n, {"allreduce"}, {4096.0, 65536.0, 1048576.0}, 1e-4, {short_burst, long_burst}, {0.001, 0.002},
                         {0.001, 0.001});
  };
  const topology::ClusterSpec cluster = topology::load_cluster_preset("localhost-cpu");
  // Four ranks on two cores time-slice them: 2.0 while all four compute (the
  // simulator applies it only while the tasks overlap). The skeleton's longest
  // burst ran 1.75x its 2-rank time: reported, not fitted.
  FitReport r = fit_profile(compute, {comm_at(2, 0.010, 0.040), comm_at(4, 0.016, 0.070)}, "gloo", cluster);
  CHECK(r.profile.sharing_factor(2) == doctest::Approx(1.0));
  CHECK(r.profile.sharing_factor(4) == doctest::Approx(2.0));
  CHECK(r.diagnostics["host_sharing_skeleton"]["4"].get<double>() == doctest::Approx(1.75));
  r = fit_profile(compute, {comm_at(4, 0.016, 0.070)}, "gloo", cluster);
  REQUIRE(!r.profile.host_sharing.empty());
  CHECK(r.profile.sharing_factor(4) == doctest::Approx(2.0));
  CHECK_FALSE(r.diagnostics.contains("host_sharing_skeleton"));
  // The 4-rank run's own pairs (every rank vs two bursting) are the reported
  // reading where the run has them, at their trimmed mean where present.
  json four = comm_at(4, 0.016, 0.070);
  four["sync"]["core_sharing"] = {{"matmuls", 12}, {"ranks_bursting", 2}, {"ratio", 1.8}, {"pairs", 24}};
  r = fit_profile(compute, {comm_at(2, 0.010, 0.040), four}, "gloo", cluster);
  CHECK(r.diagnostics["host_sharing_skeleton"]["4"].get<double>() == doctest::Approx(1.8));
  four["sync"]["core_sharing"]["ratio_trimmed_mean"] = 1.9;
  r = fit_profile(compute, {four}, "gloo", cluster);
  CHECK(r.diagnostics["host_sharing_skeleton"]["4"].get<double>() == doctest::Approx(1.9));
  CHECK(r.profile.sharing_factor(4) == doctest::Approx(2.0));
  // Two threads per rank: two ranks already fill the two cores.
  compute["threads"] = 2;
  r = fit_profile(compute, {comm_at(2, 0.010, 0.040), comm_at(4, 0.016, 0.070)}, "gloo", cluster);
  CHECK(r.profile.sharing_factor(2) == doctest::Approx(2.0));
  CHECK(r.profile.sharing_factor(4) == doctest::Approx(4.0));
}

TEST_CASE("median_of_documents: numbers by their median, structure and strings from the first") {
  using nlohmann::json;
  const json a = {{"mode", "compute"}, {"threads", 1}, {"rows", {{{"op", "matmul"}, {"seconds", 1.0}}, {{"op", "add"}, {"seconds", 4.0}}}},
                  {"only_here", 7.0}, {"list", {1.0, 2.0}}};
  const json b = {{"mode", "compute"}, {"threads", 1}, {"rows", {{{"op", "matmul"}, {"seconds", 3.0}}, {{"op", "add"}, {"seconds", 5.0}}}},
                  {"list", {1.0, 2.0, 3.0}}};
  const json c = {{"mode", "compute"}, {"threads", 1}, {"rows", {{{"op", "matmul"}, {"seconds", 2.0}}, {{"op", "add"}, {"seconds", 9.0}}}},
                  {"list", {5.0, 6.0}}};
  const json m = median_of_documents({a, b, c});
  CHECK(m["mode"] == "compute");
  CHECK(m["threads"] == 1);
  CHECK(m["rows"][0]["op"] == "matmul");
  CHECK(m["rows"][0]["seconds"].get<double>() == doctest::Approx(2.0));  // median of 1, 3, 2
  CHECK(m["rows"][1]["seconds"].get<double>() == doctest::Approx(5.0));  // one slow pass (9) does not set it
  CHECK(m["only_here"].get<double>() == doctest::Approx(7.0));          // missing elsewhere: the first's
  CHECK(m["list"] == a["list"]);                                        // lengths differ: the first's
  CHECK(median_of_documents({a, b})["rows"][1]["seconds"].get<double>() == doctest::Approx(4.5));  // even count: mean of the middle two
  CHECK(median_of_documents({}).is_null());
}

TEST_CASE("fit_profile: the probe readings' spread around the reference becomes the profile's speed states") {
  using nlohmann::json;
  json rows;
  json doc = compute_doc(rows);
  doc["cores"] = 2;
  // Ten GEMMs, five read next to a 1 ms probe, five next to 2 ms (a bimodal host): reference 1.5 ms.
  for (int k = 0; k < 10; ++k) {
    const bool slow = k % 2 == 1;
    rows.push_back({{"op", "matmul"}, {"dtype", "fp32"}, {"flops", 1e6 * (k + 1)}, {"seconds", 1e-4 * (slow ? 2 : 1)},
                    {"min_s", 1e-4}, {"probe", {{"class", "matmul"}, {"s", slow ? 2e-3 : 1e-3}}}});
  }
  // Three bf16 readings only: too few for a spread.
  for (int k = 0; k < 3; ++k)
    rows.push_back({{"op", "matmul"}, {"dtype", "bf16"}, {"flops", 1e8}, {"seconds", 1e-4},
                    {"probe", {{"class", "matmul_bf16"}, {"s", 5e-4}}}});
  doc["compute"] = rows;
  const sim::SpeedStates s = speed_states(normalized_to_speed(doc, probe_reference({doc})), probe_reference({doc}));
  CHECK(s.cores == 2);
  REQUIRE(s.matmul.size() == 20);
  CHECK(s.matmul.front() == doctest::Approx(1.0 / 1.5));
  CHECK(s.matmul.back() == doctest::Approx(2.0 / 1.5));
  CHECK(std::is_sorted(s.matmul.begin(), s.matmul.end()));
  CHECK(s.matmul_bf16.empty());
  // One reading per case (13), not one per figure (seconds and min_s); a median document's own readings win.
  CHECK(probe_readings({doc}).size() == 13);
  json merged = doc;
  merged["probe_readings"] = probe_readings({doc, doc});
  CHECK(probe_readings({merged}).size() == 26);
  const sim::SpeedStates twice = speed_states(merged, probe_reference({doc}));
  CHECK(twice.matmul.front() == doctest::Approx(s.matmul.front()));
  CHECK(sim::expected_slowest(twice.matmul, 2) == doctest::Approx(sim::expected_slowest(s.matmul, 2)).epsilon(0.03));
  CHECK(sim::expected_slowest(s.matmul, 1) == doctest::Approx(1.0).epsilon(0.01));
  CHECK(sim::expected_slowest(s.matmul, 2) > 1.15);
  // Readings that name their pass are read against their pass's level: two
  // passes, one wholly at twice the other's times, keep only their spread within.
  json fast = doc, slow = doc;
  for (auto& row : slow["compute"])
    if (row.contains("probe")) row["probe"]["s"] = row["probe"]["s"].get<double>() * 2;
  json passes = doc;
  passes["probe_readings"] = probe_readings({fast, slow});
  REQUIRE(passes["probe_readings"].size() == 26);
  CHECK(passes["probe_readings"][0]["pass"] == 0);
  CHECK(passes["probe_readings"][13]["pass"] == 1);
  const sim::SpeedStates levelled = speed_states(passes, probe_reference({fast, slow}));
  CHECK(levelled.matmul.front() == doctest::Approx(1.0 / 1.5));  // each pass: 1 and 2 ms around 1.5, 2 and 4 around 3
  CHECK(levelled.matmul.back() == doctest::Approx(2.0 / 1.5));
  json unnamed = passes;
  for (auto& r : unnamed["probe_readings"]) r.erase("pass");
  CHECK(speed_states(unnamed, probe_reference({fast, slow})).matmul.back() > 1.9);  // 4 ms against the common 2 ms
  // fit_profile records them, and writes them into the profile.
  const FitReport r = fit_profile(doc, {}, "gloo", topology::load_cluster_preset("localhost-cpu"));
  CHECK(r.profile.speed_states.matmul == s.matmul);
  CHECK(r.diagnostics["speed_states_slowest_of"]["matmul"][1].get<double>() == doctest::Approx(sim::expected_slowest(s.matmul, 2)));
  CHECK(profile_yaml(r.profile, "t", "test", "gloo").find("speed_states:") != std::string::npos);
}

TEST_CASE("fit_profile: the ranks' sync costs make the simulator run the step skeleton in its measured cycles") {
  // 2 and 4 ranks on 2 cores (the core-sharing case above). The cycles are
  // the simulator's own with the components' lag at 4 ranks and a known
  // latency (1 ms, the components say 4.5): beyond the cores the fit must
  // find that latency back; with a core per rank it keeps the components.
  using nlohmann::json;
  const json compute = two_core_compute();
  auto comm_at = [&](int n, double short_burst, double long_burst) {
    return skeleton_comm(n, {"allreduce", "broadcast"}, {8.0, 4096.0, 65536.0, 1048576.0}, 2e-4 * n,
                         {short_burst, long_burst}, {0.005, 0.012}, {0.008, 0.010});
  };
  const topology::ClusterSpec cluster = topology::load_cluster_preset("localhost-cpu");
  const json two = comm_at(2, 0.010, 0.040);
  json four = comm_at(4, 0.016, 0.070);
  const FitReport components = fit_profile(compute, {two, four}, "gloo", cluster);
  const auto& pc = components.profile;
  REQUIRE(pc.sync_by_ranks.size() == 2);
  CHECK_FALSE(components.diagnostics.contains("sync_cycle_fit"));  // no cycles: the components
  // The skeletons as the fit sets them up: the 2-rank bursts (a core each), the optimizer at the memory bandwidth.
  std::vector<std::pair<sim::SyncSkeleton, double>> probes;
  for (double burst : {0.010, 0.040}) {
    sim::SyncSkeleton sk;
    sk.ranks = 4;
    sk.burst = Time::from_seconds(burst);
    sk.optimizer = skeleton_optimizer(pc);
    probes.emplace_back(sk, 0.0);
  }
  const topology::Topology topo = topology::build_topology(cluster, 4);
  const sim::DeviceProfile::SyncCost truth{4, pc.sync_by_ranks.at(1).lag, 0.5, Time::ms(1)};
  const std::vector<double> cycles = simulated_sync_cycles(pc, topo, probes, truth);
  REQUIRE(cycles.size() == 2);
  four["sync"]["skeletons"][0]["cycle_s"] = cycles[0];
  four["sync"]["skeletons"][1]["cycle_s"] = cycles[1];
  const FitReport r = fit_profile(compute, {two, four}, "gloo", cluster);
  const auto& c = r.profile.sync_by_ranks.at(1);
  CHECK(c.ranks == 4);
  CHECK(c.lag == pc.sync_by_ranks.at(1).lag);
  CHECK(c.latency.seconds() == doctest::Approx(0.001).epsilon(0.01));
  CHECK(pc.sync_by_ranks.at(1).latency.seconds() == doctest::Approx(0.0045));  // the components' (8 + 10 ms) / 4
  CHECK(c.exponent == 0.5);
  CHECK(r.diagnostics["sync_cycle_fit"]["4"]["rms_rel_error"].get<double>() < 1e-3);
  CHECK_FALSE(r.diagnostics["sync_cycle_fit"]["4"]["latency_at_zero"].get<bool>());
  CHECK(r.diagnostics["sync_cycle_fit"]["4"]["burst_scale"].get<double>() == 1.0);
  CHECK(r.diagnostics["sync_cycle_fit"]["4"]["skeletons"][1]["measured_cycle_s"].get<double>() == doctest::Approx(cycles[1]));
  // The components stay a diagnostic; at 2 ranks (a core each) they are the
  // cost, cycles or not.
  CHECK(r.diagnostics["rank_sync_components"]["4"]["lag_s"].get<double>() ==
        doctest::Approx(pc.sync_by_ranks.at(1).lag.seconds()));
  json two_cycles = two;
  two_cycles["sync"]["skeletons"][0]["cycle_s"] = 0.5;
  two_cycles["sync"]["skeletons"][1]["cycle_s"] = 0.9;
  const FitReport with_two = fit_profile(compute, {two_cycles, four}, "gloo", cluster);
  CHECK(with_two.profile.sync_by_ranks.at(0).lag == pc.sync_by_ranks.at(0).lag);
  CHECK(with_two.profile.sync_by_ranks.at(0).latency == pc.sync_by_ranks.at(0).latency);
  CHECK_FALSE(with_two.diagnostics["sync_cycle_fit"].contains("2"));
  // Cycles shorter than the simulator's with the lag alone: no latency.
  four["sync"]["skeletons"][0]["cycle_s"] = 0.5 * cycles[0];
  four["sync"]["skeletons"][1]["cycle_s"] = 0.5 * cycles[1];
  const FitReport shorter = fit_profile(compute, {two, four}, "gloo", cluster);
  const auto& none = shorter.profile.sync_by_ranks.at(1);
  CHECK(none.lag == pc.sync_by_ranks.at(1).lag);
  CHECK(none.latency == Time::zero());
  CHECK(shorter.diagnostics["sync_cycle_fit"]["4"]["latency_at_zero"].get<bool>());
  // The 4-rank run's own burst with one rank per core bursting (12 matmuls,
  // 10% over the 2-rank run's) rescales both skeletons' bursts alone.
  four["sync"]["core_sharing"] = {{"matmuls", 12}, {"ranks_bursting", 2}, {"burst_one_per_core_s", 0.044},
                                  {"burst_every_rank_s", 0.075}, {"ratio", 1.7}};
  const FitReport rescaled = fit_profile(compute, {two, four}, "gloo", cluster);
  const json& fit4 = rescaled.diagnostics["sync_cycle_fit"]["4"];
  CHECK(fit4["burst_scale"].get<double>() == doctest::Approx(1.1));
  CHECK(fit4["skeletons"][0]["burst_alone_s"].get<double>() == doctest::Approx(0.011));
  CHECK(fit4["skeletons"][1]["burst_alone_s"].get<double>() == doctest::Approx(0.044));
  // Documents without a skeleton with a core per rank keep the components.
  const FitReport alone_four = fit_profile(compute, {four}, "gloo", cluster);
  CHECK_FALSE(alone_four.diagnostics.contains("sync_cycle_fit"));
}
