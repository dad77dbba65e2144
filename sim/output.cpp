// sim/output.cpp — table, JSON, CSV and Chrome-trace writers (schemas: scenarios/README.md).
#include "sim/output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace dptwin::sim {

std::string to_string(StreamKind s) {
  switch (s) {
    case StreamKind::Compute: return "compute";
    case StreamKind::Comm: return "comm";
    case StreamKind::Host: return "host";
  }
  return "unknown";
}

std::string to_string(Category c) {
  switch (c) {
    case Category::Forward: return "forward";
    case Category::Backward: return "backward";
    case Category::Optimizer: return "optimizer";
    case Category::Communication: return "communication";
    case Category::Memcpy: return "memcpy";
    case Category::Overhead: return "overhead";
    case Category::Negotiation: return "negotiation";
  }
  return "unknown";
}

ReportHeader header_of(const Scenario& sc) { return {sc.name, sc.description, sc.file}; }

namespace {

using ojson = nlohmann::ordered_json;

ojson opt(const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); }

// Parameter keys over all results, in first-seen order.
std::vector<std::string> param_keys(const std::vector<PointResult>& results) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto& r : results)
    for (const auto& [k, v] : r.params)
      if (seen.insert(k).second) keys.push_back(k);
  return keys;
}

std::string param_value(const PointResult& r, const std::string& key) {
  for (const auto& [k, v] : r.params)
    if (k == key) return v;
  return "";
}

constexpr double kGiB = 1073741824.0;

// ---------------------------------------------------------------- table

struct Column {
  std::string title;
  bool numeric;  // right-aligned
  std::vector<std::string> cells;
};

std::string num(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

}  // namespace

