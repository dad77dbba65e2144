// The profile YAML round trip, and the simulator consuming a fitted profile:
// size regimes of collectives, core sharing (sim/device_profile.hpp, sim/collectives.hpp).
#include <doctest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"
#include "validate/profile_fit.hpp"
#include "validate/validation.hpp"

using namespace dptwin;
using namespace dptwin::validate;

namespace {
sim::DeviceProfile sample_profile() {
  sim::DeviceProfile p = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  p.spec.fp32_peak = FlopRate(123.4e9);
  p.spec.bf16_peak = FlopRate(234.5e9);
  p.spec.memory_bandwidth = Bandwidth(17.5e9);
  p.matmul = {0.8, 3.2e6};
  p.batched_matmul = {0.55, 1.5e6};
  p.memory = {0.7, 2.5e4};
  p.launch_overhead = Time::from_seconds(6.25e-6);
  p.step_overhead = Time::from_seconds(40e-6);
  p.overlap_slowdown = 0.15;
  p.background_loop_slowdown = 0.31;
  p.optimizer_bytes_per_param = 27.5;
  p.matmul_half.table = {{1e6, 0.1}, {1e9, 0.8}};
  p.optimizer_kernels_per_tensor = 7;
  p.host_memcpy = Bandwidth(9e9);
  p.host_sharing = {{1, 1.0}, {2, 1.1}, {4, 2.2}};
  sim::CommCalibration t;
  t.collective = "allreduce";
  t.ranks = 2;
  t.regimes = {{1048576 * 2, Time::from_seconds(20e-6), 0.5, 4096, 1048576},
               {0, Time::from_seconds(150e-6), 0.12, 4194304, 268435456}};
  t.algorithm = sim::Algorithm::Ring;
  p.network.push_back(t);
  return p;
}

// The message a profile document `y` (as file p.yaml) is refused with; "" when accepted.
std::string err(const std::string& y) {
  sim::DeviceProfile p;
  try {
    sim::apply_profile_document(load_yaml_string(y, "p.yaml"), p);
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::string();
}
}  // namespace

TEST_CASE("profile YAML round trip") {
  sim::DeviceProfile p = sample_profile();
  const std::string y = profile_yaml(p, "rt", "test", "gloo");
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(y, "rt.yaml"), q);
  CHECK(q.spec.fp32_peak.value() == doctest::Approx(p.spec.fp32_peak.value()).epsilon(1e-5));
  CHECK(q.spec.bf16_peak.value() == doctest::Approx(p.spec.bf16_peak.value()).epsilon(1e-5));
  CHECK(q.spec.memory_bandwidth.value() == doctest::Approx(p.spec.memory_bandwidth.value()).epsilon(1e-5));
  CHECK(q.matmul.max == doctest::Approx(0.8));
  CHECK(q.matmul.half_work == doctest::Approx(3.2e6));
  CHECK(q.batched_matmul.half_work == doctest::Approx(1.5e6));
  CHECK(q.memory.max == doctest::Approx(0.7));
  CHECK(q.launch_overhead.seconds() == doctest::Approx(6.25e-6).epsilon(1e-3).scale(0));
  CHECK(q.step_overhead.seconds() == doctest::Approx(40e-6).epsilon(1e-3).scale(0));
  CHECK(q.overlap_slowdown == doctest::Approx(0.15));
  CHECK(q.background_loop_slowdown == doctest::Approx(0.31));
  CHECK(q.optimizer_bytes_per_param == doctest::Approx(27.5));
  REQUIRE(q.matmul_half.table.size() == 2);
  CHECK(q.matmul_half.at(1e9) == doctest::Approx(0.8));
  CHECK(q.batched_matmul_half.table.empty());
  CHECK(q.optimizer_kernels_per_tensor == 7);
  CHECK(q.host_memcpy.value() == doctest::Approx(9e9));
  REQUIRE(q.host_sharing.size() == 3);
  CHECK(q.host_sharing[2].second == doctest::Approx(2.2));
  REQUIRE(q.network.size() == 1);
  CHECK(q.network[0].collective == "allreduce");
  CHECK(q.network[0].ranks == 2);
  REQUIRE(q.network[0].algorithm);
  CHECK(*q.network[0].algorithm == sim::Algorithm::Ring);
  REQUIRE(q.network[0].regimes.size() == 2);
  CHECK(q.network[0].regimes[0].up_to == doctest::Approx(2097152));
  CHECK(q.network[0].regimes[1].alpha.seconds() == doctest::Approx(150e-6).epsilon(1e-3).scale(0));
  CHECK(q.network[0].regimes[1].bandwidth_factor == doctest::Approx(0.12));
  CHECK(q.network[0].regimes[0].measured_from == 4096);
  CHECK(q.network[0].regimes[0].measured_to == 1048576);
  CHECK(q.network[0].regimes[1].measured_from == 4194304);
  CHECK(q.network[0].regimes[1].measured_to == 268435456);
}

TEST_CASE("profile errors are located") {
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{alpha: 1 us, bandwidth_factor: 0}]}\n")
            .find("p.yaml:3") != std::string::npos);
  CHECK(err("network:\n  tables:\n    - {collective: alltoall, regimes: [{alpha: 1 us, bandwidth_factor: 1}]}\n")
            .find("unknown collective") != std::string::npos);
  CHECK(err("device:\n  host_sharing: [{ranks: 4, factor: 2}, {ranks: 2, factor: 1}]\n").find("ascending") !=
        std::string::npos);
  CHECK(err("devize: {}\n").find("devize") != std::string::npos);
  // A regime's measured sizes: two, ascending, and above the previous regime's.
  const std::string three = err(
      "network:\n  tables:\n    - {collective: allreduce, regimes: [{alpha: 1 us, bandwidth_factor: 1, measured: [1, 2, 3]}]}\n");
  CHECK(three.find("p.yaml:3") != std::string::npos);
  CHECK(three.find("measured") != std::string::npos);
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{alpha: 1 us, bandwidth_factor: 1, measured: [8 KiB, 4 KiB]}]}\n")
            .find("smallest <= largest") != std::string::npos);
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{up_to: 4 MiB, alpha: 1 us, bandwidth_factor: 1, "
            "measured: [4 KiB, 2 MiB]}, {alpha: 1 us, bandwidth_factor: 1, measured: [1 MiB, 8 MiB]}]}\n")
            .find("ascend") != std::string::npos);
  // The bound between two regimes lies between their measured sizes.
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{up_to: 1 MiB, alpha: 1 us, bandwidth_factor: 1, "
            "measured: [4 KiB, 2 MiB]}, {alpha: 1 us, bandwidth_factor: 1, measured: [4 MiB, 8 MiB]}]}\n")
            .find("beyond the regime's up_to") != std::string::npos);
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{up_to: 2 MiB, alpha: 1 us, bandwidth_factor: 1, "
            "measured: [4 KiB, 1 MiB]}, {alpha: 1 us, bandwidth_factor: 1, measured: [2 MiB, 8 MiB]}]}\n")
            .find("previous regime's up_to") != std::string::npos);
  CHECK(err("network:\n  tables:\n    - {collective: allreduce, regimes: [{up_to: 2 MiB, alpha: 1 us, bandwidth_factor: 1, "
            "measured: [4 KiB, 1 MiB]}, {alpha: 1 us, bandwidth_factor: 1, measured: [4 MiB, 8 MiB]}]}\n") == "");
  const std::string alg =
      err("network:\n  tables:\n    - {collective: broadcast, algorithm: star, regimes: [{alpha: 1 us, bandwidth_factor: 1}]}\n");
  CHECK(alg.find("p.yaml:3") != std::string::npos);
  CHECK(alg.find("algorithm") != std::string::npos);
  CHECK(alg.find("star") != std::string::npos);
}

