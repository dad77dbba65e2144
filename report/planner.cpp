// report/planner.cpp — the candidate space, constraints and explanations of `dptwin plan` (see planner.hpp).
#include "report/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "models/gpt2.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "topology/cluster.hpp"
#include "topology/device_spec.hpp"

namespace dptwin::report {
namespace {

constexpr double kDay = 86400;
constexpr double kGiB = 1073741824.0;

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

template <typename T>
std::string yaml_list(const std::vector<T>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + fmt::format("{}", v[i]);
  return o + "]";
}

bool is_amp(const std::string& s) { return s == "dps+amp" || s == "horovod+amp"; }

std::vector<std::string> split_list(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& item : in) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ',')) {
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

// One (cluster, device) pair of the search.
struct Target {
  std::string cluster;                    // as given (preset or path)
  topology::ClusterSpec spec;
  std::optional<std::string> device;      // device_type override
  topology::DeviceSpec device_spec;
};

std::vector<Target> targets_of(const PlanRequest& r) {
  std::vector<Target> out;
  auto add = [&](const std::string& cluster, const std::optional<std::string>& device) {
    Target t{cluster, topology::load_cluster(cluster), device, {}};
    t.device_spec = device ? *topology::find_device_spec(*device) : t.spec.device;
    out.push_back(std::move(t));
  };
  if (!r.clusters.empty()) {
    for (const auto& c : r.clusters) {
      if (r.device_types.empty()) add(c, std::nullopt);
      for (const auto& d : r.device_types) add(c, d);
    }
    return out;
  }
  for (const auto& d : r.device_types) {  // the first preset built around this device, else a PCIe server
    std::optional<std::string> native;
    for (const auto& name : topology::cluster_preset_names())
      if (topology::load_cluster_preset(name).device.name == d) {
        native = name;
        break;
      }
    if (native) add(*native, std::nullopt);
    else add(d == "cpu-core" ? "localhost-cpu" : "pcie-8gpu", d);
  }
  return out;
}

// Same configuration with one coordinate changed: (cluster, device, strategy, precision, mb, devices).
struct Key {
  std::string cluster, device, strategy, precision;
  int micro_batch, devices;
  auto operator<=>(const Key&) const = default;
};

Key key_of(const PlanResult& pr, size_t i) {
  const auto& p = pr.points[i];
  return Key{pr.cluster_of[i], p.device_type, param(p.result, "strategy"), p.precision, p.micro_batch,
             p.result.devices};
}

std::string config_line(const PlanResult& pr, size_t i) {
  const auto& p = pr.points[i];
  return fmt::format("{} x {} ({}), {}, {}, micro-batch {}", p.result.devices, p.device_type, pr.cluster_of[i],
                     param(p.result, "strategy"), p.precision, p.micro_batch);
}

std::string usd(const std::optional<double>& v) { return v ? format_usd(*v) : "cost unknown"; }

// What stops point i from going further: neighbours in the space and its own figures.
std::string limits_of(const PlanRequest& req, const PlanResult& pr, size_t i,
                      const std::map<Key, size_t>& index, bool fastest) {
  const auto& p = pr.points[i];
  const auto& r = p.result;
  std::vector<std::string> s;
  Key k = key_of(pr, i);
  if (fastest) {
    Key more = k;
    more.devices *= 2;
    auto it = index.find(more);
    if (it == index.end()) {
      s.push_back(fmt::format("{} devices lie outside the search space (--max-devices {} or the cluster's size)",
                              more.devices, req.max_devices));
    } else {
      const auto& q = pr.points[it->second];
      const std::string& v = pr.verdict[it->second];
      if (v == "exceeds budget")
        s.push_back(fmt::format("doubling to {} devices would cost {}, over the {} budget", more.devices,
                                usd(q.result.cost_to_train), format_usd(*req.budget_usd)));
      else if (!v.empty())
        s.push_back(fmt::format("doubling to {} devices is excluded ({})", more.devices, v));
      else if (q.result.tokens_per_s && r.tokens_per_s && *q.result.tokens_per_s <= *r.tokens_per_s)
        s.push_back(fmt::format("doubling to {} devices does not raise throughput (communication grows)",
                                more.devices));
    }
  } else {
    Key fewer = k;
    fewer.devices /= 2;
    auto it = fewer.devices >= 1 ? index.find(fewer) : index.end();
    if (it != index.end()) {
      const auto& q = pr.points[it->second];
      const std::string& v = pr.verdict[it->second];
      if (v.starts_with("exceeds") && v.ends_with("days") && q.result.time_to_train_s)
        s.push_back(fmt::format("halving to {} devices would take {}, over the {:g}-day limit", fewer.devices,
                                format_duration(*q.result.time_to_train_s), *req.max_days));
      else if (v.empty() && q.result.cost_to_train && r.cost_to_train)
        s.push_back(fmt::format("halving to {} devices would cost {} (not cheaper: a single node scales "
                                "at the same efficiency or less)", fewer.devices, format_usd(*q.result.cost_to_train)));
      else if (!v.empty())
        s.push_back(fmt::format("halving to {} devices is excluded ({})", fewer.devices, v));
    }
  }
  Key bigger = k;
  bigger.micro_batch *= 2;
  if (auto it = index.find(bigger); it != index.end() && pr.verdict[it->second] == "out of memory") {
    const auto& m = pr.points[it->second].result.memory;
    s.push_back(fmt::format("micro-batch {} does not fit ({:.1f} GiB needed of {:.1f} GiB): memory caps the "
                            "per-device batch",
                            bigger.micro_batch, m.peak / kGiB, m.capacity / kGiB));
  }
  const double exposed = r.step_time_s ? r.breakdown.exposed_comm_s / *r.step_time_s : 0;
  const double comm = r.breakdown.exposed_comm_s + r.breakdown.hidden_comm_s;
  s.push_back(fmt::format("memory {:.1f} of {:.1f} GiB per device; exposed communication {:.1f}% of the step{}",
                          r.memory.peak / kGiB, r.memory.capacity / kGiB, exposed * 100,
                          comm > 0 ? fmt::format(" ({:.0f}% of communication hidden behind compute)",
                                                 r.breakdown.hidden_comm_s / comm * 100)
                                   : ""));
  std::string out = "Limits: ";
  for (size_t j = 0; j < s.size(); ++j) out += (j ? "; " : "") + s[j];
  return out + ".";
}

PlanRequest parse_plan_node(const YamlNode& root);

}  // namespace