void write_table(std::ostream& out, const ReportHeader& h, const std::vector<PointResult>& results,
                 const OutputOptions& opt_) {
  out << "scenario: " << h.scenario;
  if (!h.description.empty()) out << " - " << h.description;
  out << "\n";
  if (!h.file.empty()) out << "file: " << h.file << "\n";
  out << "\n";

  const auto keys = param_keys(results);
  const bool any_cost = std::any_of(results.begin(), results.end(),
                                    [](const PointResult& r) { return r.cost_per_million_tokens.has_value(); });
  const bool any_ttt =
      std::any_of(results.begin(), results.end(), [](const PointResult& r) { return r.time_to_train_s.has_value(); });
  const bool any_ctt =
      std::any_of(results.begin(), results.end(), [](const PointResult& r) { return r.cost_to_train.has_value(); });

  std::vector<Column> cols;
  auto add = [&](std::string title, bool numeric) -> Column& {
    cols.push_back({std::move(title), numeric, {}});
    return cols.back();
  };
  add("#", true);
  for (const auto& k : keys)
    if (k != "note") add(k, false);
  add("status", false);
  add("step ms", true);
  add("tokens/s", true);
  add("samples/s", true);
  add("scaling %", true);
  add("MFU %", true);
  add("compute ms", true);
  add("exposed ms", true);
  add("hidden ms", true);
  add("optim ms", true);
  add("overhead ms", true);
  add("memory GiB", true);
  if (any_cost) add("$/M tokens", true);
  if (any_ttt) add("train h", true);
  if (any_ctt) add("train $", true);
  const bool has_note = std::find(keys.begin(), keys.end(), "note") != keys.end();
  if (has_note) add("note", false);

  for (size_t i = 0; i < results.size(); ++i) {
    const PointResult& r = results[i];
    const bool timed = r.step_time_s.has_value();
    auto ms = [&](double s) { return timed ? fmt::format("{:.2f}", s * 1e3) : std::string("-"); };
    size_t c = 0;
    cols[c++].cells.push_back(std::to_string(i));
    for (const auto& k : keys)
      if (k != "note") cols[c++].cells.push_back(param_value(r, k));
    cols[c++].cells.push_back(r.status == "oom" ? "OOM" : r.status);
    cols[c++].cells.push_back(r.step_time_s ? fmt::format("{:.2f}", *r.step_time_s * 1e3) : "-");
    cols[c++].cells.push_back(num(r.tokens_per_s, "{:.0f}"));
    cols[c++].cells.push_back(num(r.samples_per_s, "{:.1f}"));
    cols[c++].cells.push_back(
        r.scaling_efficiency ? fmt::format("{:.1f}", *r.scaling_efficiency * 100) : std::string("-"));
    cols[c++].cells.push_back(r.mfu ? fmt::format("{:.1f}", *r.mfu * 100) : std::string("-"));
    cols[c++].cells.push_back(ms(r.breakdown.compute_s));
    cols[c++].cells.push_back(ms(r.breakdown.exposed_comm_s));
    cols[c++].cells.push_back(ms(r.breakdown.hidden_comm_s));
    cols[c++].cells.push_back(ms(r.breakdown.optimizer_s));
    cols[c++].cells.push_back(ms(r.breakdown.overhead_s));
    cols[c++].cells.push_back(fmt::format("{:.2f}/{:.1f}{}", r.memory.peak / kGiB, r.memory.capacity / kGiB,
                                          r.memory.oom ? " OOM" : ""));
    if (any_cost) cols[c++].cells.push_back(num(r.cost_per_million_tokens, "{:.3f}"));
    if (any_ttt)
      cols[c++].cells.push_back(r.time_to_train_s ? fmt::format("{:.1f}", *r.time_to_train_s / 3600) : "-");
    if (any_ctt) cols[c++].cells.push_back(num(r.cost_to_train, "{:.0f}"));
    if (has_note) cols[c++].cells.push_back(param_value(r, "note"));
  }

  std::vector<size_t> width;
  for (const auto& col : cols) {
    size_t w = col.title.size();
    for (const auto& cell : col.cells) w = std::max(w, cell.size());
    width.push_back(w);
  }
  auto emit_row = [&](auto cell_of) {
    std::string line;
    for (size_t c = 0; c < cols.size(); ++c) {
      const std::string cell = cell_of(c);
      const bool last = c + 1 == cols.size();
      if (c) line += "  ";
      if (cols[c].numeric)
        line += std::string(width[c] - cell.size(), ' ') + cell;
      else
        line += last ? cell : cell + std::string(width[c] - cell.size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  emit_row([&](size_t c) { return cols[c].title; });
  emit_row([&](size_t c) { return std::string(width[c], '-'); });
  for (size_t i = 0; i < results.size(); ++i) emit_row([&](size_t c) { return cols[c].cells[i]; });

  bool any_message = false;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].message.empty()) continue;
    if (!any_message) out << "\nnotes:\n";
    any_message = true;
    out << fmt::format("  [{}] {}: {}\n", i, results[i].status, results[i].message);
  }
  out << "\nstep ms: time per optimizer step; breakdown columns are ms per step on the critical device;"
         " memory: peak/capacity per device.\n";
  if (opt_.wall_time) {
    double wall = 0;
    int64_t events = 0;
    for (const auto& r : results) {
      wall += r.wall_seconds;
      events += r.events;
    }
    out << fmt::format("simulated {} points, {} events, {:.3f} s of simulator time (summed over points)\n",
                       results.size(), events, wall);
  }
}

// ---------------------------------------------------------------- JSON