TEST_CASE("calibrated_with: how the ranks ran round-trips, and a validation running them otherwise is told") {
  sim::DeviceProfile p = sample_profile();
  CHECK(profile_yaml(p, "t", "test", "gloo").find("calibrated_with") == std::string::npos);  // not recorded
  p.calibrated_with = {1, "auto", "gloo", "localhost-cpu"};
  sim::DeviceProfile q;
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  CHECK(q.calibrated_with.threads == 1);
  CHECK(q.calibrated_with.bind == "auto");
  CHECK(q.calibrated_with.backend == "gloo");
  CHECK(q.calibrated_with.cluster == "localhost-cpu");

  ValidationMatrix m;  // threads 1, bind auto, backend gloo
  CHECK(calibration_mismatches(q.calibrated_with, m).empty());
  CHECK(calibration_mismatches(sim::DeviceProfile::Conditions{}, m).empty());  // an older profile: nothing to say
  m.bind = "none";
  m.cluster = "/somewhere/netns-4x-10gbit.yaml";  // another cluster is no mismatch: its links come from its topology
  auto d = calibration_mismatches(q.calibrated_with, m);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "bind: calibrated auto, the matrix runs none");
  m.threads = 2;
  m.backend = "mpi";
  CHECK(calibration_mismatches(q.calibrated_with, m).size() == 3);

  // Recorded in validation.json's summary and printed under the table.
  ValidationSummary s;
  s.profile_mismatches = d;
  CHECK(to_json("m", "p.yaml", {}, s, 3.0)["summary"]["profile_mismatches"][0] == d[0]);
  CHECK(to_table({}, s).find("profile: bind: calibrated auto, the matrix runs none") != std::string::npos);
  CHECK_FALSE(to_json("m", "p.yaml", {}, ValidationSummary{}, 3.0)["summary"].contains("profile_mismatches"));

  CHECK(err("calibrated_with: {threads: 1, bind: socket}\n").find("bind must be auto, core or none") != std::string::npos);
  CHECK(err("calibrated_with: {threads: 0}\n").find("p.yaml:1") != std::string::npos);
  CHECK(err("calibrated_with: {thread: 1}\n").find("thread") != std::string::npos);
}

TEST_CASE("the network model applies the regime of the message size") {
  // 2-rank ring allreduce on localhost-cpu: 2 steps, nominal transfer S/8e9, 1 us per step.
  // Regime 1 (S <= 2 MiB): +20 us per step, bandwidth x0.5  => 2·(1+20) us + 2·S/8e9;
  // regime 2: +150 us per step, x0.12                       => 2·(1+150) us + S/(0.12·8e9).
  auto topo = topology::build_topology(topology::load_cluster_preset("localhost-cpu"), 2);
  sim::NetworkOptions no;
  no.calibration = sample_profile().network;
  sim::NetworkModel net(topo, no);
  sim::CollectiveRequest r;
  r.kind = sim::CollectiveKind::AllReduce;
  r.algorithm = sim::Algorithm::Ring;
  r.ranks = {0, 1};
  r.bytes = Bytes(1e6);
  CHECK(net.cost(r).duration.seconds() == doctest::Approx(42e-6 + 2 * 1e6 / 8e9).epsilon(1e-4).scale(0));
  r.bytes = Bytes(64e6);
  CHECK(net.cost(r).duration.seconds() == doctest::Approx(302e-6 + 64e6 / (0.12 * 8e9)).epsilon(1e-4).scale(0));
  // Analytic mode agrees.
  no.mode = sim::NetworkMode::Analytic;
  sim::NetworkModel an(topo, no);
  CHECK(an.cost(r).duration.seconds() == doctest::Approx(302e-6 + 64e6 / (0.12 * 8e9)).epsilon(1e-4).scale(0));
  // A broadcast has no table of its kind: datasheet figures.
  r.kind = sim::CollectiveKind::Broadcast;
  r.bytes = Bytes(1e6);
  const double plain = sim::NetworkModel(topo, sim::NetworkOptions{}).cost(r).duration.seconds();
  CHECK(net.cost(r).duration.seconds() == doctest::Approx(plain));
}

TEST_CASE("a table prices a request with the algorithm its alphas were fitted for") {
  // A 4-rank broadcast table fitted as one fan-out step (alpha 400 us). A DDP
  // buffer broadcast asks for a ring (a chain of 3 steps): priced as the table's
  // fan-out it costs one alpha, as the chain it would cost three.
  auto topo = topology::build_topology(topology::load_cluster_preset("localhost-cpu"), 4);
  sim::CommCalibration t;
  t.collective = "broadcast";
  t.ranks = 4;
  t.regimes = {{0, Time::us(400), 1.0}};
  sim::CollectiveRequest ring;
  ring.kind = sim::CollectiveKind::Broadcast;
  ring.algorithm = sim::Algorithm::Ring;
  ring.ranks = {0, 1, 2, 3};
  ring.bytes = Bytes(8);
  sim::CollectiveRequest fan_out = ring;
  fan_out.algorithm = sim::Algorithm::ParameterServer;
  for (auto mode : {sim::NetworkMode::Flow, sim::NetworkMode::Analytic}) {
    sim::NetworkOptions as_asked;
    as_asked.mode = mode;
    as_asked.calibration = {t};
    sim::NetworkOptions as_fitted = as_asked;
    as_fitted.calibration[0].algorithm = sim::Algorithm::ParameterServer;
    sim::NetworkModel asked(topo, as_asked), fitted(topo, as_fitted);
    CHECK(fitted.cost(ring).duration == asked.cost(fan_out).duration);
    CHECK(fitted.cost(ring).duration.seconds() == doctest::Approx(400e-6).epsilon(0.01));
    CHECK(asked.cost(ring).duration.seconds() == doctest::Approx(1200e-6).epsilon(0.01));
    // Another kind, or no table of its kind, keeps its own algorithm.
    sim::CollectiveRequest allreduce = ring;
    allreduce.kind = sim::CollectiveKind::AllReduce;
    CHECK(fitted.cost(allreduce).duration == sim::NetworkModel(topo, as_asked).cost(allreduce).duration);
  }
}

TEST_CASE("find_comm_regime picks the nearest rank count of the request's kind") {
  std::vector<sim::CommCalibration> t(3);
  t[0] = {"", "allreduce", 2, {{0, Time::us(1), 1}}, {}};
  t[1] = {"", "allreduce", 4, {{0, Time::us(2), 1}}, {}};
  t[2] = {"", "", 0, {{0, Time::us(3), 1}}, {}};
  sim::CollectiveRequest r;
  r.ranks = {0, 1, 2};  // 3: equally near 2 and 4 -> the smaller
  int ti = -1;
  CHECK(sim::find_comm_regime(t, r, &ti)->alpha == Time::us(1));
  r.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(sim::find_comm_regime(t, r, &ti)->alpha == Time::us(2));
  r.kind = sim::CollectiveKind::Reduce;
  CHECK(sim::find_comm_regime(t, r, &ti)->alpha == Time::us(3));
}

TEST_CASE("core sharing slows compute, and the simulator uses it") {
  sim::DeviceProfile p = sample_profile();
  CHECK(p.sharing_factor(1) == 1.0);
  CHECK(p.sharing_factor(3) == doctest::Approx(1.65));  // halfway between 1.1 and 2.2
  CHECK(p.sharing_factor(8) == doctest::Approx(4.4));   // beyond: proportional to ranks
  sim::DeviceProfile s = p.shared_by(4);
  CHECK(s.matmul.max == doctest::Approx(0.8 / 2.2));
  CHECK(s.launch_overhead.seconds() == doctest::Approx(6.25e-6 * 2.2).epsilon(1e-3).scale(0));
  // A 4-rank dps point: predicted compute grows by the factor when sharing is on.
  ValidationMatrix m;
  ValidationCase c{"tiny", "dps", 4, "fp32", 4, 0};
  sim::PointSpec pt = point_for_case(m, c, "");
  const double base = sim::simulate_point(pt).breakdown.compute_s;
  pt.profile.host_sharing = {{1, 1.0}, {4, 2.0}};
  const double shared = sim::simulate_point(pt).breakdown.compute_s;
  CHECK(shared == doctest::Approx(2 * base).epsilon(0.05));
  // The simulator shares the cores among the compute running at each moment:
  // the central server's optimizer runs while the workers wait, at full speed,
  // where a fixed factor would slow it too.
  CHECK(p.shared_by(4, sim::DeviceProfile::SharingMode::ByExecutor).matmul.max == doctest::Approx(0.8));
  ValidationCase ps{"tiny", "sps", 4, "fp32", 4, 0};
  sim::PointSpec sp = point_for_case(m, ps, "");
  const sim::PointResult alone = sim::simulate_point(sp);
  sp.profile.host_sharing = {{1, 1.0}, {4, 2.0}};
  const sim::PointResult sliced = sim::simulate_point(sp);
  CHECK(sliced.breakdown.compute_s == doctest::Approx(2 * alone.breakdown.compute_s).epsilon(0.05));
  CHECK(sliced.breakdown.optimizer_s == doctest::Approx(alone.breakdown.optimizer_s).epsilon(0.01));
  // A dps step runs every rank's optimizer at once: shared.
  pt.profile.host_sharing = {};
  const double opt_alone = sim::simulate_point(pt).breakdown.optimizer_s;
  pt.profile.host_sharing = {{1, 1.0}, {4, 2.0}};
  CHECK(sim::simulate_point(pt).breakdown.optimizer_s == doctest::Approx(2 * opt_alone).epsilon(0.05));
}