PlanRequest normalized(PlanRequest r) {
  if (r.model.empty()) throw InputError({}, "--model", "a model is required (see `dptwin list models`)");
  if (!models::find_gpt2_preset(r.model)) {
    std::vector<std::string> known;
    for (const auto& m : models::gpt2_presets()) known.push_back(m.name);
    std::string msg = fmt::format("unknown model '{}'", r.model);
    if (auto c = closest_match(r.model, known); !c.empty()) msg += fmt::format("; did you mean '{}'?", c);
    throw InputError({}, "--model", msg);
  }
  if (!(r.tokens > 0)) throw InputError({}, "--tokens", "the number of tokens to train must be > 0 (e.g. 10e9)");
  if (r.max_days && !(*r.max_days > 0)) throw InputError({}, "--days", "must be > 0");
  if (r.budget_usd && !(*r.budget_usd > 0)) throw InputError({}, "--budget", "must be > 0 (USD)");
  if (r.price_per_device_hour && !(*r.price_per_device_hour >= 0)) throw InputError({}, "--price", "must be >= 0");
  if (r.min_devices < 1) throw InputError({}, "--min-devices", "must be >= 1");
  if (r.max_devices < r.min_devices) throw InputError({}, "--max-devices", "must be >= --min-devices");
  if (r.top < 1) throw InputError({}, "--top", "must be >= 1");
  r.device_types = split_list(r.device_types);
  r.clusters = split_list(r.clusters);
  r.strategies = split_list(r.strategies);
  r.precisions = split_list(r.precisions);
  for (const auto& d : r.device_types)
    if (!topology::find_device_spec(d)) {
      std::vector<std::string> known;
      for (const auto& s : topology::device_catalog()) known.push_back(s.name);
      throw InputError({}, "--device-types",
                       fmt::format("unknown device type '{}' (known: {})", d, fmt::join(known, ", ")));
    }
  for (const auto& c : r.clusters) {
    const bool path = c.find('/') != std::string::npos || c.ends_with(".yaml");
    if (!path) {
      auto names = topology::cluster_preset_names();
      if (std::find(names.begin(), names.end(), c) == names.end())
        throw InputError({}, "--clusters",
                         fmt::format("unknown cluster preset '{}' (known: {})", c, fmt::join(names, ", ")));
    }
  }
  if (r.clusters.empty() && r.device_types.empty()) r.clusters = {"dgx-a100", "dgx-h100", "hgx-h200", "dgx1-v100"};
  if (r.strategies.empty()) r.strategies = {"dps", "horovod", "dps+amp", "horovod+amp"};
  for (const auto& s : r.strategies)
    if (!sim::parse_strategy(s))
      throw InputError({}, "--strategies",
                       fmt::format("unknown strategy '{}' (single, sps, dps, horovod, dps+amp, horovod+amp)", s));
  if (r.precisions.empty()) r.precisions = {"fp32", "fp16", "bf16"};
  for (const auto& p : r.precisions)
    if (p != "fp32" && p != "fp16" && p != "bf16")
      throw InputError({}, "--precision", fmt::format("unknown precision '{}' (fp32, fp16, bf16)", p));
  if (r.micro_batches.empty()) r.micro_batches = {1, 2, 4, 8, 16};
  for (int m : r.micro_batches)
    if (m < 1) throw InputError({}, "--micro-batch", "micro-batches must be >= 1");
  return r;
}

