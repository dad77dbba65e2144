// Scenario parsing, grid expansion, labels, overrides and every error path.
#include <doctest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "sim/scenario.hpp"

using namespace dptwin;
using namespace dptwin::sim;

namespace {

Scenario parse(const std::string& text, const std::string& name = "t.yaml") {
  return parse_scenario(load_yaml_string(text, name));
}

// The error message of parsing `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string label(const PointSpec& p, const std::string& key) {
  for (const auto& [k, v] : p.labels)
    if (k == key) return v;
  return "<absent>";
}

std::vector<std::string> label_keys(const PointSpec& p) {
  std::vector<std::string> out;
  for (const auto& [k, v] : p.labels) out.push_back(k);
  return out;
}

const char* kBase = "model: tiny\ncluster: hal-v100\ndevices: 4\nstrategy: dps\n";

}  // namespace

TEST_CASE("strategy names round-trip and the default precision follows the paper") {
  CHECK(all_strategies().size() == 6);
  for (auto k : all_strategies()) {
    CHECK(parse_strategy(to_string(k)) == k);
    CHECK(!describe(k).empty());
  }
  CHECK(parse_strategy("DPS+AMP") == StrategyKind::DpsAmp);
  CHECK(!parse_strategy("ddp").has_value());

  StrategyOptions o;
  CHECK(precision_of(StrategyKind::Dps, o).amp == AmpLevel::None);
  CHECK(precision_of(StrategyKind::DpsAmp, o).amp == AmpLevel::O2);       // Apex O2 in the paper's DDP code
  CHECK(precision_of(StrategyKind::HorovodAmp, o).amp == AmpLevel::O1);   // Apex O1 in the paper's Horovod code
  CHECK(precision_of(StrategyKind::HorovodAmp, o).half == DType::FP16);
  o.amp = AmpLevel::O1;
  o.half = DType::BF16;
  CHECK(precision_of(StrategyKind::Single, o).amp == AmpLevel::O1);
  CHECK(precision_of(StrategyKind::DpsAmp, o).amp == AmpLevel::O1);  // an explicit setting wins
  CHECK(precision_of(StrategyKind::DpsAmp, o).half == DType::BF16);
}

TEST_CASE("the builtin paper scenario: 6 strategies x 7 device counts with the paper's settings") {
  Scenario sc = load_builtin_scenario("paper-hal");
  CHECK(sc.name == "paper-hal");
  REQUIRE(sc.points.size() == 42);
  // Every shipped scenario is embedded; paper-hal among them.
  auto names = builtin_scenario_names();
  CHECK(names.size() == 7);
  CHECK(std::find(names.begin(), names.end(), "paper-hal") != names.end());

  std::map<StrategyKind, std::set<int>> counts;
  for (const auto& p : sc.points) counts[p.strategy].insert(std::stoi(label(p, "devices")));
  CHECK(counts.size() == 6);
  for (const auto& [k, c] : counts) CHECK(c == std::set<int>{1, 2, 4, 8, 16, 32, 64});

  // Labels: the always-shown coordinates plus those that vary (batch, precision, the single note).
  CHECK(label_keys(sc.points[0]) ==
        std::vector<std::string>{"model", "cluster", "devices", "strategy", "micro_batch", "precision", "note"});

  for (const auto& p : sc.points) {
    CHECK(p.model.name == "paper");
    CHECK(p.cluster.name == "hal-v100");
    CHECK(p.options.clip_grad_norm);
    CHECK(p.sim.steps == 3);
    switch (p.strategy) {
      case StrategyKind::Single:
        CHECK(p.devices == 1);  // single always runs on one device
        CHECK(p.micro_batch == 4);
        CHECK(label(p, "note") == (label(p, "devices") == "1" ? "" : "single runs on 1 device"));
        break;
      case StrategyKind::Sps: CHECK(p.micro_batch == 1); break;
      case StrategyKind::Dps: CHECK(p.micro_batch == 2); break;
      case StrategyKind::Horovod:
      case StrategyKind::HorovodAmp:
        CHECK(p.micro_batch == 4);
        CHECK(p.options.fusion_threshold == mib(128));
        CHECK(p.options.cycle_time == Time::ms(1));
        break;
      case StrategyKind::DpsAmp:
        CHECK(p.micro_batch == 4);
        CHECK(p.options.bucket_cap == mib(25));
        CHECK(p.options.apex_message_elements == 1e7);
        break;
    }
    if (p.strategy != StrategyKind::Single) CHECK(p.devices == std::stoi(label(p, "devices")));
    const auto prec = precision_of(p.strategy, p.options);
    if (p.strategy == StrategyKind::DpsAmp) {
      CHECK(prec.amp == AmpLevel::O2);
      CHECK(label(p, "precision") == "O2 fp16");
    } else if (p.strategy == StrategyKind::HorovodAmp) {
      CHECK(prec.amp == AmpLevel::O1);
      CHECK(label(p, "precision") == "O1 fp16");
    } else {
      CHECK(prec.amp == AmpLevel::None);
      CHECK(label(p, "precision") == "fp32");
    }
    CHECK(p.profile.spec.name == "v100-sxm2-16gb");
  }
  CHECK_THROWS_AS(load_builtin_scenario("paper"), InputError);
}

