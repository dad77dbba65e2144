#include "topology/device_spec.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dptwin::topology {

FlopRate DeviceSpec::peak(DType t) const {
  switch (t) {
    case DType::FP32: return fp32_peak;
    case DType::FP16: return fp16_peak.value() > 0 ? fp16_peak : fp32_peak;
    case DType::BF16: return bf16_peak.value() > 0 ? bf16_peak : fp32_peak;
  }
  return fp32_peak;
}

namespace {

// Per-op dispatch cost on GPUs: PyTorch eager dispatch (~3-5 us of CPU time per
// op) plus a CUDA kernel launch (~2-4 us); calibration replaces it.
constexpr Time kGpuLaunch = Time::us(7);

DeviceSpec gpu(std::string name, double fp32_tf, double fp16_tf, double bf16_tf, double hbm_gbs, Bytes memory,
               double price) {
  DeviceSpec d;
  d.name = std::move(name);
  d.kind = DeviceKind::Gpu;
  d.fp32_peak = tflop_per_s(fp32_tf);
  d.fp16_peak = tflop_per_s(fp16_tf);
  d.bf16_peak = tflop_per_s(bf16_tf);
  d.memory_bandwidth = gbyte_per_s(hbm_gbs);
  d.memory = memory;
  d.launch_overhead = kGpuLaunch;
  d.price_per_hour = price;
  return d;
}

std::vector<DeviceSpec> make_catalog() {
  std::vector<DeviceSpec> c;
  // NVIDIA V100 SXM2 datasheet: 15.7 TFLOP/s fp32, 125 TFLOP/s fp16 tensor core,
  // no bf16, 900 GB/s HBM2. Price: approximate public list price, AWS p3.2xlarge
  // on-demand (1x V100 16 GB) 3.06 USD/h.
  c.push_back(gpu("v100-sxm2-16gb", 15.7, 125, 0, 900, gib(16), 3.06));
  // Same chip, 32 GB HBM2. Price: approximate public list price, AWS
  // p3dn.24xlarge 31.21 USD/h / 8 GPUs = 3.90 USD/GPU-h.
  c.push_back(gpu("v100-sxm2-32gb", 15.7, 125, 0, 900, gib(32), 3.90));
  // NVIDIA A100 SXM4 datasheet: 19.5 fp32, 312 fp16/bf16 dense, 1,555 GB/s (40 GB).
  // Price: approximate public list price, AWS p4d.24xlarge 32.77 USD/h / 8 = 4.10.
  c.push_back(gpu("a100-sxm4-40gb", 19.5, 312, 312, 1555, gib(40), 4.10));
  // A100 SXM4 80 GB: 2,039 GB/s HBM2e. Price: approximate public list price, AWS
  // p4de.24xlarge 40.97 USD/h / 8 = 5.12.
  c.push_back(gpu("a100-sxm4-80gb", 19.5, 312, 312, 2039, gib(80), 5.12));
  // NVIDIA H100 SXM5 datasheet: 67 fp32, 989 fp16/bf16 dense (1,979 with
  // sparsity), 3,350 GB/s HBM3, 80 GB. Price: approximate public list price;
  // on-demand H100 SXM offers range about 8-12 USD/GPU-h (AWS p5 ~ 12.3 before
  // its 2024 price cut); 9.80 taken as a middle figure.
  c.push_back(gpu("h100-sxm5-80gb", 67, 989, 989, 3350, gib(80), 9.80));
  // NVIDIA H200 SXM datasheet: same compute as H100 SXM, 4,800 GB/s HBM3e, 141 GB
  // (nvidia-smi shows 143,771 MiB). Price: approximate public list price, on-demand
  // H200 offers about 10-12 USD/GPU-h; 11.0 taken.
  c.push_back(gpu("h200-sxm-141gb", 67, 989, 989, 4800, mib(143771), 11.0));
  // NVIDIA A100 PCIe 40 GB datasheet: same peaks as SXM4 (lower 250 W TDP, so it
  // throttles sooner), 1,555 GB/s. Price: approximate public list price, ~3.0
  // USD/GPU-h on-demand (PCIe A100 instances, e.g. Lambda/Azure NC A100 v4 ~3.7).
  c.push_back(gpu("a100-pcie-40gb", 19.5, 312, 312, 1555, gib(40), 3.0));
  // NVIDIA L4 datasheet: 30.3 fp32, 121 fp16/bf16 dense (242 with sparsity),
  // 300 GB/s GDDR6, 24 GB. Price: approximate public list price, AWS g6.xlarge
  // (1x L4) 0.805 USD/h.
  c.push_back(gpu("l4", 30.3, 121, 121, 300, gib(24), 0.80));
  // One x86 core with AVX-512 (e.g. Xeon Ice Lake / Sapphire Rapids, or Zen 4):
  // 2 FMA units x 16 fp32 lanes x 2 FLOP x ~3 GHz ~ 190 GFLOP/s theoretical,
  // ~100 GFLOP/s reached by oneDNN/MKL GEMMs; bf16 via AVX512_BF16 (vdpbf16ps)
  // about twice fp32. fp16 has no native arithmetic (no AVX512-FP16 assumed): it
  // runs at the fp32 rate. Memory: ~10 GB/s DRAM bandwidth per core (a socket's
  // ~200-300 GB/s shared by 20-60 cores), 24 GB per rank. Launch: PyTorch CPU
  // op dispatch ~20 us including OpenMP fork/join. Price: approximate public list
  // price, ~0.05 USD per vCPU-hour on general-purpose cloud instances.
  DeviceSpec cpu;
  cpu.name = "cpu-core";
  cpu.kind = DeviceKind::Cpu;
  cpu.fp32_peak = flop_per_s(100e9);
  cpu.fp16_peak = flop_per_s(100e9);
  cpu.bf16_peak = flop_per_s(200e9);
  cpu.memory_bandwidth = gbyte_per_s(10);
  cpu.memory = gib(24);
  cpu.launch_overhead = Time::us(20);
  cpu.cores = 1;
  cpu.price_per_hour = 0.05;
  c.push_back(cpu);
  return c;
}

std::string catalog_names() {
  std::string out;
  for (const auto& d : device_catalog()) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

std::vector<std::string> catalog_name_list() {
  std::vector<std::string> out;
  for (const auto& d : device_catalog()) out.push_back(d.name);
  return out;
}

DeviceSpec lookup(const YamlNode& node, const std::string& name) {
  auto spec = find_device_spec(name);
  if (!spec) {
    std::string hint = closest_match(name, catalog_name_list());
    node.fail(fmt::format("unknown device '{}'{} (catalog: {})", name,
                          hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), catalog_names()));
  }
  return *spec;
}

// A FLOP rate that may be "0" (unsupported precision).
FlopRate flop_rate_or_zero(const YamlNode& n) {
  if (n.is_scalar() && (n.raw().Scalar() == "0" || n.raw().Scalar() == "0.0")) return FlopRate(0);
  return n.as_flop_rate();
}

}  // namespace