namespace {
PlanRequest parse_plan_node(const YamlNode& root) {
  root.check_keys({"model", "tokens", "days", "budget", "device_types", "clusters", "min_devices", "max_devices",
                   "strategies", "precision", "micro_batch", "price_per_device_hour", "top"});
  PlanRequest r;
  r.model = root.require<std::string>("model");
  r.tokens = root.at("tokens").as_positive();
  if (auto n = root.find("days")) r.max_days = n->as_positive();
  if (auto n = root.find("budget")) r.budget_usd = n->as_positive();
  auto strings = [&](const char* key) {
    std::vector<std::string> v;
    if (auto n = root.find(key))
      for (const auto& item : n->one_or_many()) v.push_back(item.as<std::string>());
    return v;
  };
  r.device_types = strings("device_types");
  r.clusters = strings("clusters");
  r.strategies = strings("strategies");
  r.precisions = strings("precision");
  if (auto n = root.find("micro_batch"))
    for (const auto& item : n->one_or_many()) r.micro_batches.push_back(item.as_positive_int());
  if (auto n = root.find("min_devices")) r.min_devices = n->as_positive_int();
  if (auto n = root.find("max_devices")) r.max_devices = n->as_positive_int();
  if (auto n = root.find("price_per_device_hour")) r.price_per_device_hour = n->as_non_negative();
  if (auto n = root.find("top")) r.top = n->as_positive_int();
  return r;
}
}  // namespace

PlanRequest parse_plan(const YamlNode& root) { return parse_plan_node(root); }

PlanRequest load_plan_file(const std::string& path) { return parse_plan_node(load_yaml_file(path)); }