TEST_CASE("table curves round-trip and slow down with sharing") {
  sim::DeviceProfile p = sample_profile();
  p.matmul.table = {{1e5, 0.4}, {1e7, 0.9}, {1e9, 0.5}};
  p.matmul.max = 0.9;
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  REQUIRE(q.matmul.table.size() == 3);
  CHECK(q.matmul.max == doctest::Approx(0.9));
  CHECK(q.matmul.at(1e9) == doctest::Approx(0.5));
  CHECK(q.shared_by(4).matmul.at(1e7) == doctest::Approx(0.9 / 2.2));
}

TEST_CASE("O1-linear and activation tables round-trip, and core sharing slows every table") {
  sim::DeviceProfile p = sample_profile();
  p.matmul_o1.table = {{1e6, 0.05}, {1e9, 0.4}};
  p.matmul_linear.table = {{1e6, 0.3}, {1e9, 0.6}};
  p.activation.table = {{1e4, 0.02}, {1e8, 0.017}};
  p.activation_backward.table = {{1e4, 0.03}, {1e8, 0.027}};
  p.activation_half.table = {{1e4, 0.009}, {1e8, 0.007}};
  p.activation_half_backward.table = {{1e4, 0.01}, {1e8, 0.008}};
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  CHECK(q.matmul_o1.at(1e9) == doctest::Approx(0.4));
  CHECK(q.matmul_linear.at(1e6) == doctest::Approx(0.3));
  CHECK(q.activation.at(1e4) == doctest::Approx(0.02));
  CHECK(q.activation_backward.at(1e8) == doctest::Approx(0.027));
  CHECK(q.activation_half.at(1e8) == doctest::Approx(0.007));
  CHECK(q.activation_half_backward.at(1e4) == doctest::Approx(0.01));
  // Four ranks on the machine (factor 2.2): 16-bit, O1 and activation tables slow down like fp32 ones.
  const sim::DeviceProfile s = q.shared_by(4);
  CHECK(s.matmul_half.at(1e9) == doctest::Approx(0.8 / 2.2));
  CHECK(s.matmul_o1.at(1e9) == doctest::Approx(0.4 / 2.2));
  CHECK(s.matmul_linear.at(1e9) == doctest::Approx(0.6 / 2.2));
  CHECK(s.activation_half.at(1e8) == doctest::Approx(0.007 / 2.2));
}

TEST_CASE("background_loop_slowdown by ranks: round trip, and shared_by resolves it for the rank count") {
  sim::DeviceProfile p = sample_profile();
  p.background_loop_by_ranks = {{2, 0.4}, {4, 0.2}};
  p.background_loop_slowdown = 0.4;
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  REQUIRE(q.background_loop_by_ranks.size() == 2);
  CHECK(q.shared_by(2).background_loop_slowdown == doctest::Approx(0.4));
  CHECK(q.shared_by(3).background_loop_slowdown == doctest::Approx(0.3));
  CHECK(q.shared_by(8).background_loop_slowdown == doctest::Approx(0.2));
  // A single figure still applies to every rank count.
  sim::DeviceProfile r = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string("device: {background_loop_slowdown: 0.25}\n", "s.yaml"), r);
  CHECK(r.shared_by(4).background_loop_slowdown == doctest::Approx(0.25));
  CHECK_THROWS_AS(sim::apply_profile_document(
                      load_yaml_string("device:\n  background_loop_slowdown: [{ranks: 4, slowdown: 0.1}, {ranks: 2, slowdown: 0.2}]\n", "b.yaml"), r),
                  InputError);
}

TEST_CASE("comm_stall by ranks: round trip, shared_by resolves it, refusals") {
  sim::DeviceProfile p = sample_profile();
  p.comm_stall_by_ranks = {{2, 0.95}, {4, 0.15}};
  p.comm_stall_one_by_ranks = {{2, 1.0}, {4, 0.0}};
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  CHECK(q.shared_by(4).comm_stall_one == 1.0);  // not measured: a computing member holds its collectives
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  REQUIRE(q.comm_stall_by_ranks.size() == 2);
  REQUIRE(q.comm_stall_one_by_ranks.size() == 2);
  CHECK(q.shared_by(2).comm_stall_one == 1.0);
  CHECK(q.shared_by(3).comm_stall_one == doctest::Approx(0.5));
  CHECK(q.shared_by(4).comm_stall_one == 0.0);
  CHECK(q.comm_stall == 0.0);
  CHECK(q.shared_by(2).comm_stall == doctest::Approx(0.95));
  CHECK(q.shared_by(3).comm_stall == doctest::Approx(0.55));
  CHECK(q.shared_by(8).comm_stall == doctest::Approx(0.15));
  sim::DeviceProfile r = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  CHECK(r.shared_by(2).comm_stall == 0.0);  // not measured: collectives progress beside compute
  CHECK_THROWS_AS(sim::apply_profile_document(load_yaml_string("device:\n  comm_stall: [{ranks: 2, stall: 1.5}]\n", "b.yaml"), r),
                  InputError);
  CHECK_THROWS_AS(sim::apply_profile_document(
                      load_yaml_string("device:\n  comm_stall: [{ranks: 4, stall: 0.1}, {ranks: 2, stall: 0.2}]\n", "b.yaml"), r),
                  InputError);
  CHECK_THROWS_WITH_AS(sim::apply_profile_document(load_yaml_string("device:\n  comm_stall_one: [{ranks: 2, stall: 2}]\n", "b.yaml"), r),
                       doctest::Contains("comm_stall_one is a share"), InputError);
  CHECK_THROWS_WITH_AS(sim::apply_profile_document(load_yaml_string("device:\n  comm_stall_one: []\n", "b.yaml"), r),
                       doctest::Contains("comm_stall_one: an empty list"), InputError);
}

TEST_CASE("a stalled profile serialises a Horovod step's allreduces after backward") {
  // small horovod x2: with comm_stall >= 0.5 no allreduce starts while a rank
  // computes, so the step grows by about the comm the loop had overlapped.
  ValidationMatrix m;
  ValidationCase c{"small", "horovod", 2, "fp32", 8, 0};
  sim::PointSpec pt = point_for_case(m, c, "");
  const sim::PointResult overlapped = sim::simulate_point(pt);
  pt.profile.comm_stall_by_ranks = {{2, 0.4}};  // under half: as before
  CHECK(*sim::simulate_point(pt).step_time_s == doctest::Approx(*overlapped.step_time_s));
  pt.profile.comm_stall_by_ranks = {{2, 0.9}};
  const sim::PointResult stalled = sim::simulate_point(pt);
  CHECK(stalled.breakdown.compute_s == doctest::Approx(overlapped.breakdown.compute_s).epsilon(0.01));
  CHECK(*stalled.step_time_s > *overlapped.step_time_s);
  CHECK(stalled.breakdown.exposed_comm_s > overlapped.breakdown.exposed_comm_s);
}