const std::vector<DeviceSpec>& device_catalog() {
  static const std::vector<DeviceSpec> catalog = make_catalog();
  return catalog;
}

std::optional<DeviceSpec> find_device_spec(const std::string& name) {
  const auto& c = device_catalog();
  auto it = std::find_if(c.begin(), c.end(), [&](const DeviceSpec& d) { return d.name == name; });
  if (it == c.end()) return std::nullopt;
  return *it;
}

DeviceSpec parse_device_spec(const YamlNode& node) {
  if (node.is_scalar()) return lookup(node, node.as<std::string>());
  node.check_keys({"base", "name", "kind", "fp32_peak", "fp16_peak", "bf16_peak", "memory_bandwidth", "memory",
                   "launch_overhead", "cores", "price_per_hour"});
  DeviceSpec d;
  bool based = false;
  if (auto b = node.find("base")) {
    d = lookup(*b, b->as<std::string>());
    based = true;
  }
  // Without a base, every datasheet figure must be given.
  auto req = [&](std::string_view key) -> std::optional<YamlNode> {
    if (based) return node.find(key);
    return node.at(key);
  };
  if (auto n = req("name")) d.name = n->as<std::string>();
  if (d.name.empty()) node.fail("device name must not be empty");
  if (auto n = node.find("kind")) {
    std::string k = n->as<std::string>();
    if (k == "gpu") d.kind = DeviceKind::Gpu;
    else if (k == "cpu") d.kind = DeviceKind::Cpu;
    else n->fail(fmt::format("unknown device kind '{}' (expected gpu or cpu)", k));
  }
  if (auto n = req("fp32_peak")) d.fp32_peak = n->as_flop_rate();
  if (auto n = req("fp16_peak")) d.fp16_peak = n->as_flop_rate();
  if (auto n = node.find("bf16_peak")) d.bf16_peak = flop_rate_or_zero(*n);
  if (auto n = req("memory_bandwidth")) d.memory_bandwidth = n->as_bandwidth();
  if (auto n = req("memory")) d.memory = n->as_bytes();
  if (auto n = req("launch_overhead")) {
    d.launch_overhead = n->as_time();
    if (d.launch_overhead.seconds() > 1.0) n->fail("launch_overhead above 1 s per kernel is not meaningful");
  }
  if (auto n = node.find("cores")) {
    d.cores = n->as<int>();
    if (d.cores < 0) n->fail("cores must be >= 0");
  } else if (!based) {
    d.cores = d.kind == DeviceKind::Cpu ? 1 : 0;
  }
  if (auto n = node.find("price_per_hour")) d.price_per_hour = n->as_non_negative();
  return d;
}

}  // namespace dptwin::topology