std::vector<sim::PointSpec> plan_candidates(const PlanRequest& req) {
  std::vector<sim::PointSpec> out;
  for (const auto& t : targets_of(req)) {
    const int cap = t.spec.max_devices() > 0 ? std::min(req.max_devices, t.spec.max_devices()) : req.max_devices;
    std::vector<int> counts;
    for (int n = 1; n <= cap; n *= 2)
      if (n >= req.min_devices) counts.push_back(n);
    if (counts.empty()) continue;
    const bool has_bf16 = t.device_spec.bf16_peak.value() > 0;
    std::vector<std::string> halves;
    for (const auto& p : req.precisions)
      if (p == "fp16" || (p == "bf16" && has_bf16)) halves.push_back(p);
    const bool fp32 = std::find(req.precisions.begin(), req.precisions.end(), "fp32") != req.precisions.end();
    std::vector<std::string> multi;
    bool single = false;
    for (const auto& s : req.strategies) {
      if (is_amp(s) ? halves.empty() : !fp32) continue;
      if (s == "single") single = true;
      else multi.push_back(s);
    }
    const std::string cluster =
        (t.cluster.find('/') != std::string::npos || t.cluster.ends_with(".yaml"))
            ? std::filesystem::absolute(t.cluster).string()
            : t.cluster;
    auto doc = [&](const std::vector<std::string>& strategies, const std::vector<int>& devices) {
      std::string y = fmt::format("name: plan\nmodel: {}\ncluster: {}\n", quote(req.model), quote(cluster));
      if (t.device) y += fmt::format("device_type: {}\n", quote(*t.device));
      std::vector<std::string> qs;
      for (const auto& s : strategies) qs.push_back(quote(s));
      y += fmt::format("devices: {}\nstrategy: {}\nmicro_batch: {}\n", yaml_list(devices), yaml_list(qs),
                       yaml_list(req.micro_batches));
      if (!halves.empty()) y += fmt::format("half: {{default: fp16, dps+amp: {0}, horovod+amp: {0}}}\n", yaml_list(halves));
      y += fmt::format("token_budget: {}\n", req.tokens);
      if (req.price_per_device_hour) y += fmt::format("pricing: {{per_device_hour: {}}}\n", *req.price_per_device_hour);
      sim::Scenario sc = sim::parse_scenario(load_yaml_string(y, "plan candidates"));
      for (auto& p : sc.points) out.push_back(std::move(p));
    };
    if (!multi.empty()) doc(multi, counts);
    if (single && counts.front() == 1) doc({"single"}, {1});
  }
  return out;
}

