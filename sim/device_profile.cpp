#include "sim/device_profile.hpp"

#include <fmt/format.h>

namespace dptwin::sim {

DeviceProfile default_profile(const topology::DeviceSpec& spec) {
  DeviceProfile p;
  p.spec = spec;
  p.launch_overhead = spec.launch_overhead;
  if (spec.kind == topology::DeviceKind::Cpu) {
    // CPU ranks: GEMMs reach a good share of peak early; no separate context.
    p.matmul = {0.70, 2e7};
    p.batched_matmul = {0.45, 2e7};
    p.memory = {0.70, 1e5};
    p.framework_reserve = mib(300);
    p.step_overhead = Time::us(200);
    p.overlap_slowdown = 0.30;  // communication progress steals cycles from the same cores
    p.host_memcpy = spec.memory_bandwidth;
  }
  return p;
}

static void apply_curve(const YamlNode& n, EfficiencyCurve& c) {
  n.check_keys({"max", "half_work"});
  if (auto m = n.find("max")) {
    c.max = m->as_positive();
    if (c.max > 1.0) m->fail(fmt::format("efficiency must be in (0, 1], got {}", c.max));
  }
  if (auto h = n.find("half_work")) c.half_work = h->as_non_negative();
}

void apply_profile_yaml(const YamlNode& node, DeviceProfile& p) {
  node.check_keys({"matmul", "batched_matmul", "memory", "launch_overhead", "step_overhead", "overlap_slowdown",
                   "compute_jitter", "framework_reserve", "optimizer_kernels_per_tensor", "host_memcpy"});
  if (auto n = node.find("matmul")) apply_curve(*n, p.matmul);
  if (auto n = node.find("batched_matmul")) apply_curve(*n, p.batched_matmul);
  if (auto n = node.find("memory")) apply_curve(*n, p.memory);
  if (auto n = node.find("launch_overhead")) p.launch_overhead = n->as_time();
  if (auto n = node.find("step_overhead")) p.step_overhead = n->as_time();
  if (auto n = node.find("overlap_slowdown")) p.overlap_slowdown = n->as_non_negative();
  if (auto n = node.find("compute_jitter")) {
    p.compute_jitter = n->as_non_negative();
    if (p.compute_jitter > 0.5) n->fail("compute_jitter above 0.5 is not meaningful");
  }
  if (auto n = node.find("framework_reserve")) p.framework_reserve = n->as_bytes();
  if (auto n = node.find("optimizer_kernels_per_tensor")) p.optimizer_kernels_per_tensor = n->as_positive_int();
  if (auto n = node.find("host_memcpy")) p.host_memcpy = n->as_bandwidth();
}

}  // namespace dptwin::sim
