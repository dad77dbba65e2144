// sim/scenario.cpp — parses a scenario YAML and expands its grid into points.
//
// The format is documented key by key in scenarios/README.md. Parsing is
// strict: every mapping is checked against its allowed keys, every value is
// validated where it is read, and every error is an InputError located at the
// offending node. Expansion is a sequence of axes applied outermost first; each
// axis turns every partial point into one point per value (axes may depend on
// the strategy already chosen: per-strategy micro_batch, knob sections).
#include "sim/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

namespace dptwin::sim {

// Generated from scenarios/*.yaml by tools/embed_files.py (see sim/meson.build).
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_scenarios();

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPoints = 20000;   // a grid larger than this is almost certainly a typo
// Sanity limits on per-point figures (documented in scenarios/README.md, "Limits").
constexpr int kMaxDevices = 65536;      // devices of one point
constexpr int kMaxMicroBatch = 65536;   // samples per device per micro-step
constexpr int kMaxAccumulation = 1024;  // micro-steps per optimizer step
constexpr int kMaxSteps = 1000;         // simulated optimizer steps

// An integer >= 1 and <= limit.
int bounded_int(const YamlNode& n, int limit, const char* what) {
  int v = n.as_positive_int();
  if (v > limit) n.fail(fmt::format("{} {} is above the supported maximum of {}", what, v, limit));
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

[[noreturn]] void fail_unknown(const YamlNode& node, const std::string& what, const std::string& value,
                               const std::vector<std::string>& known) {
  std::string hint = closest_match(value, known);
  node.fail(hint.empty() ? fmt::format("unknown {} '{}' (known: {})", what, value, join(known))
                         : fmt::format("unknown {} '{}'; did you mean '{}'? (known: {})", what, value, hint,
                                       join(known)));
}

// A value, or a non-empty list of values (each item may itself be a mapping).
std::vector<YamlNode> list_of(const YamlNode& node) {
  if (node.is_sequence()) {
    auto v = node.items();
    if (v.empty()) node.fail("expected a value or a non-empty list of values");
    return v;
  }
  if (node.is_null()) node.fail("expected a value or a list of values");
  return {node};
}

// --- label formatting (normalised so that "25MiB" and "26214400" read the same) ---

std::string fmt_number(double v) { return fmt::format("{:g}", v); }

std::string label_bytes(Bytes b) {
  const double v = b.value();
  struct U { double f; const char* n; };
  constexpr U units[] = {{1099511627776.0, "TiB"}, {1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}};
  for (const auto& u : units)
    if (v >= u.f) {
      double x = v / u.f;
      if (std::fabs(x * 1000 - std::round(x * 1000)) < 1e-6) return fmt::format("{:g} {}", x, u.n);
    }
  return fmt::format("{:g} B", v);
}

std::string label_bandwidth(Bandwidth bw) { return fmt::format("{:g} Gb/s", bw.value() * 8 / 1e9); }

std::string label_time(Time t) {
  const double s = t.seconds();
  if (s >= 1) return fmt::format("{:g} s", s);
  if (s >= 1e-3) return fmt::format("{:g} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:g} us", s * 1e6);
  return fmt::format("{} ns", t.count_ns());
}

std::string label_precision(const PrecisionMode& p) {
  if (!p.mixed()) return "fp32";
  return fmt::format("{} {}", p.amp == AmpLevel::O1 ? "O1" : "O2", p.half == DType::BF16 ? "bf16" : "fp16");
}

// --- the partial point carried through expansion ---

struct Partial {
  PointSpec spec;
  int grid_devices = 1;  // the `devices` grid coordinate (single runs on 1 device whatever it is)
  const YamlNode* devices_node = nullptr;
  std::optional<topology::DeviceSpec> device_override;
  std::map<std::string, std::string> labels;  // candidate labels; filtered to the varying ones at the end
};

using Apply = std::function<void(Partial&)>;

// One axis: for a partial point, the list of ways to continue it.
using Axis = std::function<std::vector<Apply>(const Partial&)>;

// --- per-strategy fields: value | [values] | {strategy: value|[values], default: ...} ---

template <typename T>
struct Choice {
  T value;
  std::string label;
};

template <typename T>
class PerStrategy {
 public:
  using Parse = std::function<Choice<T>(const YamlNode&)>;

  PerStrategy(const YamlNode& root, std::string_view key, Choice<T> fallback, const Parse& parse) : key_(key) {
    auto node = root.find(key);
    if (!node) {
      default_ = {std::move(fallback)};
      return;
    }
    node_ = *node;
    if (node->is_map()) {
      std::vector<std::string> allowed{"default"};
      for (auto k : all_strategies()) allowed.push_back(to_string(k));
      node->check_keys(allowed);
      for (auto& [name, value] : node->entries()) {
        std::vector<Choice<T>> parsed;
        for (const auto& item : list_of(value)) parsed.push_back(parse(item));
        if (name == "default")
          default_ = std::move(parsed);
        else
          by_strategy_[*parse_strategy(name)] = std::move(parsed);
      }
    } else {
      std::vector<Choice<T>> parsed;
      for (const auto& item : list_of(*node)) parsed.push_back(parse(item));
      default_ = std::move(parsed);
    }
  }

  const std::vector<Choice<T>>& values_for(StrategyKind k) const {
    if (auto it = by_strategy_.find(k); it != by_strategy_.end()) return it->second;
    if (default_) return *default_;
    node_->fail(fmt::format("no {} given for strategy '{}' (add '{}: ...' or 'default: ...')", key_, to_string(k),
                            to_string(k)));
  }

 private:
  std::string key_;
  std::optional<YamlNode> node_;
  std::optional<std::vector<Choice<T>>> default_;
  std::map<StrategyKind, std::vector<Choice<T>>> by_strategy_;
};

// --- strategy knobs: one declarative table (section, key, which strategies, parser) ---

enum class Section { Common, Dps, Horovod, Sps };

bool section_applies(Section s, StrategyKind k) {
  switch (s) {
    case Section::Common: return true;
    case Section::Dps: return k == StrategyKind::Dps || k == StrategyKind::DpsAmp;
    case Section::Horovod: return k == StrategyKind::Horovod || k == StrategyKind::HorovodAmp;
    case Section::Sps: return k == StrategyKind::Sps;
  }
  return false;
}

using KnobSetter = std::function<void(StrategyOptions&)>;

struct Knob {
  Section section;
  const char* section_name;
  const char* key;
  // Parses one value: returns its label and how to apply it.
  std::function<Choice<KnobSetter>(const YamlNode&)> parse;
};

template <typename F>
Choice<KnobSetter> bool_knob(const YamlNode& n, F field) {
  bool v = n.as<bool>();
  return {[v, field](StrategyOptions& o) { o.*field = v; }, v ? "true" : "false"};
}
template <typename F>
Choice<KnobSetter> bytes_knob(const YamlNode& n, F field) {
  Bytes v = n.as_bytes();
  return {[v, field](StrategyOptions& o) { o.*field = v; }, label_bytes(v)};
}

const std::vector<Knob>& knob_table() {
  static const std::vector<Knob> table = {
      {Section::Common, "common", "algorithm",
       [](const YamlNode& n) -> Choice<KnobSetter> {
         std::string s = n.as<std::string>();
         Algorithm a{};
         if (!parse_algorithm(s, a))
           fail_unknown(n, "algorithm", s, {"auto", "ring", "tree", "hd", "hierarchical", "direct", "ps"});
         return {[a](StrategyOptions& o) { o.algorithm = a; }, s};
       }},
      {Section::Common, "common", "clip_grad_norm",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::clip_grad_norm); }},
      {Section::Dps, "dps", "bucket_cap", [](const YamlNode& n) { return bytes_knob(n, &StrategyOptions::bucket_cap); }},
      {Section::Dps, "dps", "first_bucket",
       [](const YamlNode& n) { return bytes_knob(n, &StrategyOptions::first_bucket); }},
      {Section::Dps, "dps", "broadcast_buffers",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::broadcast_buffers); }},
      {Section::Dps, "dps", "gradient_as_bucket_view",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::gradient_as_bucket_view); }},
      {Section::Dps, "dps", "apex_message_elements",
       [](const YamlNode& n) -> Choice<KnobSetter> {
         double v = n.as_positive();
         if (v < 1 || v > 1e12) n.fail(fmt::format("apex_message_elements must be between 1 and 1e12, got {}", v));
         return {[v](StrategyOptions& o) { o.apex_message_elements = v; }, fmt_number(v)};
       }},
      {Section::Horovod, "horovod", "cycle_time",
       [](const YamlNode& n) -> Choice<KnobSetter> {
         Time v = n.as_time();
         if (v <= Time::zero()) n.fail("cycle_time must be > 0");
         if (v.seconds() > 10) n.fail("cycle_time above 10 s is not meaningful");
         return {[v](StrategyOptions& o) { o.cycle_time = v; }, label_time(v)};
       }},
      {Section::Horovod, "horovod", "fusion_threshold",
       [](const YamlNode& n) { return bytes_knob(n, &StrategyOptions::fusion_threshold); }},
      {Section::Horovod, "horovod", "response_cache",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::response_cache); }},
      {Section::Horovod, "horovod", "fp16_compression",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::fp16_compression); }},
      {Section::Horovod, "horovod", "hierarchical_allreduce",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::hierarchical_allreduce); }},
      {Section::Horovod, "horovod", "double_step",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::double_step); }},
      {Section::Sps, "sps", "mode",
       [](const YamlNode& n) -> Choice<KnobSetter> {
         std::string s = n.as<std::string>();
         SpsMode m{};
         if (s == "auto") m = SpsMode::Auto;
         else if (s == "dataparallel") m = SpsMode::DataParallel;
         else if (s == "central-server") m = SpsMode::CentralServer;
         else fail_unknown(n, "sps mode", s, {"auto", "dataparallel", "central-server"});
         return {[m](StrategyOptions& o) { o.sps_mode = m; }, s};
       }},
      {Section::Sps, "sps", "broadcast_buffer",
       [](const YamlNode& n) { return bytes_knob(n, &StrategyOptions::broadcast_buffer); }},
      {Section::Sps, "sps", "gather_kv_cache",
       [](const YamlNode& n) { return bool_knob(n, &StrategyOptions::gather_kv_cache); }},
  };
  return table;
}