TEST_CASE("grid expansion: lists multiply, knob lists only multiply the strategies they apply to") {
  Scenario sc = parse(R"(
name: grid
model: [tiny, small]
cluster: hal-v100
devices: [1, 2]
strategy: [dps, horovod]
options:
  dps:
    bucket_cap: [1 MiB, 2MiB, 26214400]
)");
  // dps: 2 models x 2 counts x 3 buckets = 12; horovod: 2 x 2 = 4.
  REQUIRE(sc.points.size() == 16);
  CHECK(sc.name == "grid");
  CHECK(label_keys(sc.points[0]) ==
        std::vector<std::string>{"model", "cluster", "devices", "strategy", "dps.bucket_cap"});
  std::multiset<std::string> buckets;
  for (const auto& p : sc.points) {
    buckets.insert(label(p, "dps.bucket_cap"));
    if (p.strategy == StrategyKind::Horovod) CHECK(p.options.bucket_cap == mib(25));  // untouched default
  }
  CHECK(buckets.count("1 MiB") == 4);
  CHECK(buckets.count("2 MiB") == 4);
  CHECK(buckets.count("25 MiB") == 4);  // normalised from 26214400 bytes
  CHECK(buckets.count("-") == 4);       // horovod rows: the knob does not apply
  // Outer axes vary slowest: the first points are all model tiny.
  CHECK(sc.points[0].model.name == "tiny");
  CHECK(sc.points[15].model.name == "small");
  CHECK(sc.points[0].options.bucket_cap == mib(1));
  CHECK(sc.points[1].options.bucket_cap == mib(2));
}

TEST_CASE("strategy: all expands to the six strategies; name defaults to the file stem") {
  Scenario sc = parse("model: tiny\ncluster: hal-v100\ndevices: 2\nstrategy: all\n", "dir/my-scn.yaml");
  CHECK(sc.points.size() == 6);
  CHECK(sc.name == "my-scn");
  CHECK(sc.points[0].scenario == "my-scn");
}

TEST_CASE("per-strategy micro_batch, accumulation and amp maps") {
  Scenario sc = parse(R"(
model: tiny
cluster: hal-v100
devices: 4
strategy: [single, sps, dps, horovod+amp]
micro_batch: {single: 8, sps: [1, 2], default: 3}
accumulation: {dps: 4, default: 1}
amp: {horovod+amp: o2, default: none}
half: bf16
)");
  REQUIRE(sc.points.size() == 5);
  CHECK(sc.points[0].micro_batch == 8);
  CHECK(sc.points[1].micro_batch == 1);
  CHECK(sc.points[2].micro_batch == 2);
  CHECK(sc.points[3].micro_batch == 3);
  CHECK(sc.points[3].options.accumulation == 4);
  CHECK(sc.points[4].micro_batch == 3);
  CHECK(sc.points[4].options.accumulation == 1);
  CHECK(precision_of(sc.points[4].strategy, sc.points[4].options).amp == AmpLevel::O2);
  CHECK(label(sc.points[4], "precision") == "O2 bf16");
  CHECK(label(sc.points[3], "precision") == "fp32");
  CHECK(label(sc.points[3], "accumulation") == "4");
}