PlanResult evaluate_plan(const PlanRequest& req, const std::vector<sim::PointSpec>& specs,
                         std::vector<sim::PointResult> results) {
  PlanResult pr;
  pr.points = make_report_points(specs, std::move(results), false);
  for (const auto& s : specs) pr.cluster_of.push_back(s.cluster.name);
  std::map<Key, size_t> index;
  for (size_t i = 0; i < pr.points.size(); ++i) {
    const auto& r = pr.points[i].result;
    std::string v;
    if (r.status == "oom" || r.memory.oom) v = "out of memory", ++pr.oom;
    else if (r.status != "ok" || !r.time_to_train_s) v = "infeasible", ++pr.infeasible;
    else if (req.max_days && *r.time_to_train_s > *req.max_days * kDay)
      v = fmt::format("exceeds {:g} days", *req.max_days), ++pr.too_slow;
    else if (req.budget_usd && !r.cost_to_train) v = "no price", ++pr.no_price;
    else if (req.budget_usd && *r.cost_to_train > *req.budget_usd) v = "exceeds budget", ++pr.over_budget;
    pr.verdict.push_back(v);
    if (v.empty()) pr.feasible.push_back(i);
    index.emplace(key_of(pr, i), i);
  }
  auto cost = [&](size_t i) { return pr.points[i].result.cost_to_train.value_or(INFINITY); };
  auto time = [&](size_t i) { return *pr.points[i].result.time_to_train_s; };
  std::stable_sort(pr.feasible.begin(), pr.feasible.end(), [&](size_t a, size_t b) {
    if (time(a) != time(b)) return time(a) < time(b);
    return cost(a) < cost(b);
  });
  if (!pr.feasible.empty()) {
    pr.fastest = pr.feasible.front();
    std::vector<size_t> priced;
    for (size_t i : pr.feasible)
      if (pr.points[i].result.cost_to_train) priced.push_back(i);
    if (!priced.empty())
      pr.cheapest = *std::min_element(priced.begin(), priced.end(), [&](size_t a, size_t b) {
        if (cost(a) != cost(b)) return cost(a) < cost(b);
        return time(a) < time(b);
      });
  }
  const std::string tokens = format_count(req.tokens) + " tokens";
  if (pr.fastest) {
    const size_t i = *pr.fastest;
    const auto& r = pr.points[i].result;
    pr.fastest_why = fmt::format(
        "Fastest of {} feasible configurations: trains {} in {} at {} (step {:.1f} ms, scaling efficiency {:.1f}%), "
        "for {}.",
        pr.feasible.size(), tokens, format_duration(time(i)), format_rate(*r.tokens_per_s), *r.step_time_s * 1e3,
        r.scaling_efficiency.value_or(0) * 100, usd(r.cost_to_train));
    // The first runner-up that is measurably slower (fp16 and bf16 often tie exactly).
    for (size_t k = 1; k < pr.feasible.size(); ++k) {
      const size_t j = pr.feasible[k];
      const double longer = (time(j) / time(i) - 1) * 100;
      if (longer < 0.05) {
        if (k == 1) pr.fastest_why += fmt::format(" It ties with {}.", config_line(pr, j));
        continue;
      }
      pr.fastest_why += fmt::format(" The next fastest ({}) takes {:.1f}% longer.", config_line(pr, j), longer);
      break;
    }
    pr.fastest_why += " " + limits_of(req, pr, i, index, true);
  }
  if (pr.cheapest) {
    const size_t i = *pr.cheapest;
    const auto& p = pr.points[i];
    pr.cheapest_why = fmt::format(
        "Cheapest feasible: {} for {} ({} per million tokens at {} per device-hour), done in {}.",
        usd(p.result.cost_to_train), tokens, usd(p.result.cost_per_million_tokens),
        format_usd(p.price_per_device_hour), format_duration(time(i)));
    if (pr.fastest && *pr.fastest != i)
      pr.cheapest_why += fmt::format(" It saves {:.1f}% against the fastest but takes {:.2f}x as long.",
                                     (1 - cost(i) / cost(*pr.fastest)) * 100, time(i) / time(*pr.fastest));
    else if (pr.fastest)
      pr.cheapest_why += " It is also the fastest.";
    pr.cheapest_why += " " + limits_of(req, pr, i, index, false);
  } else if (pr.fastest) {
    pr.cheapest_why = "No price is known for the feasible configurations; pass --price USD per device-hour.";
  }
  if (pr.feasible.empty()) {
    std::string m = fmt::format("No feasible configuration among {} candidates: {} out of memory, {} infeasible",
                                pr.points.size(), pr.oom, pr.infeasible);
    if (req.max_days) m += fmt::format(", {} over {:g} days", pr.too_slow, *req.max_days);
    if (req.budget_usd) m += fmt::format(", {} over the {} budget", pr.over_budget, format_usd(*req.budget_usd));
    if (pr.no_price) m += fmt::format(", {} without a price", pr.no_price);
    m += ".";
    std::vector<size_t> runs;
    for (size_t i = 0; i < pr.points.size(); ++i)
      if (pr.verdict[i] != "out of memory" && pr.verdict[i] != "infeasible") runs.push_back(i);
    if (runs.empty()) {
      m += fmt::format(" {} does not fit in memory (or cannot run) on any candidate: try devices with more memory, "
                       "mixed precision (--precision bf16,fp16) or smaller micro-batches.",
                       req.model);
    } else {
      // Nearest misses: the cheapest run within the time limit, the fastest run within the budget.
      std::optional<size_t> cheap, fast;
      for (size_t i : runs) {
        const auto& r = pr.points[i].result;
        const bool in_time = !req.max_days || *r.time_to_train_s <= *req.max_days * kDay;
        const bool in_budget = !req.budget_usd || (r.cost_to_train && *r.cost_to_train <= *req.budget_usd);
        if (in_time && r.cost_to_train && (!cheap || cost(i) < cost(*cheap))) cheap = i;
        if (in_budget && (!fast || time(i) < time(*fast))) fast = i;
      }
      if (req.budget_usd && cheap)
        m += fmt::format(" {} the cheapest is {}: {} — the budget would have to be at least that.",
                         req.max_days ? "Within the time limit" : "Of those that run,", config_line(pr, *cheap),
                         usd(pr.points[*cheap].result.cost_to_train));
      if (req.max_days && fast)
        m += fmt::format(" Within the budget the fastest is {}: {} — the time limit would have to be at least that.",
                         config_line(pr, *fast), format_duration(time(*fast)));
      if (!cheap && !fast)
        m += " No candidate meets either limit on its own: raise both, or allow more devices (--max-devices).";
    }
    pr.no_plan = m;
  }
  return pr;
}