struct ParsedKnob {
  const Knob* knob;
  std::vector<Choice<KnobSetter>> values;
  std::string label_key() const { return std::string(knob->section_name) + "." + knob->key; }
};

std::vector<ParsedKnob> parse_options(const YamlNode& root) {
  std::vector<ParsedKnob> out;
  auto options = root.find("options");
  if (!options) return out;
  const std::vector<std::string> sections{"common", "dps", "horovod", "sps"};
  options->check_keys(sections);
  for (const auto& section : sections) {
    auto sec = options->find(section);
    if (!sec) continue;
    std::vector<std::string> keys;
    for (const auto& k : knob_table())
      if (section == k.section_name) keys.emplace_back(k.key);
    sec->check_keys(keys);
    for (const auto& k : knob_table()) {
      if (section != k.section_name) continue;
      auto value = sec->find(k.key);
      if (!value) continue;
      ParsedKnob pk{&k, {}};
      for (const auto& item : list_of(*value)) pk.values.push_back(k.parse(item));
      out.push_back(std::move(pk));
    }
  }
  return out;
}

// --- clusters, devices, models ---

topology::ClusterSpec resolve_cluster(const YamlNode& node, const fs::path& base_dir) {
  if (node.is_map()) return topology::parse_cluster(node);  // an inline cluster document
  const std::string name = node.as<std::string>();
  const auto presets = topology::cluster_preset_names();
  if (std::find(presets.begin(), presets.end(), name) != presets.end()) return topology::load_cluster_preset(name);
  const bool looks_like_path = name.find('/') != std::string::npos || name.ends_with(".yaml") ||
                               name.ends_with(".yml");
  if (!looks_like_path) fail_unknown(node, "cluster preset", name, presets);
  fs::path p = fs::path(name).is_absolute() ? fs::path(name) : base_dir / name;
  if (!path_exists(p.string())) node.fail(fmt::format("cluster file '{}' not found", p.string()));
  try {
    return topology::load_cluster(p.string());
  } catch (const InputError& e) {
    throw e.with_context(
        fmt::format("while loading cluster '{}' ({})", name, format_location(node.location(), node.path())));
  }
}