TEST_CASE("what-if overrides, profile, simulation, pricing") {
  Scenario sc = parse(R"(
model: {preset: tiny, name: mini, n_layer: 3}
cluster: hal-v100
device_type: [v100-sxm2-32gb, {base: a100-sxm4-80gb, name: my-a100, price_per_hour: 3.5}]
devices: 8
strategy: horovod
inter_node_bandwidth: [25 Gb/s, 200 Gb/s]
inter_node_latency: 2 us
options:
  common: {algorithm: ring, clip_grad_norm: false}
  horovod: {cycle_time: 5 ms, fusion_threshold: [16 MiB, 64 MiB], fp16_compression: true, hierarchical_allreduce: true,
            response_cache: false, double_step: true}
profile:
  step_overhead: 2 ms
  matmul: {max: 0.6}
simulation: {network: [flow, analytic], steps: 4, seed: 7, all_devices: true, jitter: 0.05, trace_devices: 2}
pricing: {per_device_hour: 2.0}
token_budget: 1e9
)");
  // 2 device types x 2 bandwidths x 2 network modes x 2 fusion thresholds
  REQUIRE(sc.points.size() == 16);
  const PointSpec& p = sc.points[0];
  CHECK(p.model.name == "mini");
  CHECK(p.model.n_layer == 3);
  CHECK(p.cluster.device.name == "v100-sxm2-32gb");
  CHECK(sc.points[15].cluster.device.name == "my-a100");
  CHECK(sc.points[15].profile.spec.name == "my-a100");
  CHECK(p.cluster.inter_node_bandwidth->value() == doctest::Approx(25e9 / 8));
  CHECK(*p.cluster.inter_node_latency == Time::us(2));
  CHECK(p.options.algorithm == Algorithm::Ring);
  CHECK(!p.options.clip_grad_norm);
  CHECK(p.options.cycle_time == Time::ms(5));
  CHECK(p.options.fusion_threshold == mib(16));
  CHECK(sc.points[1].options.fusion_threshold == mib(64));
  CHECK(p.options.fp16_compression);
  CHECK(p.options.hierarchical_allreduce);
  CHECK(!p.options.response_cache);
  CHECK(p.options.double_step);
  CHECK(p.profile.step_overhead == Time::ms(2));
  CHECK(p.profile.matmul.max == doctest::Approx(0.6));
  CHECK(p.profile.compute_jitter == doctest::Approx(0.05));
  CHECK(p.sim.network_mode == NetworkMode::Flow);
  CHECK(sc.points[2].sim.network_mode == NetworkMode::Analytic);
  CHECK(p.sim.steps == 4);
  CHECK(p.sim.seed == 7);
  CHECK(p.sim.all_devices);
  CHECK(p.sim.trace_devices == 2);
  CHECK(*p.pricing.per_device_hour == 2.0);
  CHECK(*p.token_budget == 1e9);
  CHECK(label_keys(p) == std::vector<std::string>{"model", "cluster", "device_type", "devices", "strategy",
                                                  "inter_node_bandwidth", "network", "horovod.fusion_threshold"});
  CHECK(label(p, "inter_node_bandwidth") == "25 Gb/s");
  CHECK(label(p, "horovod.fusion_threshold") == "16 MiB");
}