PlanResult run_plan(const PlanRequest& request, int threads, const std::function<void(size_t, size_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const PlanRequest req = normalized(request);
  auto specs = plan_candidates(req);
  if (specs.empty())
    throw InputError({}, "--max-devices", "the candidate space is empty (check device counts, strategies and precisions)");
  auto results = sim::simulate_all(specs, threads, progress);
  PlanResult pr = evaluate_plan(req, specs, std::move(results));
  pr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return pr;
}

void write_plan(std::ostream& out, const PlanRequest& req, const PlanResult& pr) {
  std::string limits;
  if (req.max_days) limits += fmt::format(" within {:g} days", *req.max_days);
  if (req.budget_usd) limits += fmt::format("{} {}", req.max_days ? " and" : " within", format_usd(*req.budget_usd));
  out << fmt::format("plan: train {} on {} tokens{}\n", req.model, format_count(req.tokens), limits);
  out << fmt::format("searched {} configurations in {:.1f} s: {} out of memory, {} infeasible", pr.points.size(),
                     pr.seconds, pr.oom, pr.infeasible);
  if (req.max_days) out << fmt::format(", {} too slow", pr.too_slow);
  if (req.budget_usd) out << fmt::format(", {} over budget", pr.over_budget);
  out << fmt::format("; {} feasible\n\n", pr.feasible.size());
  if (pr.feasible.empty()) {
    out << pr.no_plan << "\n";
    return;
  }
  auto block = [&](const char* title, size_t i, const std::string& why) {
    const auto& r = pr.points[i].result;
    out << fmt::format("{:<9} {}\n", title, config_line(pr, i));
    out << fmt::format("          time to train {}, cost {}, {}, step {:.1f} ms, MFU {:.1f}%\n",
                       format_duration(*r.time_to_train_s), usd(r.cost_to_train), format_rate(*r.tokens_per_s),
                       *r.step_time_s * 1e3, r.mfu.value_or(0) * 100);
    // wrap the explanation at ~100 columns
    std::string line = "          ";
    std::stringstream words(why);
    std::string w;
    while (words >> w) {
      if (line.size() + w.size() > 110) out << line << "\n", line = "          ";
      line += w + " ";
    }
    out << line << "\n\n";
  };
  block("FASTEST", *pr.fastest, pr.fastest_why);
  if (pr.cheapest) block("CHEAPEST", *pr.cheapest, pr.cheapest_why);
  else out << "CHEAPEST  -\n          " << pr.cheapest_why << "\n\n";

  out << fmt::format("top {} feasible configurations by time to train:\n", std::min<size_t>(req.top, pr.feasible.size()));
  out << fmt::format("{:>3}  {:<10} {:<16} {:>7}  {:<12} {:<9} {:>3} {:>9} {:>14} {:>8} {:>12} {:>7} {:>11} {:>11}\n",
                     "#", "cluster", "device", "devices", "strategy", "precision", "mb", "step ms", "tokens/s",
                     "scaling", "memory GiB", "comm %", "time", "cost");
  for (size_t k = 0; k < pr.feasible.size() && k < static_cast<size_t>(req.top); ++k) {
    const size_t i = pr.feasible[k];
    const auto& p = pr.points[i];
    const auto& r = p.result;
    out << fmt::format(
        "{:>3}  {:<10} {:<16} {:>7}  {:<12} {:<9} {:>3} {:>9.1f} {:>14} {:>7.1f}% {:>5.1f}/{:<6.1f} {:>6.1f}% {:>11} "
        "{:>11}\n",
        k + 1, pr.cluster_of[i], p.device_type, r.devices, param(r, "strategy"), p.precision, p.micro_batch,
        *r.step_time_s * 1e3, format_rate(*r.tokens_per_s).substr(0, format_rate(*r.tokens_per_s).find(' ')),
        r.scaling_efficiency.value_or(0) * 100, r.memory.peak / kGiB, r.memory.capacity / kGiB,
        r.breakdown.exposed_comm_s / *r.step_time_s * 100, format_duration(*r.time_to_train_s),
        usd(r.cost_to_train));
  }
}

}  // namespace dptwin::report