topology::DeviceSpec resolve_device(const YamlNode& node) {
  if (node.is_scalar()) {
    const std::string name = node.as<std::string>();
    if (auto d = topology::find_device_spec(name)) return *d;
    std::vector<std::string> known;
    for (const auto& d : topology::device_catalog()) known.push_back(d.name);
    fail_unknown(node, "device type", name, known);
  }
  return topology::parse_device_spec(node);
}

int max_devices(const topology::ClusterSpec& c) {
  if (c.explicit_devices > 0) return c.explicit_devices;  // an explicit graph holds exactly its devices
  if (!c.max_nodes) return std::numeric_limits<int>::max();
  return static_cast<int>(std::min<int64_t>(int64_t{*c.max_nodes} * c.devices_per_node, kMaxDevices));
}

// The calibration file: a profile YAML whose `device:` section is applied.
// (The calibration issue extends this format; unknown keys are errors meanwhile.)
std::optional<YamlNode> load_calibration(const YamlNode& node, const fs::path& base_dir) {
  const std::string name = node.as<std::string>();
  fs::path p = fs::path(name).is_absolute() ? fs::path(name) : base_dir / name;
  if (!path_exists(p.string())) node.fail(fmt::format("calibration file '{}' not found", p.string()));
  // The whole profile document as `dptwin calibrate` writes it (device: and network:).
  YamlNode cal = load_yaml_file(p.string());
  cal.check_keys(profile_document_keys());
  return cal;
}

}  // namespace