TEST_CASE("rank_sync by ranks: round trip, interpolation, and refusals") {
  sim::DeviceProfile p = sample_profile();
  p.sync_by_ranks = {{2, Time::ms(4), 0.5, Time::ms(1)}, {4, Time::ms(12), 0.7, Time::ms(5)}};
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  REQUIRE(q.sync_by_ranks.size() == 2);
  CHECK(q.sync_by_ranks[1].exponent == doctest::Approx(0.7));
  CHECK(q.shared_by(2).sync_lag.seconds() == doctest::Approx(0.004));
  CHECK(q.shared_by(3).sync_lag.seconds() == doctest::Approx(0.008));
  CHECK(q.shared_by(3).sync_exponent == doctest::Approx(0.6));
  CHECK(q.shared_by(3).sync_latency.seconds() == doctest::Approx(0.003));
  CHECK(q.shared_by(8).sync_latency.seconds() == doctest::Approx(0.005));
  CHECK(q.shared_by(1).sync_lag == Time::zero());
  // The exponent defaults to the random walk's 0.5.
  sim::DeviceProfile r = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string("device: {rank_sync: [{ranks: 2, lag: 3 ms, latency: 0.5 ms}]}\n", "s.yaml"), r);
  CHECK(r.shared_by(2).sync_exponent == doctest::Approx(0.5));
  CHECK(r.shared_by(2).sync_lag.seconds() == doctest::Approx(0.003));
  for (const char* bad : {"device: {rank_sync: [{ranks: 4, lag: 3 ms, latency: 1 ms}, {ranks: 2, lag: 1 ms, latency: 1 ms}]}\n",
                          "device: {rank_sync: [{ranks: 2, lag: 3 ms, exponent: 1.5, latency: 1 ms}]}\n",
                          "device: {rank_sync: [{ranks: 2, latency: 1 ms}]}\n", "device: {rank_sync: []}\n"})
    CHECK_THROWS_AS(sim::apply_profile_document(load_yaml_string(bad, "b.yaml"), r), InputError);
}

TEST_CASE("drift compensation: the profile at the speed a probe finds now") {
  sim::DeviceProfile p = sample_profile();
  p.matmul_o1.table = {{1e6, 0.4}, {1e9, 0.4}};
  p.matmul_linear.table = {{1e6, 0.6}, {1e9, 0.6}};
  // Points of long calls (tens of ms): the class ratio alone (dispatch_share 0).
  p.activation.table = {{1e8, 0.02}, {1e10, 0.02}};
  p.activation_half.table = {{1e8, 0.03}, {1e10, 0.03}};
  // Without a reference the profile is unchanged.
  const sim::SpeedProbe now{2e-3, 3e-4, 6e-6};
  CHECK(p.at_speed(now).matmul.at(1e9) == doctest::Approx(p.matmul.at(1e9)));
  p.speed_reference = {1e-3, 2e-4, 3e-6};
  const sim::DeviceProfile s = p.at_speed(now);
  // GEMMs and activations 2x slower (the matmul probe), memory-class 1.5x, dispatch 2x; collectives untouched.
  CHECK(s.matmul.at(1e9) == doctest::Approx(p.matmul.at(1e9) / 2));
  CHECK(s.matmul_half.at(1e9) == doctest::Approx(0.8 / 2));
  CHECK(s.matmul_o1.at(1e9) == doctest::Approx(0.4 / 2));
  CHECK(s.memory.at(1e6) == doctest::Approx(p.memory.at(1e6) / 1.5));
  CHECK(s.activation.at(1e9) == doctest::Approx(0.02 / 2));
  CHECK(s.activation_half.at(1e9) == doctest::Approx(0.03 / 2));  // no bf16 reading: the fp32 one
  CHECK(s.host_memcpy.value() == doctest::Approx(9e9 / 1.5));
  CHECK(s.launch_overhead.seconds() == doctest::Approx(2 * 6.25e-6).scale(0));
  CHECK(s.step_overhead.seconds() == doctest::Approx(2 * 40e-6).scale(0));
  REQUIRE(s.network.size() == p.network.size());
  CHECK(s.network[0].regimes[0].bandwidth_factor == doctest::Approx(0.5));
  // Ratios are clamped to [0.2, 5].
  CHECK(p.at_speed({1.0, 2e-4, 3e-6}).matmul.at(1e9) == doctest::Approx(p.matmul.at(1e9) / 5));
  // The reference round-trips through the profile YAML.
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  CHECK(q.speed_reference.matmul_s == doctest::Approx(1e-3).epsilon(1e-3).scale(0));
  CHECK(q.speed_reference.elementwise_s == doctest::Approx(2e-4).epsilon(1e-3).scale(0));
  CHECK(q.speed_reference.dispatch_s == doctest::Approx(3e-6).epsilon(1e-3).scale(0));
  CHECK(q.speed_reference.matmul_bf16_s == 0);  // not read: absent from the YAML
  // With a bf16 reading on both sides, bf16 GEMM tables follow it, fp32 ones the fp32 matmul.
  p.speed_reference.matmul_bf16_s = 5e-4;
  const sim::DeviceProfile h = p.at_speed({2e-3, 2e-4, 3e-6, 1.25e-3});
  CHECK(h.matmul.at(1e9) == doctest::Approx(p.matmul.at(1e9) / 2));
  // An fp32 GEMM table: its 1 GFLOP point, a 13.5 ms call, follows the
  // dispatch ratio (1x here) for its kind's share of it.
  const double linear_call = 6.25e-6 + 1e9 / (0.6 * 123.4e9);
  CHECK(sim::dispatch_share(sim::CallKind::GemmFp32, linear_call) == doctest::Approx(0.107).epsilon(0.01));
  CHECK(h.matmul_linear.at(1e9) == doctest::Approx(0.6 / std::pow(2.0, 1 - sim::dispatch_share(sim::CallKind::GemmFp32, linear_call))));
  CHECK(h.matmul_half.at(1e9) == doctest::Approx(0.8 / 2.5));
  CHECK(h.matmul_o1.at(1e9) == doctest::Approx(0.4 / 2.5));
  CHECK(h.activation.at(1e9) == doctest::Approx(0.02 / 2));         // fp32 GELU: the fp32 matmul
  CHECK(h.activation_half.at(1e9) == doctest::Approx(0.03 / 2.5));  // bf16 GELU: the bf16 matmul
  CHECK(h.memory.at(1e6) == doctest::Approx(p.memory.at(1e6)));  // the add probe did not move
  // A table point of a short call follows the dispatch ratio, as the fit
  // rescaled it (sim::dispatch_share of its kind, launch + its time): add
  // probe 1.5x, dispatch 3x. bf16: a 1 KB add (6.25 us launch + 0.08 us) 3x
  // slower, a 1 GB one (82 ms) 1.5x, one of 40 us to 1 ms between.
  sim::DeviceProfile m = p;
  m.memory.table = {{1e3, 0.7}, {1e6, 0.7}, {1e9, 0.7}};
  m.memory_half.table = m.memory.table;
  const sim::DeviceProfile b = m.at_speed({1e-3, 3e-4, 9e-6, 5e-4});
  CHECK(b.memory_half.table[0].second == doctest::Approx(0.7 / 3));
  CHECK(b.memory_half.table[1].second < 0.7 / 1.5);  // 88 us: partly the dispatch ratio
  CHECK(b.memory_half.table[1].second > 0.7 / 3);
  CHECK(b.memory_half.table[2].second == doctest::Approx(0.7 / 1.5));
  CHECK(b.memory_half.max == doctest::Approx(0.7 / 1.5));
  // fp32: the short add 3x too, the longer ones three quarters by the
  // dispatch ratio however long (cached memory-class calls follow the core).
  CHECK(b.memory.table[0].second == doctest::Approx(0.7 / 3));
  CHECK(b.memory.table[1].second == doctest::Approx(0.7 / (std::pow(1.5, 0.25) * std::pow(3.0, 0.75))));
  CHECK(b.memory.table[2].second == doctest::Approx(0.7 / (std::pow(1.5, 0.25) * std::pow(3.0, 0.75))));
  // fp32 GEMMs: a point of 1 ms (0.2 of it by the dispatch ratio) and one of
  // 1 s (the matmul ratio alone, 1x here; dispatch 3x).
  sim::DeviceProfile k = p;
  const double ms_work = (1e-3 - p.launch_overhead.seconds()) * 0.5 * p.spec.fp32_peak.value();
  k.matmul.table = {{ms_work, 0.5}, {ms_work * 1000, 0.5}};
  const sim::DeviceProfile kb = k.at_speed({1e-3, 2e-4, 9e-6});
  CHECK(kb.matmul.table[0].second == doctest::Approx(0.5 / std::pow(3.0, 0.20)));
  CHECK(kb.matmul.table[1].second == doctest::Approx(0.5));
  // The same points in bf16 (matmul_half, against the half peak): the curve,
  // none by the dispatch ratio from 1 ms.
  k.matmul_half.table = {{ms_work * p.spec.bf16_peak.value() / p.spec.fp32_peak.value(), 0.5}};
  CHECK(k.at_speed({1e-3, 2e-4, 9e-6}).matmul_half.table[0].second == doctest::Approx(0.5));
  CHECK(b.launch_overhead.seconds() == doctest::Approx(3 * 6.25e-6).scale(0));
  // A GELU point is the kernel alone, however short its call: its dtype's
  // matmul ratio (2x; bf16 2x too), the call's dispatch part by the launch overhead.
  sim::DeviceProfile g = m;
  g.activation.table = {{1e3, 0.02}, {1e9, 0.02}};
  g.activation_half.table = {{1e3, 0.03}, {1e9, 0.03}};
  const sim::DeviceProfile gs = g.at_speed({2e-3, 2e-4, 9e-6, 1e-3});
  CHECK(gs.activation.table[0].second == doctest::Approx(0.02 / 2));
  CHECK(gs.activation_half.table[0].second == doctest::Approx(0.03 / 2));
  CHECK(gs.activation.table[1].second == doctest::Approx(0.02 / 2));
  CHECK(gs.memory.table[0].second == doctest::Approx(0.7 / 3));  // a short add: the dispatch ratio
  CHECK(gs.launch_overhead.seconds() == doctest::Approx(3 * 6.25e-6).scale(0));
  // The speed states' draws keep the class alone (validate/README gap 8):
  // slow dispatch states reach the launch overhead, not the tables.
  sim::DeviceProfile st = m;
  st.speed_states.cores = 2;
  st.speed_states.matmul = {1.0};
  st.speed_states.elementwise = {1.0};
  st.speed_states.dispatch = {3.0};
  CHECK(st.shared_by(1).memory.table[0].second == doctest::Approx(0.7));
  CHECK(st.shared_by(1).launch_overhead.seconds() == doctest::Approx(3 * 6.25e-6).scale(0));
  sim::DeviceProfile q2 = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q2);
  CHECK(q2.speed_reference.matmul_bf16_s == doctest::Approx(5e-4).epsilon(1e-3).scale(0));
  CHECK(q2.speed_reference.elementwise_form == "cached");
}