ojson point_to_json(const PointResult& r, size_t index, const OutputOptions& o) {
  ojson j;
  j["index"] = index;
  ojson params = ojson::object();
  for (const auto& [k, v] : r.params) params[k] = v;
  j["params"] = params;
  j["status"] = r.status;
  j["message"] = r.message;
  j["devices_used"] = r.devices;
  j["global_batch_samples"] = r.global_batch;
  j["tokens_per_step"] = r.tokens_per_step;
  j["step_time_s"] = opt(r.step_time_s);
  j["tokens_per_s"] = opt(r.tokens_per_s);
  j["samples_per_s"] = opt(r.samples_per_s);
  j["scaling_efficiency"] = opt(r.scaling_efficiency);
  j["mfu"] = opt(r.mfu);
  const bool timed = r.step_time_s.has_value();
  auto bd = [&](double v) { return timed ? ojson(v) : ojson(nullptr); };
  j["breakdown"] = ojson{{"compute_s", bd(r.breakdown.compute_s)},
                         {"exposed_comm_s", bd(r.breakdown.exposed_comm_s)},
                         {"hidden_comm_s", bd(r.breakdown.hidden_comm_s)},
                         {"optimizer_s", bd(r.breakdown.optimizer_s)},
                         {"overhead_s", bd(r.breakdown.overhead_s)}};
  const MemoryReport& m = r.memory;
  j["memory"] = ojson{{"weights_bytes", m.weights},
                      {"gradients_bytes", m.gradients},
                      {"optimizer_state_bytes", m.optimizer_state},
                      {"master_weights_bytes", m.master_weights},
                      {"activations_bytes", m.activations},
                      {"workspace_bytes", m.workspace},
                      {"comm_buffers_bytes", m.comm_buffers},
                      {"gathered_outputs_bytes", m.gathered_outputs},
                      {"framework_reserve_bytes", m.framework_reserve},
                      {"peak_bytes", m.peak},
                      {"capacity_bytes", m.capacity},
                      {"device", m.device},
                      {"oom", m.oom}};
  j["cost_per_million_tokens_usd"] = opt(r.cost_per_million_tokens);
  j["time_to_train_s"] = opt(r.time_to_train_s);
  j["cost_to_train_usd"] = opt(r.cost_to_train);
  j["simulator"] = ojson{{"events", r.events},
                         {"simulated_devices", r.simulated_devices},
                         {"wall_seconds", o.wall_time ? ojson(r.wall_seconds) : ojson(nullptr)}};
  j["timeline"] = r.timeline ? ojson{{"events", r.timeline->events.size()},
                                     {"link_activities", r.timeline->links.size()}}
                             : ojson(nullptr);
  return j;
}

ojson to_json(const ReportHeader& h, const std::vector<PointResult>& results, const OutputOptions& o) {
  ojson j;
  j["scenario"] = h.scenario;
  j["description"] = h.description;
  j["file"] = h.file;
  ojson points = ojson::array();
  for (size_t i = 0; i < results.size(); ++i) points.push_back(point_to_json(results[i], i, o));
  j["points"] = std::move(points);
  return j;
}

void write_json(std::ostream& out, const ReportHeader& h, const std::vector<PointResult>& results,
                const OutputOptions& o) {
  out << to_json(h, results, o).dump(2) << "\n";
}

// ---------------------------------------------------------------- CSV

