// sim/strategy.cpp — names, descriptions and effective precision of the six strategies.
#include "sim/strategy.hpp"

#include <algorithm>
#include <cctype>

namespace dptwin::sim {
namespace {

struct StrategyInfo {
  StrategyKind kind;
  const char* name;
  const char* description;
};

// One table: canonical name and the one-line description `dptwin list strategies` prints.
constexpr StrategyInfo kStrategies[] = {
    {StrategyKind::Single, "single", "one process, one device (the baseline; always runs on 1 device)"},
    {StrategyKind::Sps, "sps",
     "single parameter server: nn.DataParallel in one process (scatter, replicate, gather outputs, "
     "reduce-add gradients and step on device 0), or a multi-process central server on rank 0"},
    {StrategyKind::Dps, "dps",
     "distributed parameter server: DistributedDataParallel, one process per device, 25 MiB gradient "
     "buckets (1 MiB first) allreduced while backward runs, optimizer on every rank"},
    {StrategyKind::Horovod, "horovod",
     "Horovod DistributedOptimizer: background cycle (1 ms) negotiates ready tensors with rank 0, "
     "fuses them (128 MiB) and allreduces"},
    {StrategyKind::DpsAmp, "dps+amp",
     "dps with Apex AMP O2 (half model, fp32 master weights, loss scaling) and Apex DDP (1e7-element "
     "messages, half-precision allreduce)"},
    {StrategyKind::HorovodAmp, "horovod+amp",
     "horovod with Apex AMP O1 (half matmuls, fp32 weights and allreduced gradients); optional double "
     "optimizer step as in the paper's code"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string to_string(StrategyKind k) {
  for (const auto& s : kStrategies)
    if (s.kind == k) return s.name;
  return "unknown";
}

std::optional<StrategyKind> parse_strategy(const std::string& text) {
  const std::string s = lower(text);
  for (const auto& info : kStrategies)
    if (s == info.name) return info.kind;
  return std::nullopt;
}

const std::vector<StrategyKind>& all_strategies() {
  static const std::vector<StrategyKind> all = [] {
    std::vector<StrategyKind> v;
    for (const auto& s : kStrategies) v.push_back(s.kind);
    return v;
  }();
  return all;
}

std::string describe(StrategyKind k) {
  for (const auto& s : kStrategies)
    if (s.kind == k) return s.description;
  return "";
}

PrecisionMode precision_of(StrategyKind k, const StrategyOptions& o) {
  PrecisionMode p;
  p.half = o.half;
  if (o.amp) {
    p.amp = *o.amp;
  } else if (k == StrategyKind::DpsAmp) {
    p.amp = AmpLevel::O2;  // Apex amp.initialize(opt_level="O2") in the paper's DDP+Apex code
  } else if (k == StrategyKind::HorovodAmp) {
    p.amp = AmpLevel::O1;  // Apex O1 in the paper's Horovod+Apex code
  } else {
    p.amp = AmpLevel::None;
  }
  return p;
}

}  // namespace dptwin::sim