TEST_CASE("drift compensation: an add probe of another form leaves the memory tables alone") {
  sim::DeviceProfile p = sample_profile();
  p.memory.table = {{1e6, 0.7}, {1e9, 0.7}};
  p.memory_half.table = p.memory.table;
  p.speed_reference = {1e-3, 2e-4, 3e-6, 0.0, "streaming"};
  // The same form: memory 1.5x slower (fp32 memory-class calls a quarter by
  // it, the dispatch ratio, 1x, the rest); the cached form (an older probe):
  // unchanged, the GEMMs 2x either way.
  const sim::DeviceProfile same = p.at_speed({2e-3, 3e-4, 3e-6, 0.0, "streaming"});
  const sim::DeviceProfile other = p.at_speed({2e-3, 3e-4, 3e-6, 0.0, "cached"});
  CHECK(same.memory_half.at(1e9) == doctest::Approx(0.7 / 1.5));
  CHECK(same.memory.at(1e9) == doctest::Approx(0.7 / std::pow(1.5, 0.25)));
  CHECK(other.memory.at(1e9) == doctest::Approx(0.7));
  CHECK(other.memory_half.at(1e9) == doctest::Approx(0.7));
  CHECK(other.matmul.at(1e9) == doctest::Approx(p.matmul.at(1e9) / 2));
  CHECK(other.host_memcpy.value() == doctest::Approx(p.host_memcpy.value()));
  // The moved profile's reference keeps the add reading its memory tables are at.
  CHECK(other.speed_reference.elementwise_form == "streaming");
  CHECK(other.speed_reference.elementwise_s == doctest::Approx(2e-4));
  CHECK(other.speed_reference.matmul_s == doctest::Approx(2e-3));
  // The form round-trips through the profile YAML; an unknown one is refused naming the key.
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  const std::string y = profile_yaml(p, "t", "test", "gloo");
  CHECK(y.find("elementwise_form: streaming") != std::string::npos);
  sim::apply_profile_document(load_yaml_string(y, "t.yaml"), q);
  CHECK(q.speed_reference.elementwise_form == "streaming");
  try {
    sim::apply_profile_document(
        load_yaml_string("device: {speed_reference: {matmul: 1 ms, elementwise: 1 ms, elementwise_form: warm, dispatch: 1 us}}\n",
                         "b.yaml"),
        q);
    FAIL("an unknown elementwise_form was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("elementwise_form") != std::string::npos);
    CHECK(std::string(e.what()).find("b.yaml") != std::string::npos);
  }
}

TEST_CASE("speed states: a step of N ranks runs at the pace of its slowest core") {
  using sim::expected_slowest;
  CHECK(expected_slowest({}, 3) == 1.0);
  CHECK(expected_slowest({1.0, 2.0}, 1) == doctest::Approx(1.5));   // the mean
  CHECK(expected_slowest({1.0, 2.0}, 2) == doctest::Approx(1.75));  // slow unless both draws are fast
  CHECK(expected_slowest({1.0, 1.0, 1.0}, 4) == doctest::Approx(1.0));
  sim::DeviceProfile p = sample_profile();
  p.matmul_o1.table = {{1e6, 0.4}, {1e9, 0.4}};
  const sim::DeviceProfile base2 = p.shared_by(2), base4 = p.shared_by(4), base1 = p.shared_by(1);
  p.speed_states.cores = 2;
  p.speed_states.matmul = {1.0, 2.0};
  p.speed_states.matmul_bf16 = {1.0, 3.0};
  p.speed_states.elementwise = {1.0, 1.5};
  p.speed_states.dispatch = {2.0, 2.0};
  const sim::DeviceProfile s2 = p.shared_by(2);
  CHECK(s2.matmul.at(1e9) == doctest::Approx(base2.matmul.at(1e9) / 1.75));
  CHECK(s2.matmul_half.at(1e9) == doctest::Approx(base2.matmul_half.at(1e9) / 2.5));
  CHECK(s2.matmul_o1.at(1e9) == doctest::Approx(base2.matmul_o1.at(1e9) / 2.5));
  CHECK(s2.memory.at(1e6) == doctest::Approx(base2.memory.at(1e6) / 1.375));
  CHECK(s2.host_memcpy.value() == doctest::Approx(base2.host_memcpy.value() / 1.375));
  CHECK(s2.launch_overhead.seconds() == doctest::Approx(2 * base2.launch_overhead.seconds()));
  // One rank: the mean state; four ranks time-sliced on two cores: the mean state too, with the sharing factor on top.
  CHECK(p.shared_by(1).matmul.at(1e9) == doctest::Approx(base1.matmul.at(1e9) / 1.5));
  CHECK(p.shared_by(4).matmul.at(1e9) == doctest::Approx(base4.matmul.at(1e9) / 1.5));
  CHECK(p.shared_by(4).step_overhead.seconds() == doctest::Approx(2 * base4.step_overhead.seconds()));
  // Round trip through the profile YAML (lists sorted on reading).
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  CHECK(q.speed_states.cores == 2);
  CHECK(q.speed_states.matmul == std::vector<double>{1.0, 2.0});
  CHECK(q.speed_states.matmul_bf16 == std::vector<double>{1.0, 3.0});
  CHECK(q.speed_states.dispatch == std::vector<double>{2.0, 2.0});
  sim::DeviceProfile r = q;
  sim::apply_profile_document(load_yaml_string("device: {speed_states: {matmul: [1.2, 0.9]}}\n", "s.yaml"), r);
  CHECK(r.speed_states.matmul == std::vector<double>{0.9, 1.2});
  for (const char* bad : {"device: {speed_states: {matmul: []}}\n", "device: {speed_states: {matmul: [0, 1]}}\n",
                          "device: {speed_states: {matmul: [25]}}\n", "device: {speed_states: {fp16: [1]}}\n",
                          "device: {speed_states: {cores: 0, matmul: [1]}}\n"})
    CHECK_THROWS_AS(sim::apply_profile_document(load_yaml_string(bad, "b.yaml"), r), InputError);
  // Without a core count, every rank is a draw.
  p.speed_states.cores = 0;
  CHECK(p.shared_by(4).matmul.at(1e9) == doctest::Approx(base4.matmul.at(1e9) / (1.0 / 16 + 2 * 15.0 / 16)));
}

TEST_CASE("speed states: the cores' skew between ranks with a core each") {
  sim::DeviceProfile p = sample_profile();
  p.speed_states.cores = 2;
  p.speed_states.rank_skew = {{2, 0.012}};
  // Resolved for 2 ranks on 2 cores; nothing for one rank or time-sliced ranks.
  CHECK(p.shared_by(2).sync_skew == doctest::Approx(0.012));
  CHECK(p.shared_by(1).sync_skew == 0.0);
  CHECK(p.shared_by(4).sync_skew == 0.0);
  // Round trip: a profile with the skew and no speed readings still writes it.
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  CHECK(q.speed_states.cores == 2);
  REQUIRE(q.speed_states.rank_skew.size() == 1);
  CHECK(q.speed_states.rank_skew[0].first == 2);
  CHECK(q.speed_states.rank_skew[0].second == doctest::Approx(0.012));
  // Interpolated between the rank counts measured, none beyond the last.
  q.speed_states.cores = 8;
  q.speed_states.rank_skew = {{2, 0.01}, {8, 0.04}};
  CHECK(q.shared_by(4).sync_skew == doctest::Approx(0.02));
  CHECK(q.shared_by(9).sync_skew == 0.0);
  // Without a core count: up to the last rank count measured, none beyond.
  q.speed_states.cores = 0;
  q.speed_states.rank_skew = {{2, 0.012}};
  CHECK(q.shared_by(2).sync_skew == doctest::Approx(0.012));
  CHECK(q.shared_by(4).sync_skew == 0.0);
  CHECK(err("device: {speed_states: {rank_skew: [{ranks: 2, fraction: 1.5}]}}\n").find("rank_skew[0].fraction") !=
        std::string::npos);
  for (const char* bad : {"device: {speed_states: {rank_skew: [{ranks: 1, fraction: 0.01}]}}\n",
                          "device: {speed_states: {rank_skew: [{ranks: 4, fraction: 0.01}, {ranks: 2, fraction: 0.01}]}}\n",
                          "device: {speed_states: {rank_skew: [{ranks: 2, fraction: 1.5}]}}\n",
                          "device: {speed_states: {rank_skew: [{ranks: 2, fraction: -0.1}]}}\n",
                          "device: {speed_states: {rank_skew: [{ranks: 2}]}}\n"})
    CHECK_THROWS_AS(sim::apply_profile_document(load_yaml_string(bad, "b.yaml"), q), InputError);
}

TEST_CASE("--at-speed-of: another profile's speed reference and speed states, one state of the machine") {
  sim::DeviceProfile p = sample_profile();
  p.speed_reference = {1e-3, 2e-4, 3e-6, 5e-4};
  p.speed_states.cores = 2;
  for (const char* cls : sim::SpeedStates::kClasses) *p.speed_states.of(cls) = {1.0, 2.0};
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "dptwin-at-speed-of.yaml";
  {
    std::ofstream f(path);
    f << profile_yaml(p, "t", "test", "gloo");
  }
  ValidationMatrix m;
  m.cases = {ValidationCase{"tiny", "single", 1, "fp32", 4, 0}};
  ValidationOptions o;
  o.predict_only = true;
  o.profile = path.string();
  const double plain = run_validation(m, o).at(0).predicted_step_s;
  // At its own reference and states: the plain prediction.
  o.fixed_speed = p.speed_reference;
  o.fixed_states = p.speed_states;
  CHECK(run_validation(m, o).at(0).predicted_step_s == doctest::Approx(plain).epsilon(1e-3));
  // Another calibration's spread twice as slow in every class (mean state 3 instead of 1.5):
  // every compute figure twice as slow, at the same reference.
  sim::SpeedStates slow = p.speed_states;
  for (const char* cls : sim::SpeedStates::kClasses) *slow.of(cls) = {2.0, 4.0};
  o.fixed_states = slow;
  const CaseOutcome s = run_validation(m, o).at(0);
  CHECK(s.predicted_step_s == doctest::Approx(2 * plain).epsilon(0.02));
  // Only the reference (states left empty): this profile's own spread.
  o.fixed_states = {};
  CHECK(run_validation(m, o).at(0).predicted_step_s == doctest::Approx(plain).epsilon(1e-3));
  // The other calibration's skew between the cores comes with its states
  // into a profile that prices the skew so: a 2-rank step meets later, a
  // 1-rank one is the same; a profile without one keeps its lag alone.
  ValidationMatrix two;
  two.cases = {ValidationCase{"tiny", "dps", 2, "fp32", 4, 0}};
  sim::SpeedStates skewed = p.speed_states;
  skewed.rank_skew = {{2, 0.05}};
  o.fixed_states = p.speed_states;
  const double without = run_validation(two, o).at(0).predicted_step_s;
  o.fixed_states = skewed;
  CHECK(run_validation(two, o).at(0).predicted_step_s == doctest::Approx(without).epsilon(1e-6));
  p.speed_states.rank_skew = {{2, 0.01}};
  {
    std::ofstream f(path);
    f << profile_yaml(p, "t", "test", "gloo");
  }
  o.fixed_states = p.speed_states;
  const double even = run_validation(two, o).at(0).predicted_step_s;
  o.fixed_states = skewed;
  CHECK(run_validation(two, o).at(0).predicted_step_s > even * 1.01);
  CHECK(run_validation(m, o).at(0).predicted_step_s == doctest::Approx(plain).epsilon(1e-3));
  std::filesystem::remove(path);
}

TEST_CASE("comm state: the network tables priced at another communication state") {
  sim::DeviceProfile p = sample_profile();
  sim::CommCalibration four = p.network[0];
  four.ranks = 4;
  p.network.push_back(four);
  p.comm_reference = {{2, 100e-6}, {4, 300e-6}};
  // Round trip, and refusals naming file, line and key.
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(profile_yaml(p, "t", "test", "gloo"), "t.yaml"), q);
  REQUIRE(q.comm_reference.size() == 2);
  CHECK(q.comm_reference[1].first == 4);
  CHECK(q.comm_reference[1].second == doctest::Approx(300e-6).epsilon(1e-3));
  const std::string order = err("network:\n  state_reference:\n    - {ranks: 4, allreduce_4k: 1 us}\n"
                                "    - {ranks: 2, allreduce_4k: 1 us}\n");
  CHECK(order.find("p.yaml:4") != std::string::npos);
  CHECK(order.find("ascending") != std::string::npos);
  CHECK(err("network:\n  state_reference: [{ranks: 2, allreduce_4k: 0 us}]\n").find("allreduce_4k") != std::string::npos);
  CHECK(err("network:\n  state_reference: [{ranks: 2, seconds: 1 us}]\n").find("seconds") != std::string::npos);
  // Twice as slow at 2 ranks: that table's alphas x2 and bandwidth factors /2, the
  // 4-rank table and reference as they were (no reading of them).
  const sim::DeviceProfile slow = p.at_comm_state({{2, 200e-6}});
  CHECK(slow.network[0].regimes[1].alpha.seconds() == doctest::Approx(300e-6).epsilon(1e-6));
  CHECK(slow.network[0].regimes[1].bandwidth_factor == doctest::Approx(0.06));
  CHECK(slow.network[1].regimes[1].alpha.seconds() == doctest::Approx(150e-6).epsilon(1e-6));
  CHECK(slow.comm_reference[0].second == doctest::Approx(200e-6));
  CHECK(slow.comm_reference[1].second == doctest::Approx(300e-6));
  // Without a reference of that rank count, or at the reference itself: unchanged.
  CHECK(p.at_comm_state({{3, 1e-3}}).network[0].regimes[1].alpha == p.network[0].regimes[1].alpha);
  CHECK(p.at_comm_state({{2, 100e-6}}).network[0].regimes[1].bandwidth_factor == doctest::Approx(0.12));
  // --at-speed-of with the other profile's comm state: a 2-rank dps case's
  // collectives cost twice as much, compute as it was; a 1-rank case unchanged.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "dptwin-comm-state.yaml";
  {
    std::ofstream f(path);
    f << profile_yaml(p, "t", "test", "gloo");
  }
  ValidationMatrix m;
  m.cases = {ValidationCase{"small", "dps", 2, "fp32", 4, 0}, ValidationCase{"tiny", "single", 1, "fp32", 4, 0}};
  ValidationOptions o;
  o.predict_only = true;
  o.profile = path.string();
  const std::vector<CaseOutcome> plain = run_validation(m, o);
  o.fixed_comm_state = {{2, 200e-6}};
  const std::vector<CaseOutcome> at = run_validation(m, o);
  CHECK(at[0].comm_state_priced_s == doctest::Approx(200e-6));
  CHECK(at[0].predicted_uncompensated_step_s == doctest::Approx(plain[0].predicted_step_s));
  CHECK(at[0].predicted_step_s > plain[0].predicted_step_s * 1.01);
  CHECK(at[0].predicted_breakdown.at("compute_s").get<double>() ==
        doctest::Approx(plain[0].predicted_breakdown.at("compute_s").get<double>()));
  CHECK(at[1].comm_state_priced_s == 0);
  CHECK(at[1].predicted_step_s == doctest::Approx(plain[1].predicted_step_s));
  std::filesystem::remove(path);
}

