// Helpers for simulator tests: a PointSpec from preset names.
#pragma once

#include "models/gpt2.hpp"
#include "sim/scenario.hpp"
#include "topology/cluster.hpp"

namespace dptwin::sim::testing {

inline PointSpec make_point(const std::string& model, const std::string& cluster, int devices, StrategyKind kind,
                            int micro_batch) {
  PointSpec p;
  p.scenario = "test";
  p.model = *models::find_gpt2_preset(model);
  p.cluster = topology::load_cluster_preset(cluster);
  p.devices = devices;
  p.strategy = kind;
  p.micro_batch = micro_batch;
  p.profile = default_profile(p.cluster.device);
  p.labels = {{"strategy", to_string(kind)}, {"devices", std::to_string(devices)}};
  return p;
}

}  // namespace dptwin::sim::testing