// ------------------------------------------------------------------------------------------------

Scenario parse_scenario(const YamlNode& root) {
  root.check_keys({"name", "description", "model", "cluster", "device_type", "devices", "strategy", "micro_batch",
                   "accumulation", "amp", "half", "inter_node_bandwidth", "inter_node_latency", "options",
                   "calibration", "profile", "simulation", "pricing", "token_budget"});
  const fs::path base_dir = fs::path(root.file()).parent_path();

  Scenario sc;
  sc.file = root.file();
  sc.name = root.has("name") ? root.at("name").as<std::string>() : fs::path(root.file()).stem().string();
  sc.description = root.get<std::string>("description", "");

  // ---- scalar sections shared by all points ----
  SimulationOptions sim;
  std::vector<Choice<NetworkMode>> networks{{NetworkMode::Flow, "flow"}};
  std::optional<double> jitter;
  if (auto s = root.find("simulation")) {
    s->check_keys({"network", "steps", "seed", "all_devices", "jitter", "trace_devices"});
    if (auto n = s->find("network")) {
      networks.clear();
      for (const auto& item : list_of(*n)) {
        std::string v = item.as<std::string>();
        if (v == "flow") networks.push_back({NetworkMode::Flow, v});
        else if (v == "analytic") networks.push_back({NetworkMode::Analytic, v});
        else fail_unknown(item, "network model", v, {"flow", "analytic"});
      }
    }
    if (auto n = s->find("steps")) sim.steps = bounded_int(*n, kMaxSteps, "steps");
    if (auto n = s->find("seed")) {
      int64_t seed = n->as<int64_t>();
      if (seed < 0) n->fail("seed must be >= 0");
      sim.seed = static_cast<uint64_t>(seed);
    }
    sim.all_devices = s->get<bool>("all_devices", false);
    if (auto n = s->find("jitter")) {
      jitter = n->as_non_negative();
      if (*jitter > 0.5) n->fail("jitter (relative std-dev of compute times) above 0.5 is not meaningful");
    }
    if (auto n = s->find("trace_devices")) sim.trace_devices = bounded_int(*n, kMaxDevices, "trace_devices");
  }

  Pricing pricing;
  if (auto p = root.find("pricing")) {
    p->check_keys({"per_device_hour"});
    if (auto n = p->find("per_device_hour")) pricing.per_device_hour = n->as_non_negative();
  }
  std::optional<double> token_budget;
  if (auto n = root.find("token_budget")) token_budget = n->as_positive();

  std::optional<YamlNode> calibration_device;
  std::optional<std::string> calibration_path;
  if (auto n = root.find("calibration")) {
    calibration_device = load_calibration(*n, base_dir);
    calibration_path = (fs::path(n->as<std::string>()).is_absolute() ? fs::path(n->as<std::string>())
                                                                     : base_dir / n->as<std::string>())
                           .string();
  }
  std::optional<YamlNode> profile_section = root.find("profile");
  if (profile_section && !profile_section->is_map()) profile_section->fail("expected a mapping of profile fields");

  // ---- axes (outermost first) ----
  std::vector<Axis> axes;

  std::vector<models::Gpt2Config> model_values;
  for (const auto& item : list_of(root.at("model"))) {
    model_values.push_back(models::parse_gpt2_config(item));
    if (model_values.back().name.empty()) model_values.back().name = "custom";
  }
  axes.push_back([model_values](const Partial&) {
    std::vector<Apply> out;
    for (const auto& m : model_values)
      out.push_back([m](Partial& p) {
        p.spec.model = m;
        p.labels["model"] = m.name;
      });
    return out;
  });

  std::vector<topology::ClusterSpec> cluster_values;
  for (const auto& item : list_of(root.at("cluster"))) {
    cluster_values.push_back(resolve_cluster(item, base_dir));
    if (cluster_values.back().name.empty())
      cluster_values.back().name = item.is_scalar() ? fs::path(item.as<std::string>()).stem().string() : "custom";
  }
  axes.push_back([cluster_values](const Partial&) {
    std::vector<Apply> out;
    for (const auto& c : cluster_values)
      out.push_back([c](Partial& p) {
        p.spec.cluster = c;
        p.labels["cluster"] = c.name;
      });
    return out;
  });

  if (auto n = root.find("device_type")) {
    std::vector<topology::DeviceSpec> devs;
    for (const auto& item : list_of(*n)) devs.push_back(resolve_device(item));
    axes.push_back([devs](const Partial&) {
      std::vector<Apply> out;
      for (const auto& d : devs) out.push_back([d](Partial& p) { p.device_override = d; });
      return out;
    });
  }

  if (auto n = root.find("inter_node_bandwidth")) {
    std::vector<Bandwidth> bws;
    for (const auto& item : list_of(*n)) bws.push_back(item.as_bandwidth());
    axes.push_back([bws](const Partial&) {
      std::vector<Apply> out;
      for (auto bw : bws)
        out.push_back([bw](Partial& p) {
          p.spec.cluster.inter_node_bandwidth = bw;
          p.labels["inter_node_bandwidth"] = label_bandwidth(bw);
        });
      return out;
    });
  }
  if (auto n = root.find("inter_node_latency")) {
    std::vector<Time> lats;
    for (const auto& item : list_of(*n)) {
      lats.push_back(item.as_time());
      if (lats.back().seconds() > 1.0) item.fail("inter_node_latency above 1 s is not meaningful");
    }
    axes.push_back([lats](const Partial&) {
      std::vector<Apply> out;
      for (auto t : lats)
        out.push_back([t](Partial& p) {
          p.spec.cluster.inter_node_latency = t;
          p.labels["inter_node_latency"] = label_time(t);
        });
      return out;
    });
  }

  axes.push_back([networks](const Partial&) {
    std::vector<Apply> out;
    for (const auto& nm : networks)
      out.push_back([nm](Partial& p) {
        p.spec.sim.network_mode = nm.value;
        p.labels["network"] = nm.label;
      });
    return out;
  });

  std::vector<StrategyKind> strategies;
  for (const auto& item : list_of(root.at("strategy"))) {
    std::string s = item.as<std::string>();
    if (s == "all") {
      for (auto k : all_strategies()) strategies.push_back(k);
      continue;
    }
    auto k = parse_strategy(s);
    if (!k) {
      std::vector<std::string> known{"all"};
      for (auto kk : all_strategies()) known.push_back(to_string(kk));
      fail_unknown(item, "strategy", s, known);
    }
    strategies.push_back(*k);
  }
  axes.push_back([strategies](const Partial&) {
    std::vector<Apply> out;
    for (auto k : strategies)
      out.push_back([k](Partial& p) {
        p.spec.strategy = k;
        p.labels["strategy"] = to_string(k);
      });
    return out;
  });

  auto device_nodes = std::make_shared<std::vector<YamlNode>>(list_of(root.at("devices")));
  for (const auto& item : *device_nodes) bounded_int(item, kMaxDevices, "devices");  // validate early
  axes.push_back([device_nodes](const Partial&) {
    std::vector<Apply> out;
    for (const auto& item : *device_nodes) {
      const YamlNode* node = &item;
      int n = item.as_positive_int();
      out.push_back([n, node](Partial& p) {
        p.grid_devices = n;
        p.devices_node = node;
        p.labels["devices"] = std::to_string(n);
      });
    }
    return out;
  });

  auto int_choice = [](int limit, const char* what) {
    return [limit, what](const YamlNode& n) {
      int v = bounded_int(n, limit, what);
      return Choice<int>{v, std::to_string(v)};
    };
  };
  auto micro_batch = std::make_shared<PerStrategy<int>>(root, "micro_batch", Choice<int>{1, "1"},
                                                        int_choice(kMaxMicroBatch, "micro_batch"));
  auto accumulation = std::make_shared<PerStrategy<int>>(root, "accumulation", Choice<int>{1, "1"},
                                                         int_choice(kMaxAccumulation, "accumulation"));
  auto amp = std::make_shared<PerStrategy<std::optional<AmpLevel>>>(
      root, "amp", Choice<std::optional<AmpLevel>>{std::nullopt, ""}, [](const YamlNode& n) {
        std::string s = n.as<std::string>();
        auto a = parse_amp_level(s);
        if (!a) fail_unknown(n, "amp level", s, {"none", "o1", "o2"});
        return Choice<std::optional<AmpLevel>>{a, s};
      });
  auto half = std::make_shared<PerStrategy<DType>>(root, "half", Choice<DType>{DType::FP16, "fp16"},
                                                    [](const YamlNode& n) {
                                                      std::string s = n.as<std::string>();
                                                      auto d = parse_dtype(s);
                                                      if (!d || *d == DType::FP32)
                                                        fail_unknown(n, "half type", s, {"fp16", "bf16"});
                                                      return Choice<DType>{*d, s};
                                                    });
  axes.push_back([micro_batch](const Partial& p) {
    std::vector<Apply> out;
    for (const auto& c : micro_batch->values_for(p.spec.strategy))
      out.push_back([c](Partial& q) {
        q.spec.micro_batch = c.value;
        q.labels["micro_batch"] = c.label;
      });
    return out;
  });
  axes.push_back([accumulation](const Partial& p) {
    std::vector<Apply> out;
    for (const auto& c : accumulation->values_for(p.spec.strategy))
      out.push_back([c](Partial& q) {
        q.spec.options.accumulation = c.value;
        q.labels["accumulation"] = c.label;
      });
    return out;
  });
  axes.push_back([amp](const Partial& p) {
    std::vector<Apply> out;
    for (const auto& c : amp->values_for(p.spec.strategy))
      out.push_back([c](Partial& q) { q.spec.options.amp = c.value; });
    return out;
  });
  axes.push_back([half](const Partial& p) {
    std::vector<Apply> out;
    for (const auto& c : half->values_for(p.spec.strategy))
      out.push_back([c](Partial& q) { q.spec.options.half = c.value; });
    return out;
  });

  auto knobs = std::make_shared<std::vector<ParsedKnob>>(parse_options(root));
  for (size_t i = 0; i < knobs->size(); ++i) {
    axes.push_back([knobs, i](const Partial& p) {
      const ParsedKnob& k = (*knobs)[i];
      std::vector<Apply> out;
      if (!section_applies(k.knob->section, p.spec.strategy)) {
        out.push_back([key = k.label_key()](Partial& q) { q.labels[key] = "-"; });
        return out;
      }
      for (const auto& c : k.values)
        out.push_back([c, key = k.label_key()](Partial& q) {
          c.value(q.spec.options);
          q.labels[key] = c.label;
        });
      return out;
    });
  }

  // ---- expand ----
  std::vector<Partial> partials(1);
  partials[0].spec.scenario = sc.name;
  partials[0].spec.sim = sim;
  partials[0].spec.pricing = pricing;
  partials[0].spec.token_budget = token_budget;
  partials[0].spec.calibration = calibration_path;
  for (const auto& axis : axes) {
    std::vector<Partial> next;
    for (const auto& p : partials)
      for (const auto& apply : axis(p)) {
        next.push_back(p);
        apply(next.back());
        if (next.size() > kMaxPoints)
          root.fail(fmt::format("the scenario expands to more than {} points; split it or shorten its lists",
                                kMaxPoints));
      }
    partials = std::move(next);
  }

  // ---- finish each point: device type, device count checks, precision, profile ----
  for (auto& p : partials) {
    PointSpec& s = p.spec;
    if (p.device_override) s.cluster.device = *p.device_override;
    p.labels["device_type"] = s.cluster.device.name;

    const int limit = max_devices(s.cluster);
    if (p.grid_devices > limit && s.cluster.explicit_devices > 0)
      p.devices_node->fail(fmt::format("cluster '{}' (an explicit graph) has {} devices, asked for {}",
                                       s.cluster.name, limit, p.grid_devices));
    if (p.grid_devices > limit)
      p.devices_node->fail(fmt::format("cluster '{}' holds at most {} devices ({} nodes x {} per node), asked for {}",
                                       s.cluster.name, limit, *s.cluster.max_nodes, s.cluster.devices_per_node,
                                       p.grid_devices));
    s.devices = p.grid_devices;
    p.labels["note"] = "";
    if (s.strategy == StrategyKind::Single && p.grid_devices > 1) {
      s.devices = 1;  // the paper's baseline: one process on one device, whatever the grid count
      p.labels["note"] = "single runs on 1 device";
    }

    p.labels["precision"] = label_precision(precision_of(s.strategy, s.options));

    s.profile = default_profile(s.cluster.device);
    if (calibration_device) {
      try {
        apply_profile_document(*calibration_device, s.profile);
      } catch (const InputError& e) {
        throw e.with_context(fmt::format("while applying calibration '{}'", *calibration_path));
      }
    }
    if (profile_section) apply_profile_yaml(*profile_section, s.profile);
    if (jitter) s.profile.compute_jitter = *jitter;
  }

  // ---- labels: the always-shown coordinates plus those that vary, in a stable order ----
  std::vector<std::string> order{"model", "cluster", "device_type", "devices", "strategy", "micro_batch",
                                 "accumulation", "precision", "inter_node_bandwidth", "inter_node_latency",
                                 "network"};
  for (const auto& k : *knobs) order.push_back(k.label_key());
  order.push_back("note");
  const std::set<std::string> always{"model", "cluster", "devices", "strategy"};
  std::vector<std::string> shown;
  for (const auto& key : order) {
    std::set<std::string> values;
    for (const auto& p : partials)  // "-" marks a knob that does not apply to the point's strategy
      if (auto it = p.labels.find(key); it != p.labels.end() && it->second != "-") values.insert(it->second);
    if (always.count(key) || values.size() > 1) shown.push_back(key);
  }
  sc.points.reserve(partials.size());
  for (auto& p : partials) {
    for (const auto& key : shown) {
      auto it = p.labels.find(key);
      p.spec.labels.emplace_back(key, it == p.labels.end() ? "" : it->second);
    }
    sc.points.push_back(std::move(p.spec));
  }
  return sc;
}

Scenario load_scenario(const std::string& path) { return parse_scenario(load_yaml_file(path)); }

std::vector<std::string> builtin_scenario_names() {
  std::vector<std::string> out;
  for (const auto& [name, text] : embedded_scenarios()) out.emplace_back(name);
  return out;
}

std::string builtin_scenario_text(const std::string& name) {
  std::string stem = name;
  if (stem.ends_with(".yaml")) stem.resize(stem.size() - 5);
  for (const auto& [n, text] : embedded_scenarios())
    if (n == stem) return std::string(text);
  std::vector<std::string> known = builtin_scenario_names();
  std::string hint = closest_match(stem, known);
  throw InputError({}, "", hint.empty()
                               ? fmt::format("unknown builtin scenario '{}' (known: {})", name, join(known))
                               : fmt::format("unknown builtin scenario '{}'; did you mean '{}'? (known: {})", name,
                                             hint, join(known)));
}

Scenario load_builtin_scenario(const std::string& name) {
  std::string stem = name;
  if (stem.ends_with(".yaml")) stem.resize(stem.size() - 5);
  return parse_scenario(load_yaml_string(builtin_scenario_text(stem), "builtin:" + stem + ".yaml"));
}

}  // namespace dptwin::sim