TEST_CASE("comm state exponent: fitted from the passes, round trip, and a table follows the probe to its power") {
  // Three passes whose probe reads 100, 150 and 200 us and whose collectives
  // move by the square root of that (the 4 KiB allreduce exactly, the 1 MiB
  // broadcast with a small wobble); ps_round follows the probe fully but is
  // not a table, so it does not count.
  auto pass = [](double state_us, double wobble) {
    const double f = std::sqrt(state_us / 100.0);
    return nlohmann::json{
        {"comm_state", {{"seconds", state_us * 1e-6}}},
        {"collectives",
         {{{"kind", "allreduce"}, {"bytes", 4096}, {"mean_s", 3e-4 * f}},
          {{"kind", "broadcast"}, {"bytes", 1048576}, {"seconds", 2e-3 * f * wobble}},
          {{"kind", "ps_round"}, {"bytes", 4096}, {"mean_s", 5e-4 * state_us / 100.0}}}}};
  };
  const auto e = comm_state_exponent({pass(100, 1.0), pass(150, 1.01), pass(200, 0.99)});
  REQUIRE(e.has_value());
  CHECK(e->exponent == doctest::Approx(0.5).epsilon(0.05));
  CHECK(e->pairs == 6);  // 3 pass pairs x 2 tables
  // Collectives that move against the probe clamp to 0, faster than it to 1.
  auto scaled = [](double state_us, double power) {
    return nlohmann::json{{"comm_state", {{"seconds", state_us * 1e-6}}},
                          {"collectives", {{{"kind", "allreduce"}, {"bytes", 4096}, {"seconds", std::pow(state_us, power) * 1e-6}}}}};
  };
  CHECK(comm_state_exponent({scaled(100, -1), scaled(200, -1)})->exponent == 0.0);
  CHECK(comm_state_exponent({scaled(100, 2), scaled(200, 2)})->exponent == 1.0);
  // One pass, or passes at one probe reading: nothing to fit.
  CHECK_FALSE(comm_state_exponent({pass(100, 1.0)}).has_value());
  CHECK_FALSE(comm_state_exponent({pass(100, 1.0), pass(100, 1.2)}).has_value());

  // The profile: the 2-rank tables follow the probe to the power 0.5, the
  // 4-rank ones (no exponent) fully.
  sim::DeviceProfile p = sample_profile();
  sim::CommCalibration four = p.network[0];
  four.ranks = 4;
  p.network.push_back(four);
  p.comm_reference = {{2, 100e-6}, {4, 300e-6}};
  p.comm_state_exponent = {{2, 0.5}};
  const sim::DeviceProfile at = p.at_comm_state({{2, 400e-6}, {4, 600e-6}});
  CHECK(at.network[0].regimes[1].alpha.seconds() == doctest::Approx(2 * p.network[0].regimes[1].alpha.seconds()));
  CHECK(at.network[0].regimes[1].bandwidth_factor == doctest::Approx(p.network[0].regimes[1].bandwidth_factor / 2));
  CHECK(at.network[1].regimes[1].alpha.seconds() == doctest::Approx(2 * p.network[1].regimes[1].alpha.seconds()));
  CHECK(at.comm_state_exponent_for(2) == 0.5);
  CHECK(at.comm_state_exponent_for(4) == 1.0);
  // Round trip: written where set, absent where not; refusals name the key.
  const std::string yaml = profile_yaml(p, "t", "test", "gloo");
  CHECK(yaml.find("{ranks: 2, allreduce_4k: 100 us, exponent: 0.500}") != std::string::npos);
  CHECK(yaml.find("{ranks: 4, allreduce_4k: 300 us}") != std::string::npos);
  sim::DeviceProfile q = sim::default_profile(topology::load_cluster_preset("localhost-cpu").device);
  sim::apply_profile_document(load_yaml_string(yaml, "t.yaml"), q);
  REQUIRE(q.comm_state_exponent.size() == 1);
  CHECK(q.comm_state_exponent[0].first == 2);
  CHECK(q.comm_state_exponent[0].second == doctest::Approx(0.5));
  const std::string over = err("network:\n  state_reference: [{ranks: 2, allreduce_4k: 1 us, exponent: 1.5}]\n");
  CHECK(over.find("p.yaml:2") != std::string::npos);
  CHECK(over.find("exponent") != std::string::npos);
  CHECK(err("network:\n  state_reference: [{ranks: 2, allreduce_4k: 1 us, exponent: -1}]\n").find("exponent") !=
        std::string::npos);
}

