// sim/device_profile.hpp — how close real kernels get to a device's datasheet.
//
// A DeviceProfile starts from the datasheet (topology::DeviceSpec) and adds
// efficiencies by op class and size, per-op launch cost and framework figures.
// Defaults are datasheet-derived; `dptwin calibrate` replaces them with fitted
// values (a profile YAML, see sim/README.md).
//
// Thread-safety: value types.
#pragma once

#include <string>

#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "topology/device_spec.hpp"

namespace dptwin::sim {

// Saturating efficiency: eff(work) = max * work / (work + half_work).
// `work` is the op's FLOPs (compute) or bytes (memory); half_work is the size
// at which half of `max` is reached.
struct EfficiencyCurve {
  double max = 0.7;
  double half_work = 0;  // 0 = always `max`
  double at(double work) const { return half_work <= 0 ? max : max * work / (work + half_work); }
};

struct DeviceProfile {
  topology::DeviceSpec spec;
  EfficiencyCurve matmul{0.75, 2e9};          // dense GEMM, of peak in its dtype
  EfficiencyCurve batched_matmul{0.55, 2e9};  // attention bmm
  EfficiencyCurve memory{0.80, 4e6};          // elementwise / softmax / layernorm, of memory bandwidth
  Time launch_overhead;                       // per kernel (dispatch + launch); from the spec by default
  Time step_overhead = Time::us(500);         // fixed host cost per optimizer step (Python loop, data loader hand-off)
  double overlap_slowdown = 0.10;             // compute slowdown while communication runs on the same device
  double compute_jitter = 0.0;                // relative std-dev of compute times (stragglers); 0 = deterministic
  Bytes framework_reserve = mib(512);         // CUDA context + allocator slack (CPU ranks: runtime)
  int optimizer_kernels_per_tensor = 10;      // eager AdamW (PyTorch 1.8, no foreach): kernels per parameter tensor
  Bandwidth host_memcpy = gbyte_per_s(10);    // host-side copies (Horovod fusion on CPU, DataParallel scatter)
};

// Datasheet-based defaults for a device.
DeviceProfile default_profile(const topology::DeviceSpec& spec);

// Applies a `device:` section of a profile YAML (keys: matmul {max, half_work},
// batched_matmul, memory, launch_overhead, step_overhead, overlap_slowdown,
// compute_jitter, framework_reserve, optimizer_kernels_per_tensor, host_memcpy).
void apply_profile_yaml(const YamlNode& node, DeviceProfile& profile);

}  // namespace dptwin::sim
