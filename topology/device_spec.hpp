// topology/device_spec.hpp — datasheet figures of one compute device.
//
// A DeviceSpec is what a vendor datasheet says (peaks, memory, bandwidth); how
// much of it real kernels reach is the simulator's device profile (sim/), which
// starts from these figures and is replaced by calibration.
//
// Thread-safety: value types; the catalog is immutable after first use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/precision.hpp"
#include "core/units.hpp"
#include "core/yaml_reader.hpp"

namespace dptwin::topology {

enum class DeviceKind { Gpu, Cpu };

struct DeviceSpec {
  std::string name;              // catalog key, e.g. "v100-sxm2-16gb"
  DeviceKind kind = DeviceKind::Gpu;
  FlopRate fp32_peak;            // dense fp32 (non-tensor-core) FLOP/s
  FlopRate fp16_peak;            // dense fp16 tensor-core FLOP/s
  FlopRate bf16_peak;            // dense bf16 FLOP/s; 0 when unsupported (V100)
  Bandwidth memory_bandwidth;    // device memory (HBM / DRAM share) bytes/s
  Bytes memory;                  // device memory capacity
  Time launch_overhead;          // per-op dispatch/launch cost (kernel launch, framework)
  int cores = 0;                 // CPU ranks: cores used by the rank (0 for GPUs)
  double price_per_hour = 0;     // optional on-demand price, USD per device-hour; 0 = unknown

  FlopRate peak(DType t) const;  // fp32 / fp16 / bf16 peak; bf16 falls back to fp32 when 0
};

// Built-in datasheet catalog: v100-sxm2-16gb, v100-sxm2-32gb, a100-sxm4-40gb,
// a100-sxm4-80gb, h100-sxm5-80gb, h200-sxm-141gb, a100-pcie-40gb (PCIe server),
// l4 (or similar PCIe inference card), cpu-core (one x86 core with AVX-512).
const std::vector<DeviceSpec>& device_catalog();
std::optional<DeviceSpec> find_device_spec(const std::string& name);

// A device: a catalog name (scalar), or a mapping {base?, name, fp32_peak,
// fp16_peak, bf16_peak, memory_bandwidth, memory, launch_overhead, cores,
// price_per_hour} where `base` names a catalog entry supplying defaults.
DeviceSpec parse_device_spec(const YamlNode& node);

}  // namespace dptwin::topology