TEST_CASE("comm passes brought to one communication state before their median") {
  // Three passes whose probe reads 100, 200 and 150 us, their tables moving
  // with it: at the median reading (150 us) every pass prices alike.
  auto pass = [](double state_us) {
    const double f = state_us / 100.0;
    return nlohmann::json{
        {"comm_state", {{"seconds", state_us * 1e-6}}},
        {"collectives",
         {{{"kind", "allreduce"}, {"bytes", 4096}, {"mean_s", 1e-3 * f}, {"min_s", 5e-4 * f},
           {"rounds_s", {1e-3 * f, 1.1e-3 * f}}, {"reads_s", {0.9e-3 * f}}},
          {{"kind", "broadcast"}, {"bytes", 1048576}, {"seconds", 4e-3 * f}},
          {{"kind", "ps_round"}, {"bytes", 4096}, {"mean_s", 5e-4 * f}}}}};
  };
  const std::vector<nlohmann::json> n = normalized_to_comm_state({pass(100), pass(200), pass(150)});
  REQUIRE(n.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("pass " << i);
    const nlohmann::json& c = n[i].at("collectives");
    CHECK(n[i].at("comm_state").at("seconds").get<double>() == doctest::Approx(150e-6));
    CHECK(n[i].at("normalized_to_state").get<double>() == doctest::Approx(150e-6));
    CHECK(c[0].at("mean_s").get<double>() == doctest::Approx(1.5e-3));
    CHECK(c[0].at("min_s").get<double>() == doctest::Approx(0.75e-3));
    CHECK(c[0].at("rounds_s")[1].get<double>() == doctest::Approx(1.65e-3));
    CHECK(c[0].at("reads_s")[0].get<double>() == doctest::Approx(1.35e-3));
    CHECK(c[1].at("seconds").get<double>() == doctest::Approx(6e-3));
  }
  // ps_round is not a table: as measured.
  CHECK(n[1].at("collectives")[2].at("mean_s").get<double>() == doctest::Approx(1e-3));
  // One pass, or a pass without a reading: as they are.
  CHECK(normalized_to_comm_state({pass(200)}).at(0) == pass(200));
  nlohmann::json bare = pass(200);
  bare.erase("comm_state");
  CHECK(normalized_to_comm_state({pass(100), bare}).at(0) == pass(100));
}

