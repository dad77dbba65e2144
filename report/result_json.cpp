// report/result_json.cpp — PointResult from JSON (see result_json.hpp).
#include "report/result_json.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace dptwin::report {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& field(const ojson& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw std::runtime_error(fmt::format("result JSON: missing field '{}'", key));
  return *it;
}

std::optional<double> opt(const ojson& j, const char* key) {
  const ojson& v = field(j, key);
  if (v.is_null()) return std::nullopt;
  return v.get<double>();
}

double num(const ojson& j, const char* key) {
  const ojson& v = field(j, key);
  return v.is_null() ? 0.0 : v.get<double>();
}

}  // namespace

sim::PointResult point_from_json(const ojson& j) {
  sim::PointResult r;
  for (const auto& [k, v] : field(j, "params").items()) r.params.emplace_back(k, v.get<std::string>());
  r.status = field(j, "status").get<std::string>();
  r.message = field(j, "message").get<std::string>();
  r.devices = field(j, "devices_used").get<int>();
  r.global_batch = field(j, "global_batch_samples").get<int64_t>();
  r.tokens_per_step = field(j, "tokens_per_step").get<int64_t>();
  r.step_time_s = opt(j, "step_time_s");
  r.tokens_per_s = opt(j, "tokens_per_s");
  r.samples_per_s = opt(j, "samples_per_s");
  r.scaling_efficiency = opt(j, "scaling_efficiency");
  r.mfu = opt(j, "mfu");
  const ojson& b = field(j, "breakdown");
  r.breakdown = {num(b, "compute_s"), num(b, "exposed_comm_s"), num(b, "hidden_comm_s"), num(b, "optimizer_s"),
                 num(b, "overhead_s")};
  const ojson& m = field(j, "memory");
  r.memory.weights = num(m, "weights_bytes");
  r.memory.gradients = num(m, "gradients_bytes");
  r.memory.optimizer_state = num(m, "optimizer_state_bytes");
  r.memory.master_weights = num(m, "master_weights_bytes");
  r.memory.activations = num(m, "activations_bytes");
  r.memory.workspace = num(m, "workspace_bytes");
  r.memory.comm_buffers = num(m, "comm_buffers_bytes");
  r.memory.gathered_outputs = num(m, "gathered_outputs_bytes");
  r.memory.framework_reserve = num(m, "framework_reserve_bytes");
  r.memory.peak = num(m, "peak_bytes");
  r.memory.capacity = num(m, "capacity_bytes");
  r.memory.device = field(m, "device").get<int>();
  r.memory.oom = field(m, "oom").get<bool>();
  r.cost_per_million_tokens = opt(j, "cost_per_million_tokens_usd");
  r.time_to_train_s = opt(j, "time_to_train_s");
  r.cost_to_train = opt(j, "cost_to_train_usd");
  const ojson& s = field(j, "simulator");
  r.events = field(s, "events").get<int64_t>();
  r.simulated_devices = field(s, "simulated_devices").get<int>();
  r.wall_seconds = num(s, "wall_seconds");
  return r;
}

std::vector<sim::PointResult> points_from_json(const ojson& doc) {
  const ojson& arr = doc.is_array() ? doc : field(doc, "points");
  std::vector<sim::PointResult> out(arr.size());
  std::vector<bool> seen(arr.size(), false);
  for (const auto& p : arr) {
    const size_t i = field(p, "index").get<size_t>();
    if (i >= out.size() || seen[i])
      throw std::runtime_error(fmt::format("result JSON: point index {} is out of range or repeated", i));
    out[i] = point_from_json(p);
    seen[i] = true;
  }
  return out;
}

}  // namespace dptwin::report