namespace {

// The fixed columns and how to read them from a result ("" = empty cell = null).
struct CsvField {
  const char* name;
  std::string (*get)(const PointResult&);
};

std::string csv_num(double v) { return fmt::format("{}", v); }
std::string csv_opt(const std::optional<double>& v) { return v ? csv_num(*v) : std::string(); }
std::string csv_bd(const PointResult& r, double v) { return r.step_time_s ? csv_num(v) : std::string(); }

const std::vector<CsvField>& csv_fields() {
  static const std::vector<CsvField> fields = {
      {"status", [](const PointResult& r) { return r.status; }},
      {"message", [](const PointResult& r) { return r.message; }},
      {"devices_used", [](const PointResult& r) { return std::to_string(r.devices); }},
      {"global_batch_samples", [](const PointResult& r) { return std::to_string(r.global_batch); }},
      {"tokens_per_step", [](const PointResult& r) { return std::to_string(r.tokens_per_step); }},
      {"step_time_s", [](const PointResult& r) { return csv_opt(r.step_time_s); }},
      {"tokens_per_s", [](const PointResult& r) { return csv_opt(r.tokens_per_s); }},
      {"samples_per_s", [](const PointResult& r) { return csv_opt(r.samples_per_s); }},
      {"scaling_efficiency", [](const PointResult& r) { return csv_opt(r.scaling_efficiency); }},
      {"mfu", [](const PointResult& r) { return csv_opt(r.mfu); }},
      {"compute_s", [](const PointResult& r) { return csv_bd(r, r.breakdown.compute_s); }},
      {"exposed_comm_s", [](const PointResult& r) { return csv_bd(r, r.breakdown.exposed_comm_s); }},
      {"hidden_comm_s", [](const PointResult& r) { return csv_bd(r, r.breakdown.hidden_comm_s); }},
      {"optimizer_s", [](const PointResult& r) { return csv_bd(r, r.breakdown.optimizer_s); }},
      {"overhead_s", [](const PointResult& r) { return csv_bd(r, r.breakdown.overhead_s); }},
      {"memory_weights_bytes", [](const PointResult& r) { return csv_num(r.memory.weights); }},
      {"memory_gradients_bytes", [](const PointResult& r) { return csv_num(r.memory.gradients); }},
      {"memory_optimizer_state_bytes", [](const PointResult& r) { return csv_num(r.memory.optimizer_state); }},
      {"memory_master_weights_bytes", [](const PointResult& r) { return csv_num(r.memory.master_weights); }},
      {"memory_activations_bytes", [](const PointResult& r) { return csv_num(r.memory.activations); }},
      {"memory_workspace_bytes", [](const PointResult& r) { return csv_num(r.memory.workspace); }},
      {"memory_comm_buffers_bytes", [](const PointResult& r) { return csv_num(r.memory.comm_buffers); }},
      {"memory_gathered_outputs_bytes", [](const PointResult& r) { return csv_num(r.memory.gathered_outputs); }},
      {"memory_framework_reserve_bytes", [](const PointResult& r) { return csv_num(r.memory.framework_reserve); }},
      {"memory_peak_bytes", [](const PointResult& r) { return csv_num(r.memory.peak); }},
      {"memory_capacity_bytes", [](const PointResult& r) { return csv_num(r.memory.capacity); }},
      {"memory_device", [](const PointResult& r) { return std::to_string(r.memory.device); }},
      {"oom", [](const PointResult& r) { return std::string(r.memory.oom ? "true" : "false"); }},
      {"cost_per_million_tokens_usd", [](const PointResult& r) { return csv_opt(r.cost_per_million_tokens); }},
      {"time_to_train_s", [](const PointResult& r) { return csv_opt(r.time_to_train_s); }},
      {"cost_to_train_usd", [](const PointResult& r) { return csv_opt(r.cost_to_train); }},
      {"events", [](const PointResult& r) { return std::to_string(r.events); }},
      {"simulated_devices", [](const PointResult& r) { return std::to_string(r.simulated_devices); }},
  };
  return fields;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A parameter column named like a fixed column is prefixed "param_".
std::string param_column(const std::string& key) {
  if (key == "index" || key == "wall_seconds") return "param_" + key;
  for (const auto& f : csv_fields())
    if (key == f.name) return "param_" + key;
  return key;
}

}  // namespace

std::vector<std::string> csv_columns(const std::vector<PointResult>& results, const OutputOptions& o) {
  std::vector<std::string> cols{"index"};
  for (const auto& k : param_keys(results)) cols.push_back(param_column(k));
  for (const auto& f : csv_fields()) cols.emplace_back(f.name);
  if (o.wall_time) cols.emplace_back("wall_seconds");
  return cols;
}

void write_csv(std::ostream& out, const std::vector<PointResult>& results, const OutputOptions& o) {
  const auto keys = param_keys(results);
  const auto cols = csv_columns(results, o);
  for (size_t c = 0; c < cols.size(); ++c) out << (c ? "," : "") << csv_escape(cols[c]);
  out << "\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const PointResult& r = results[i];
    out << i;
    for (const auto& k : keys) out << "," << csv_escape(param_value(r, k));
    for (const auto& f : csv_fields()) out << "," << csv_escape(f.get(r));
    if (o.wall_time) out << "," << csv_num(r.wall_seconds);
    out << "\n";
  }
}

// ---------------------------------------------------------------- Chrome trace