namespace {
// An executable shell script at `path` (for stand-ins of dptwin-exec and dptwin-microbench).
void write_script(const std::filesystem::path& path, const std::string& body) {
  {
    std::ofstream f(path);
    f << "#!/bin/sh\n" << body;
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}
}  // namespace

TEST_CASE("--run-states: every case predicted at the speed states probed before its runs") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "dptwin-run-states";
  fs::remove_all(dir);
  fs::create_directories(dir);
  sim::DeviceProfile p = sample_profile();
  p.speed_reference = {1e-3, 2e-4, 3e-6, 5e-4};
  p.speed_states.cores = 2;
  for (const char* cls : sim::SpeedStates::kClasses) *p.speed_states.of(cls) = {1.0, 1.0};
  const fs::path profile = dir / "p.yaml";
  {
    std::ofstream f(profile);
    f << profile_yaml(p, "t", "test", "gloo");
  }
  // dptwin-exec stand-in: a result of 20 ms steps at --out. Microbench stand-in:
  // every quick reading at 2x and 3x (alternating) the profile's reference, i.e. mean state 2.5.
  write_script(dir / "exec", "while [ $# -gt 1 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n"
                             "echo '{\"summary\": {\"step_time_s\": {\"median\": 0.02}}}' > \"$out\"\n");
  write_script(dir / "mb",
               "while [ $# -gt 1 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n"
               "echo '{\"speed\": {\"matmul_s\": 2.5e-3, \"matmul_bf16_s\": 1.25e-3, \"elementwise_s\": 5e-4, "
               "\"dispatch_s\": 7.5e-6}, \"speed_readings\": {\"matmul\": [2e-3, 3e-3, 2e-3, 3e-3], "
               "\"matmul_bf16\": [1e-3, 1.5e-3, 1e-3, 1.5e-3], \"elementwise\": [4e-4, 6e-4, 4e-4, 6e-4], "
               "\"dispatch\": [6e-6, 9e-6, 6e-6, 9e-6]}}' > \"$out\"\n");
  ValidationMatrix m;
  m.repeats = 2;
  m.cases = {ValidationCase{"tiny", "single", 1, "fp32", 4, 0}, ValidationCase{"tiny", "dps", 2, "fp32", 4, 0}};
  ValidationOptions o;
  o.profile = profile.string();
  o.out_dir = (dir / "out").string();
  o.exec_binary = (dir / "exec").string();
  const std::vector<CaseOutcome> plain = run_validation(m, o);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].measured_step_s == doctest::Approx(0.02));
  CHECK(plain[0].speed.is_null());
  o.states_probe = (dir / "mb").string();
  const std::vector<CaseOutcome> at = run_validation(m, o);
  REQUIRE(at.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO(at[i].c.label());
    REQUIRE(at[i].status == "ok");
    // 4 probes (2 cases x 2 rounds) x 4 readings of each of 4 classes.
    CHECK(at[i].speed.at("readings").get<int>() == 64);
    CHECK(at[i].speed.at("matmul").at("mean").get<double>() == doctest::Approx(2.5));
    CHECK(at[i].speed.at("matmul").at("level").get<double>() == doctest::Approx(2.5));  // the readings' median
    CHECK(at[i].speed.at("matmul").at("profile_mean").get<double>() == doctest::Approx(1.0));
    CHECK(at[i].predicted_uncompensated_step_s == doctest::Approx(plain[i].predicted_step_s));
  }
  // One rank runs at the mean state: every compute figure 2.5x slower.
  CHECK(at[0].predicted_step_s == doctest::Approx(2.5 * plain[0].predicted_step_s).epsilon(0.02));
  // Two ranks wait for the slower of two draws (about 2.75 here: the quantiles interpolate between
  // the 2x and 3x readings): slower still, comm unchanged.
  CHECK(at[1].speed.at("matmul").at("slowest_of_2").get<double>() == doctest::Approx(2.75).epsilon(1e-3));
  CHECK(at[1].predicted_step_s > 2.5 * plain[1].predicted_breakdown.at("compute_s").get<double>());
  const ValidationSummary s = summarize(at, 3.0);
  CHECK(s.compensated == 2);
  CHECK(s.mape_uncompensated_pct == doctest::Approx(summarize(plain, 3.0).mape_pct));
  CHECK(to_table(at, s).find("the profile's own predictions") != std::string::npos);
  CHECK(to_json("m", "p", at, s, 3.0).at("summary").at("compensated").get<int>() == 2);
  // Runs that read the comm state (exec's probe, before and after training)
  // at twice the profile's 2-rank reference: the 2-rank case's collectives
  // priced at it, the 1-rank case as before.
  p.comm_reference = {{2, 100e-6}};
  {
    std::ofstream f(profile);
    f << profile_yaml(p, "t", "test", "gloo");
  }
  write_script(dir / "exec", "while [ $# -gt 1 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n"
                             "echo '{\"summary\": {\"step_time_s\": {\"median\": 0.02}}, "
                             "\"comm_state\": {\"readings_s\": [1.9e-4, 2.1e-4]}}' > \"$out\"\n");
  const std::vector<CaseOutcome> comm = run_validation(m, o);
  CHECK(comm[1].comm_state_s.size() == 4);  // two readings a run, two rounds
  CHECK(comm[1].comm_state_priced_s == doctest::Approx(2e-4));
  CHECK(comm[1].predicted_step_s > at[1].predicted_step_s);
  CHECK(comm[0].comm_state_priced_s == 0);
  CHECK(comm[0].predicted_step_s == doctest::Approx(at[0].predicted_step_s));
  CHECK(to_json("m", "p", comm, summarize(comm, 3.0), 3.0).at("cases").at(1).at("comm_state_priced_s").get<double>() ==
        doctest::Approx(2e-4));
  // --replay: the same predictions from the recorded document, nothing run
  // (no dptwin-exec, no probe); a case the document lacks fails; without
  // recorded readings, the profile's own state.
  nlohmann::json readings;
  const std::vector<CaseOutcome> recorded = run_validation(m, o, &readings);
  REQUIRE(readings.is_array());
  CHECK(readings.size() == 64);
  const nlohmann::json doc = to_json("m", "p", recorded, summarize(recorded, 3.0), 3.0, readings);
  CHECK(doc.at("run_state_readings").size() == 64);
  ValidationOptions r;
  r.profile = o.profile;
  r.exec_binary = (dir / "missing-exec").string();
  r.replay = doc;
  nlohmann::json replayed_readings;
  const std::vector<CaseOutcome> replayed = run_validation(m, r, &replayed_readings);
  CHECK(replayed_readings == readings);
  for (size_t i = 0; i < 2; ++i) {
    INFO(m.cases[i].label());
    REQUIRE(replayed[i].status == "ok");
    CHECK(replayed[i].measured_step_s == doctest::Approx(0.02));
    CHECK(replayed[i].measured_rounds_s == recorded[i].measured_rounds_s);
    CHECK(replayed[i].comm_state_s == recorded[i].comm_state_s);
    CHECK(replayed[i].comm_state_priced_s == doctest::Approx(recorded[i].comm_state_priced_s));
    CHECK(replayed[i].predicted_step_s == doctest::Approx(recorded[i].predicted_step_s).epsilon(1e-9));
  }
  nlohmann::json partial = doc;
  partial["cases"].erase(1);
  partial.erase("run_state_readings");
  r.replay = partial;
  const std::vector<CaseOutcome> half = run_validation(m, r);
  CHECK(half[0].status == "ok");
  CHECK(half[0].speed.is_null());
  CHECK(half[0].predicted_step_s == doctest::Approx(plain[0].predicted_step_s));
  CHECK(half[1].status == "failed");
  CHECK(half[1].message.find("not in the replayed validation") != std::string::npos);
  // A predict-only document (no measurement), a status that is not text, a
  // failed case: each fails with the reason, nothing throws.
  nlohmann::json odd = doc;
  odd["cases"][0]["measured_step_s"] = nullptr;
  odd["cases"][1]["status"] = 3;
  r.replay = odd;
  const std::vector<CaseOutcome> unmeasured = run_validation(m, r);
  CHECK(unmeasured[0].status == "failed");
  CHECK(unmeasured[0].message.find("no measured_step_s") != std::string::npos);
  CHECK(unmeasured[1].status == "ok");
  odd["cases"][1]["status"] = "failed";
  odd["cases"][1]["message"] = "timed out";
  r.replay = odd;
  CHECK(run_validation(m, r)[1].message == "not measured in the replayed validation: failed timed out");
  // A profile without speed states: the profile's own state, and the readings
  // still go on with the results (their replay can be replayed at them again).
  {
    std::ofstream f(dir / "plain.yaml");
    f << profile_yaml(sample_profile(), "t", "test", "gloo");
  }
  r.profile = (dir / "plain.yaml").string();
  r.replay = doc;
  nlohmann::json kept;
  const std::vector<CaseOutcome> own = run_validation(m, r, &kept);
  CHECK(own[0].speed.is_null());
  CHECK(kept == readings);
  // A probe that writes no readings leaves the predictions the profile's own.
  write_script(dir / "mb", "exit 3\n");
  const std::vector<CaseOutcome> failed = run_validation(m, o);
  CHECK(failed[0].speed.is_null());
  CHECK(failed[0].predicted_step_s == doctest::Approx(plain[0].predicted_step_s));
  fs::remove_all(dir);
}
