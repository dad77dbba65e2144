// sim/scenario.hpp — what-if scenarios from YAML, expanded into points.
//
// One YAML file describes one scenario. Most fields may hold a list; the
// scenario is the cartesian grid of all list fields (see scenarios/README.md for
// the full format, key by key). Parsed once into typed, validated structs; unknown keys are errors.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "models/gpt2.hpp"
#include "sim/collectives.hpp"
#include "sim/device_profile.hpp"
#include "sim/strategy.hpp"
#include "topology/cluster.hpp"

namespace dptwin::sim {

struct SimulationOptions {
  NetworkMode network_mode = NetworkMode::Flow;
  int steps = 2;                 // optimizer steps simulated; the first is warm-up (Horovod cache, first buckets)
  uint64_t seed = 1;             // random stream (compute jitter)
  bool trace = false;            // record a timeline
  int trace_devices = 8;         // devices recorded in the timeline
  // Simulate every device even when all devices are identical (no jitter).
  // false = one representative device per role when exact (see sim/README.md).
  bool all_devices = false;
};

struct Pricing {
  std::optional<double> per_device_hour;  // USD; default: the device spec's price
};

// One fully specified point of a scenario.
struct PointSpec {
  std::string scenario;               // scenario name
  models::Gpt2Config model;
  topology::ClusterSpec cluster;
  int devices = 1;
  StrategyKind strategy = StrategyKind::Single;
  int micro_batch = 1;                // samples per device per micro-step
  StrategyOptions options;
  std::optional<std::string> calibration;  // profile YAML path
  DeviceProfile profile;              // resolved device profile (defaults + calibration)
  SimulationOptions sim;
  Pricing pricing;
  std::optional<double> token_budget; // tokens to train, for time/cost to train
  // Grid coordinates that vary across the scenario (label -> value) for outputs.
  std::vector<std::pair<std::string, std::string>> labels;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;
  std::vector<PointSpec> points;
};

// Loads and expands a scenario file. Errors are InputError with file, line, key.
Scenario load_scenario(const std::string& path);
Scenario parse_scenario(const YamlNode& root);

// The paper scenario shipped with dptwin (scenarios/paper-hal.yaml, embedded).
// `name` is the file stem ("paper-hal"; a ".yaml" suffix is accepted). Unknown
// names are an InputError listing the known ones.
Scenario load_builtin_scenario(const std::string& name);
std::vector<std::string> builtin_scenario_names();
// (addition) The YAML text of a builtin scenario (for `dptwin list scenarios`
// and for users who want to copy and edit it).
std::string builtin_scenario_text(const std::string& name);

}  // namespace dptwin::sim