namespace {

int stream_tid(StreamKind s) {
  switch (s) {
    case StreamKind::Compute: return 0;
    case StreamKind::Comm: return 1;
    case StreamKind::Host: return 2;
  }
  return 3;
}

nlohmann::json meta(const char* what, int pid, int tid, nlohmann::json args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

double us(Time t) { return static_cast<double>(t.count_ns()) / 1000.0; }

void append_point(nlohmann::json& events, const Timeline& tl, int pid_base, int links_pid, const std::string& prefix) {
  std::map<int, std::set<StreamKind>> streams;  // device -> streams seen (sorted: deterministic)
  for (const auto& e : tl.events) streams[e.device].insert(e.stream);
  for (const auto& [device, kinds] : streams) {
    const int pid = pid_base + device;
    events.push_back(meta("process_name", pid, 0, {{"name", fmt::format("{}device {}", prefix, device)}}));
    events.push_back(meta("process_sort_index", pid, 0, {{"sort_index", pid}}));
    for (auto k : kinds) {
      events.push_back(meta("thread_name", pid, stream_tid(k), {{"name", to_string(k)}}));
      events.push_back(meta("thread_sort_index", pid, stream_tid(k), {{"sort_index", stream_tid(k)}}));
    }
  }
  for (const auto& e : tl.events) {
    events.push_back({{"name", e.name},
                      {"cat", to_string(e.category)},
                      {"ph", "X"},
                      {"ts", us(e.start)},
                      {"dur", us(e.end - e.start)},
                      {"pid", pid_base + e.device},
                      {"tid", stream_tid(e.stream)},
                      {"args", {{"bytes", e.bytes}}}});
  }
  if (tl.links.empty()) return;
  events.push_back(meta("process_name", links_pid, 0, {{"name", prefix + "links"}}));
  events.push_back(meta("process_sort_index", links_pid, 0, {{"sort_index", links_pid}}));
  std::map<int, int> tid_of;  // link id -> tid, in order of first activity
  for (const auto& l : tl.links) {
    auto [it, inserted] = tid_of.emplace(l.link, static_cast<int>(tid_of.size()));
    if (inserted) {
      events.push_back(meta("thread_name", links_pid, it->second,
                            {{"name", l.name.empty() ? fmt::format("link {}", l.link) : l.name}}));
      events.push_back(meta("thread_sort_index", links_pid, it->second, {{"sort_index", it->second}}));
    }
    events.push_back({{"name", l.name.empty() ? fmt::format("link {}", l.link) : l.name},
                      {"cat", "link"},
                      {"ph", "X"},
                      {"ts", us(l.start)},
                      {"dur", us(l.end - l.start)},
                      {"pid", links_pid},
                      {"tid", it->second},
                      {"args", {{"bytes", l.bytes}, {"link", l.link}}}});
  }
}

}  // namespace

nlohmann::json chrome_trace(const std::vector<PointResult>& results, std::optional<size_t> only) {
  nlohmann::json events = nlohmann::json::array();
  if (only) {
    if (*only < results.size() && results[*only].timeline) {
      const Timeline& tl = *results[*only].timeline;
      int max_device = -1;
      for (const auto& e : tl.events) max_device = std::max(max_device, e.device);
      append_point(events, tl, 0, max_device + 1, "");
    }
  } else {
    constexpr int kPidsPerPoint = 100000;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].timeline) continue;
      const int base = static_cast<int>(i) * kPidsPerPoint;
      append_point(events, *results[i].timeline, base, base + kPidsPerPoint - 1, fmt::format("p{} ", i));
    }
  }
  nlohmann::json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  return doc;
}

void write_chrome_trace(std::ostream& out, const std::vector<PointResult>& results, std::optional<size_t> only) {
  const nlohmann::json doc = chrome_trace(results, only);
  // One event per line: diffable and still valid JSON.
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  const auto& events = doc["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) out << (i ? ",\n" : "\n") << events[i].dump();
  out << "\n]}\n";
}

}  // namespace dptwin::sim