TEST_CASE("cluster and calibration files are resolved relative to the scenario file") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "dptwin_test_scenario";
  fs::create_directories(dir / "sub");
  {
    std::ofstream(dir / "sub" / "cal.yaml") << "name: fitted\ndevice:\n  step_overhead: 3 ms\n";
    std::ofstream(dir / "sc.yaml") << "model: tiny\ncluster: hal-v100\ndevices: 2\nstrategy: dps\n"
                                      "calibration: sub/cal.yaml\nprofile: {overlap_slowdown: 0.2}\n";
    std::ofstream(dir / "bad-cal.yaml") << "model: tiny\ncluster: hal-v100\ndevices: 2\nstrategy: dps\n"
                                           "calibration: sub/missing.yaml\n";
    std::ofstream(dir / "sc-cluster.yaml") << "model: tiny\ncluster: sub/nope.yaml\ndevices: 2\nstrategy: dps\n";
  }
  Scenario sc = load_scenario((dir / "sc.yaml").string());
  REQUIRE(sc.points.size() == 1);
  CHECK(sc.points[0].profile.step_overhead == Time::ms(3));
  CHECK(sc.points[0].profile.overlap_slowdown == doctest::Approx(0.2));
  CHECK(sc.points[0].calibration.has_value());

  try {
    load_scenario((dir / "bad-cal.yaml").string());
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad-cal.yaml:5:") != std::string::npos);
    CHECK(std::string(e.what()).find("calibration file") != std::string::npos);
  }
  try {
    load_scenario((dir / "sc-cluster.yaml").string());
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("sc-cluster.yaml:2:") != std::string::npos);
    CHECK(std::string(e.what()).find("not found") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("errors name file, line, column and key") {
  struct Case {
    std::string yaml;
    std::vector<std::string> expect;  // substrings of the message
  };
  const std::string base = kBase;
  const std::vector<Case> cases = {
      {base + "micro_bach: 2\n", {"t.yaml:5:1", "micro_bach", "did you mean 'micro_batch'"}},
      {"model: tiny\ncluster: hal-v100\ndevices: four\nstrategy: dps\n", {"t.yaml:3:", "devices", "integer"}},
      {"model: tiny\ncluster: hal-v10\ndevices: 4\nstrategy: dps\n",
       {"t.yaml:2:", "cluster", "unknown cluster preset 'hal-v10'", "did you mean 'hal-v100'"}},
      {"model: tinny\ncluster: hal-v100\ndevices: 4\nstrategy: dps\n", {"t.yaml:1:", "model", "tinny"}},
      {"model: tiny\ncluster: hal-v100\ndevices: 4\nstrategy: [dps, horovd]\n",
       {"t.yaml:4:", "strategy[1]", "unknown strategy 'horovd'", "did you mean 'horovod'"}},
      {"model: tiny\ncluster: hal-v100\ndevices: [4, 0]\nstrategy: dps\n", {"t.yaml:3:", "devices[1]", ">= 1"}},
      {"model: tiny\ncluster: hal-v100\ndevices: [4, 128]\nstrategy: dps\n",
       {"t.yaml:3:", "devices[1]", "at most 64 devices"}},
      // A path the system refuses (a name over NAME_MAX) is "not found", not a filesystem_error.
      {"model: tiny\ncluster: " + std::string(300, 'c') + ".yaml\ndevices: 4\nstrategy: dps\n",
       {"t.yaml:2:", "cluster file", "not found"}},
      {base + "calibration: " + std::string(5000, 'p') + "/x.yaml\n", {"t.yaml:5:", "calibration file", "not found"}},
      {base + "micro_batch: 0\n", {"t.yaml:5:", "micro_batch", ">= 1"}},
      {base + "micro_batch: {single: 2}\n", {"t.yaml:5:", "micro_batch", "no micro_batch given for strategy 'dps'"}},
      {base + "micro_batch: {dpss: 2}\n", {"t.yaml:5:", "micro_batch.dpss", "did you mean 'dps'"}},
      {base + "accumulation: -1\n", {"t.yaml:5:", "accumulation", ">= 1"}},
      {base + "amp: o3\n", {"t.yaml:5:", "amp", "unknown amp level 'o3'"}},
      {base + "half: fp32\n", {"t.yaml:5:", "half", "unknown half type 'fp32'"}},
      {base + "device_type: v100\n", {"t.yaml:5:", "device_type", "unknown device type 'v100'"}},
      {base + "inter_node_bandwidth: 100 Gbx\n", {"t.yaml:5:", "inter_node_bandwidth", "unknown unit"}},
      {base + "inter_node_bandwidth: 0 Gb/s\n", {"t.yaml:5:", "inter_node_bandwidth", "> 0"}},
      {base + "options:\n  dps:\n    bucket_cap_mb: 25\n",
       {"t.yaml:7:5", "options.dps.bucket_cap_mb", "did you mean 'bucket_cap'"}},
      {base + "options:\n  ddp: {}\n", {"t.yaml:6:3", "options.ddp", "unknown key"}},
      {base + "options:\n  dps:\n    bucket_cap: [25 MiB, -1]\n", {"t.yaml:7:", "options.dps.bucket_cap[1]"}},
      {base + "options:\n  horovod:\n    cycle_time: 0 ms\n", {"t.yaml:7:", "cycle_time", "> 0"}},
      {base + "options:\n  horovod:\n    response_cache: maybe\n", {"t.yaml:7:", "response_cache", "true or false"}},
      {base + "options:\n  sps:\n    mode: threads\n", {"t.yaml:7:", "options.sps.mode", "unknown sps mode"}},
      {base + "options:\n  common:\n    algorithm: butterfly\n", {"t.yaml:7:", "algorithm", "unknown algorithm"}},
      {base + "simulation:\n  network: exact\n", {"t.yaml:6:", "simulation.network", "unknown network model"}},
      {base + "simulation:\n  steps: 0\n", {"t.yaml:6:", "simulation.steps"}},
      {base + "simulation:\n  jitter: 0.9\n", {"t.yaml:6:", "simulation.jitter", "not meaningful"}},
      {base + "simulation:\n  stepz: 2\n", {"t.yaml:6:", "simulation.stepz", "did you mean 'steps'"}},
      {base + "pricing:\n  per_device_hour: -1\n", {"t.yaml:6:", "pricing.per_device_hour", ">= 0"}},
      {base + "token_budget: 0\n", {"t.yaml:5:", "token_budget", "> 0"}},
      {base + "profile:\n  matmul: {max: 2}\n", {"t.yaml:6:", "profile.matmul.max"}},
      {base + "profile:\n  launch: 1 us\n", {"t.yaml:6:", "profile.launch", "unknown key"}},
      {"cluster: hal-v100\ndevices: 4\nstrategy: dps\n", {"t.yaml", "model", "missing required key"}},
      {"model: tiny\ndevices: 4\nstrategy: dps\n", {"t.yaml", "cluster", "missing required key"}},
      {"model: tiny\ncluster: hal-v100\ndevices: []\nstrategy: dps\n", {"t.yaml:3:", "devices", "non-empty"}},
      {"model: tiny\ncluster: hal-v100\ndevices: 4\nstrategy: {dps: 1}\n", {"t.yaml:4:", "strategy"}},
      {"- just a list\n", {"t.yaml:1:", "mapping"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.yaml);
    std::string msg = error_of(c.yaml);
    CAPTURE(msg);
    CHECK(!msg.empty());
    for (const auto& s : c.expect) CHECK(msg.find(s) != std::string::npos);
  }
}

TEST_CASE("grids larger than the limit are refused") {
  std::string big = "model: tiny\ncluster: localhost-cpu\nstrategy: dps\ndevices: [";
  for (int i = 1; i <= 30; ++i) big += std::to_string(i) + (i < 30 ? ", " : "]\n");
  big += "micro_batch: [";
  for (int i = 1; i <= 30; ++i) big += std::to_string(i) + (i < 30 ? ", " : "]\n");
  big += "accumulation: [";
  for (int i = 1; i <= 30; ++i) big += std::to_string(i) + (i < 30 ? ", " : "]\n");
  std::string msg = error_of(big);
  CHECK(msg.find("more than 20000 points") != std::string::npos);
}
