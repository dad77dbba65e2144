#include "sim/device_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

double EfficiencyCurve::from_table(double work) const {
  if (work <= table.front().first) return table.front().second;
  if (work >= table.back().first) return table.back().second;
  for (size_t i = 1; i < table.size(); ++i)
    if (work <= table[i].first) {
      const auto [w0, e0] = table[i - 1];
      const auto [w1, e1] = table[i];
      const double t = std::log(work / w0) / std::log(w1 / w0);
      return e0 + t * (e1 - e0);
    }
  return table.back().second;
}

void EfficiencyCurve::slow_down(double f) {
  max /= f;
  for (auto& [w, e] : table) e /= f;
}

double dispatch_share(CallKind kind, double seconds) {
  if (kind == CallKind::HostCopy) return 0.0;
  if (kind == CallKind::GemmHalf || kind == CallKind::MemoryHalf) {
    constexpr double kAllDispatch = 30e-6, kNoDispatch = 1e-3;
    if (!(seconds > kAllDispatch)) return 1.0;
    if (seconds >= kNoDispatch) return 0.0;
    return std::log(kNoDispatch / seconds) / std::log(kNoDispatch / kAllDispatch);
  }
  // At log10(seconds) = -5.0, -4.5, ..., -1.0; held beyond the ends.
  static constexpr std::array<double, 9> kGemm{1.0, 0.50, 0.45, 0.28, 0.20, 0.17, 0.12, 0.07, 0.0};
  static constexpr std::array<double, 9> kMemory{1.0, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75};
  const auto& xs = kind == CallKind::GemmFp32 ? kGemm : kMemory;
  const double x = seconds > 0 ? (std::log10(seconds) + 5.0) / 0.5 : 0.0;
  if (!(x > 0)) return xs.front();
  if (x >= static_cast<double>(xs.size() - 1)) return xs.back();
  const auto i = static_cast<size_t>(x);
  return xs[i] + (xs[i + 1] - xs[i]) * (x - static_cast<double>(i));
}

void EfficiencyCurve::slow_down_blended(double f, double fd, double peak, Time launch, CallKind kind) {
  if (table.empty() || !(peak > 0)) {
    slow_down(f);
    return;
  }
  max = 0;
  for (auto& [w, e] : table) {
    const double s = e > 0 ? dispatch_share(kind, launch.seconds() + w / (e * peak)) : 0.0;
    e /= std::pow(f, 1.0 - s) * std::pow(fd, s);
    max = std::max(max, e);
  }
}

static void apply_curve(const YamlNode& n, EfficiencyCurve& c) {
  n.check_keys({"max", "half_work", "table"});
  if (auto t = n.find("table")) {
    if (n.has("max") || n.has("half_work")) t->fail("give either `table` or `max`/`half_work`");
    c.table.clear();
    c.max = 0;
    for (const auto& row : t->items()) {
      const auto xs = row.items();
      if (xs.size() != 2) row.fail("a table row is [work, efficiency]");
      const double w = xs[0].as_positive(), e = xs[1].as_positive();
      if (e > 1.0 || e < 0.001) xs[1].fail(fmt::format("efficiency must be in [0.001, 1], got {}", e));
      if (!c.table.empty() && w <= c.table.back().first) xs[0].fail("table rows must have ascending work");
      c.table.emplace_back(w, e);
      c.max = std::max(c.max, e);
    }
    if (c.table.empty()) t->fail("an empty efficiency table");
    return;
  }
  if (auto m = n.find("max")) {
    c.max = m->as_positive();
    if (c.max > 1.0) m->fail(fmt::format("efficiency must be in (0, 1], got {}", c.max));
    if (c.max < 0.01) m->fail(fmt::format("efficiency {} is below the supported minimum of 0.01", c.max));
  }
  if (auto h = n.find("half_work")) {
    c.half_work = h->as_non_negative();
    if (c.half_work > 1e15) h->fail("half_work above 1e15 (FLOPs or bytes) is not meaningful");
  }
}

// A figure measured by rank count: [{ranks: r, <value_key>: x}, ...], ranks ascending, at least one entry;
// `value` reads and checks one figure.
template <typename Check>
static std::vector<std::pair<int, double>> by_ranks(const YamlNode& n, const char* key, const char* value_key, Check value) {
  std::vector<std::pair<int, double>> out;
  for (const auto& e : n.items()) {
    e.check_keys({"ranks", value_key});
    const int r = e.at("ranks").as_positive_int();
    if (!out.empty() && r <= out.back().first) e.at("ranks").fail(fmt::format("{} entries must have ascending `ranks`", key));
    out.emplace_back(r, value(e.at(value_key)));
  }
  if (out.empty()) n.fail(fmt::format("{}: an empty list", key));
  return out;
}

void apply_profile_yaml(const YamlNode& node, DeviceProfile& p) {
  node.check_keys({"matmul", "batched_matmul", "memory", "memory_half", "matmul_half", "batched_matmul_half", "matmul_o1", "matmul_linear",
                   "speed_reference", "speed_states", "activation",
                   "activation_backward", "activation_half", "activation_half_backward", "launch_overhead", "step_overhead", "overlap_slowdown",
                   "background_loop_slowdown", "comm_stall", "comm_stall_one", "optimizer_bytes_per_param",
                   "compute_jitter", "rank_sync", "framework_reserve", "optimizer_kernels_per_tensor", "host_memcpy", "fp32_peak",
                   "fp16_peak", "bf16_peak", "memory_bandwidth", "host_sharing", "ranks_share_machine"});
  auto rate = [](const YamlNode& n) {
    const double v = n.as_flop_rate().value();
    if (!(v > 0) || v > 1e18) n.fail(fmt::format("a FLOP rate must be in (0, 1e18] FLOP/s, got {}", v));
    return FlopRate(v);
  };
  if (auto n = node.find("fp32_peak")) p.spec.fp32_peak = rate(*n);
  if (auto n = node.find("fp16_peak")) p.spec.fp16_peak = rate(*n);
  if (auto n = node.find("bf16_peak")) p.spec.bf16_peak = rate(*n);
  if (auto n = node.find("memory_bandwidth")) {
    p.spec.memory_bandwidth = n->as_bandwidth();
    if (!(p.spec.memory_bandwidth.value() > 0)) n->fail("memory_bandwidth must be > 0");
  }
  if (auto n = node.find("host_sharing")) {  // [{ranks: 4, factor: 2.0}, ...]
    p.host_sharing = by_ranks(*n, "host_sharing", "factor", [](const YamlNode& v) {
      const double f = v.as_positive();
      if (f > 1000) v.fail("a sharing factor above 1000 is not meaningful");
      return f;
    });
  }
  if (auto n = node.find("ranks_share_machine")) p.ranks_share_machine = n->as<bool>();
  if (auto n = node.find("speed_reference")) {
    n->check_keys({"matmul", "matmul_bf16", "elementwise", "elementwise_form", "dispatch"});
    auto probe_time = [&](const char* k) {
      const YamlNode& v = n->at(k);
      const double t = v.as_time().seconds();
      if (!(t > 0) || t > 10) v.fail("a speed-probe time must be in (0, 10] s");
      return t;
    };
    p.speed_reference = {probe_time("matmul"), probe_time("elementwise"), probe_time("dispatch"),
                         n->has("matmul_bf16") ? probe_time("matmul_bf16") : 0.0};
    if (auto f = n->find("elementwise_form")) {
      const std::string form = f->as<std::string>();
      if (form != "streaming" && form != "cached") f->fail(fmt::format("unknown form '{}' (streaming, cached)", form));
      p.speed_reference.elementwise_form = form;
    }
  }
  if (auto n = node.find("speed_states")) {  // {cores: 2, matmul: [ratios...], matmul_bf16: [...], ...}
    n->check_keys({"cores", "matmul", "matmul_bf16", "elementwise", "dispatch", "rank_skew"});
    SpeedStates s;
    if (auto c = n->find("cores")) s.cores = c->as_positive_int();
    if (auto k = n->find("rank_skew")) {  // [{ranks: 2, fraction: 0.012}, ...]
      s.rank_skew = by_ranks(*k, "rank_skew", "fraction", [](const YamlNode& v) {
        const double f = v.as_non_negative();
        if (f > 1) v.fail("a skew fraction must be in [0, 1]");
        return f;
      });
      if (s.rank_skew.front().first < 2) k->fail("rank_skew is between ranks: `ranks` 2 or more");
    }
    for (const char* key : SpeedStates::kClasses) {
      std::vector<double>* list = s.of(key);
      const auto v = n->find(key);
      if (!v) continue;
      for (const auto& x : v->items()) {
        const double r = x.as_positive();
        if (r > 20) x.fail("a speed-state ratio above 20 is not meaningful");
        list->push_back(r);
      }
      if (list->empty() || list->size() > 1000) v->fail("speed_states lists hold 1..1000 ratios");
      std::sort(list->begin(), list->end());
    }
    p.speed_states = s;
  }
  if (auto n = node.find("matmul")) apply_curve(*n, p.matmul);
  if (auto n = node.find("batched_matmul")) apply_curve(*n, p.batched_matmul);
  if (auto n = node.find("memory")) apply_curve(*n, p.memory);
  if (auto n = node.find("memory_half")) {
    if (!n->has("table")) n->fail("memory_half is a measured table: {table: [[bytes, efficiency], ...]}");
    apply_curve(*n, p.memory_half);
  }
  for (auto [key, curve] : {std::pair{"matmul_half", &p.matmul_half}, std::pair{"batched_matmul_half", &p.batched_matmul_half},
                            std::pair{"matmul_o1", &p.matmul_o1}, std::pair{"matmul_linear", &p.matmul_linear},
                            std::pair{"activation", &p.activation}, std::pair{"activation_backward", &p.activation_backward},
                            std::pair{"activation_half", &p.activation_half},
                            std::pair{"activation_half_backward", &p.activation_half_backward}})
    if (auto n = node.find(key)) {
      if (!n->has("table")) n->fail(fmt::format("{} is a measured table: {{table: [[flops, efficiency], ...]}}", key));
      apply_curve(*n, *curve);
    }
  if (auto n = node.find("launch_overhead")) {
    p.launch_overhead = n->as_time();
    if (p.launch_overhead.seconds() > 1.0) n->fail("launch_overhead above 1 s per kernel is not meaningful");
  }
  if (auto n = node.find("step_overhead")) {
    p.step_overhead = n->as_time();
    if (p.step_overhead.seconds() > 3600) n->fail("step_overhead above 1 h is not meaningful");
  }
  if (auto n = node.find("overlap_slowdown")) {
    p.overlap_slowdown = n->as_non_negative();
    if (p.overlap_slowdown > 10) n->fail("overlap_slowdown above 10 (an 11x slowdown) is not meaningful");
  }
  if (auto n = node.find("background_loop_slowdown")) {
    auto slowdown = [](const YamlNode& v) {
      const double x = v.as_non_negative();
      if (x > 10) v.fail("background_loop_slowdown above 10 (an 11x slowdown) is not meaningful");
      return x;
    };
    p.background_loop_by_ranks.clear();
    if (n->is_sequence()) {  // by ranks on the machine: [{ranks: 2, slowdown: 0.4}, ...]
      p.background_loop_by_ranks = by_ranks(*n, "background_loop_slowdown", "slowdown", slowdown);
      p.background_loop_slowdown = p.background_loop_by_ranks.front().second;
    } else {
      p.background_loop_slowdown = slowdown(*n);
    }
  }
  for (auto [key, list] : {std::pair{"comm_stall", &p.comm_stall_by_ranks}, std::pair{"comm_stall_one", &p.comm_stall_one_by_ranks}})
    if (auto n = node.find(key))  // [{ranks: 2, stall: 0.9}, ...]
      *list = by_ranks(*n, key, "stall", [key = key](const YamlNode& v) {
        const double x = v.as_non_negative();
        if (x > 1) v.fail(fmt::format("{} is a share: at most 1", key));
        return x;
      });
  if (auto n = node.find("compute_jitter")) {
    p.compute_jitter = n->as_non_negative();
    if (p.compute_jitter > 0.5) n->fail("compute_jitter above 0.5 is not meaningful");
  }
  if (auto n = node.find("rank_sync")) {  // [{ranks: 2, lag: 5 ms, exponent: 0.5, latency: 1.2 ms}, ...]
    p.sync_by_ranks.clear();
    for (const auto& e : n->items()) {
      e.check_keys({"ranks", "lag", "exponent", "latency"});
      DeviceProfile::SyncCost c;
      c.ranks = e.at("ranks").as_positive_int();
      if (!p.sync_by_ranks.empty() && c.ranks <= p.sync_by_ranks.back().ranks)
        e.at("ranks").fail("rank_sync entries must have ascending `ranks`");
      c.lag = e.at("lag").as_time();
      if (c.lag.seconds() > 1.0) e.at("lag").fail("a lag above 1 s after 100 ms of compute is not meaningful");
      if (auto x = e.find("exponent")) {
        c.exponent = x->as_non_negative();
        if (c.exponent > 1) x->fail("exponent above 1 (a lag growing faster than the compute) is not meaningful");
      }
      c.latency = e.at("latency").as_time();
      if (c.latency.seconds() > 1.0) e.at("latency").fail("a synchronisation latency above 1 s is not meaningful");
      p.sync_by_ranks.push_back(c);
    }
    if (p.sync_by_ranks.empty()) n->fail("rank_sync: an empty list");
  }
  if (auto n = node.find("framework_reserve")) p.framework_reserve = n->as_bytes();
  if (auto n = node.find("optimizer_kernels_per_tensor")) {
    p.optimizer_kernels_per_tensor = n->as_positive_int();
    if (p.optimizer_kernels_per_tensor > 1000) n->fail("optimizer_kernels_per_tensor above 1000 is not meaningful");
  }
  if (auto n = node.find("optimizer_bytes_per_param")) {
    p.optimizer_bytes_per_param = n->as_positive();
    if (p.optimizer_bytes_per_param > 10000) n->fail("optimizer_bytes_per_param above 10000 is not meaningful");
  }
  if (auto n = node.find("host_memcpy")) p.host_memcpy = n->as_bandwidth();
}

}  // namespace dptwin::sim

namespace dptwin::sim {

// Linear interpolation in a (ranks, value) table, held at the ends.
static double interpolate_by_ranks(const std::vector<std::pair<int, double>>& t, int ranks) {
  if (ranks <= t.front().first) return t.front().second;
  for (size_t i = 1; i < t.size(); ++i)
    if (ranks <= t[i].first) {
      const double x = static_cast<double>(ranks - t[i - 1].first) / (t[i].first - t[i - 1].first);
      return t[i - 1].second + x * (t[i].second - t[i - 1].second);
    }
  return t.back().second;
}

double DeviceProfile::sharing_factor(int ranks) const {
  if (host_sharing.empty()) return 1.0;
  const auto& h = host_sharing;
  // Beyond the last measured count: grow proportionally (time-sharing of the cores).
  if (ranks > h.back().first) return h.back().second * static_cast<double>(ranks) / h.back().first;
  return interpolate_by_ranks(h, ranks);
}


std::vector<double>* SpeedStates::of(std::string_view cls) {
  if (cls == "matmul") return &matmul;
  if (cls == "matmul_bf16") return &matmul_bf16;
  if (cls == "elementwise") return &elementwise;
  if (cls == "dispatch") return &dispatch;
  return nullptr;
}

double expected_slowest(const std::vector<double>& q, int n) {
  if (q.empty()) return 1.0;
  // P(max <= q[i]) = ((i + 1) / m)^n for equally weighted points.
  const double m = static_cast<double>(q.size());
  double e = 0;
  for (size_t i = 0; i < q.size(); ++i)
    e += q[i] * (std::pow((i + 1) / m, n) - std::pow(i / m, n));
  return e;
}

void DeviceProfile::slow_down_by_class(double fm, double fh, double fe, double fd, bool blend_short_calls) {
  // GELU is vector arithmetic, not memory traffic: it follows the matmul probe
  // of its dtype. Seven pairs of calibrations minutes apart (rb26-rb32, the
  // add probe moving -13..+15% between the two), each GELU case of the second
  // at the first one's speed: RMS 3.1% (bf16) / 5.3% (fp32) off mapped by its
  // dtype's matmul ratio, 6.1% / 9.1% by the add probe's.
  const double half_peak = spec.bf16_peak.value() > 0 ? spec.bf16_peak.value() : spec.fp16_peak.value();
  const Time launch = launch_overhead;  // a point's call time at the speed it was fitted at
  auto slow = [&](EfficiencyCurve* c, double f, double peak, CallKind kind) {
    if (blend_short_calls) c->slow_down_blended(f, fd, peak, launch, kind);
    else c->slow_down(f);
  };
  for (EfficiencyCurve* c : {&matmul, &batched_matmul, &matmul_linear}) slow(c, fm, spec.fp32_peak.value(), CallKind::GemmFp32);
  for (EfficiencyCurve* c : {&matmul_half, &batched_matmul_half, &matmul_o1}) slow(c, fh, half_peak, CallKind::GemmHalf);
  // A GELU table point is the kernel alone (the fit took the plain dispatch
  // off its call, after bringing that part to the reference by the dispatch
  // reading: validate's normalized_to_speed): it follows its dtype's matmul
  // ratio however short the call; the call's dispatch part follows fd through
  // launch_overhead below. Short GELU calls followed the dispatch probe at
  // slopes 0.26 (bf16, r 0.90) and 0.18-0.33 (fp32) over 54 passes, and in a pair whose dispatch
  // probe read 1.32x apart (rsb7) the bf16 ones moved 1.03-1.20x.
  for (EfficiencyCurve* c : {&activation, &activation_backward}) c->slow_down(fm);
  for (EfficiencyCurve* c : {&activation_half, &activation_half_backward}) c->slow_down(fh);
  slow(&memory, fe, spec.memory_bandwidth.value(), CallKind::MemoryFp32);
  slow(&memory_half, fe, spec.memory_bandwidth.value(), CallKind::MemoryHalf);
  host_memcpy = Bandwidth(host_memcpy.value() / fe);
  launch_overhead = launch_overhead.scaled(fd);
  step_overhead = step_overhead.scaled(fd);
}

DeviceProfile DeviceProfile::shared_by(int ranks, SharingMode mode) const {
  const double f = mode == SharingMode::Fixed ? sharing_factor(ranks) : 1.0;
  DeviceProfile p = *this;
  if (!speed_states.empty()) {
    const SpeedStates& s = speed_states;
    // Up to one rank per core, the step waits for the slowest of the ranks'
    // cores; more ranks than cores time-slice every core, so each rank runs at
    // the cores' mean pace (one draw).
    const int n = s.cores > 0 && ranks > s.cores ? 1 : std::max(1, ranks);
    const double fm = expected_slowest(s.matmul, n);
    p.slow_down_by_class(fm, s.matmul_bf16.empty() ? fm : expected_slowest(s.matmul_bf16, n),
                         expected_slowest(s.elementwise, n), expected_slowest(s.dispatch, n));
  }
  if (!background_loop_by_ranks.empty()) p.background_loop_slowdown = interpolate_by_ranks(background_loop_by_ranks, ranks);
  if (!comm_stall_by_ranks.empty()) p.comm_stall = interpolate_by_ranks(comm_stall_by_ranks, ranks);
  if (!comm_stall_one_by_ranks.empty()) p.comm_stall_one = interpolate_by_ranks(comm_stall_one_by_ranks, ranks);
  if (!sync_by_ranks.empty() && ranks > 1) {
    std::vector<std::pair<int, double>> lag, exponent, latency;
    for (const auto& c : sync_by_ranks) {
      lag.emplace_back(c.ranks, c.lag.seconds());
      exponent.emplace_back(c.ranks, c.exponent);
      latency.emplace_back(c.ranks, c.latency.seconds());
    }
    p.sync_lag = Time::from_seconds(interpolate_by_ranks(lag, ranks));
    p.sync_exponent = interpolate_by_ranks(exponent, ranks);
    p.sync_latency = Time::from_seconds(interpolate_by_ranks(latency, ranks));
  }
  // The cores' speed difference: only with a core per rank, which the fit
  // measured it at (interpolated between its rank counts, none beyond the
  // last: time-sliced ranks share every core, and their lag prices the turns).
  const auto& skew = speed_states.rank_skew;
  if (!skew.empty() && ranks > 1 && ranks <= skew.back().first) p.sync_skew = interpolate_by_ranks(skew, ranks);
  if (f != 1.0) p.slow_down_by_class(f, f, f, f);
  return p;
}

DeviceProfile DeviceProfile::at_speed(const SpeedProbe& now) const {
  DeviceProfile p = *this;
  if (speed_reference.empty() || now.empty()) return p;
  auto ratio = [](double a, double b) { return std::clamp(a / b, 0.2, 5.0); };
  const double fm = ratio(now.matmul_s, speed_reference.matmul_s);
  // A reading of another form of the add probe says nothing about the memory tables.
  const bool same_add = now.elementwise_comparable(speed_reference);
  const double fe = same_add ? ratio(now.elementwise_s, speed_reference.elementwise_s) : 1.0;
  const double fd = ratio(now.dispatch_s, speed_reference.dispatch_s);
  const double fh = now.matmul_bf16_s > 0 && speed_reference.matmul_bf16_s > 0
                        ? ratio(now.matmul_bf16_s, speed_reference.matmul_bf16_s)
                        : fm;
  // Each GEMM and memory table point partly by the dispatch ratio, by its
  // call's time (activation points: their class alone). Only
  // here: the speed states' slowest-of-N draws keep the class alone (blending
  // those too put every short GEMM of a 2-rank step at the slowest of two
  // bimodal dispatch draws; validate/README gap 8).
  p.slow_down_by_class(fm, fh, fe, fd, /*blend_short_calls=*/true);
  p.speed_reference = now;
  if (!same_add) {  // the memory tables stay at the reference's add reading
    p.speed_reference.elementwise_s = speed_reference.elementwise_s;
    p.speed_reference.elementwise_form = speed_reference.elementwise_form;
  }
  return p;
}

double DeviceProfile::comm_state_exponent_for(int ranks) const {
  for (auto [n, b] : comm_state_exponent)
    if (n == ranks) return b;
  return 1.0;
}

DeviceProfile DeviceProfile::at_comm_state(const std::vector<std::pair<int, double>>& now) const {
  DeviceProfile p = *this;
  for (auto [n, s] : now) {
    auto ref = std::find_if(p.comm_reference.begin(), p.comm_reference.end(), [n = n](const auto& r) { return r.first == n; });
    if (ref == p.comm_reference.end() || ref->second <= 0 || s <= 0) continue;
    const double f = std::pow(std::clamp(s / ref->second, 0.2, 5.0), comm_state_exponent_for(n));
    for (CommCalibration& t : p.network) {
      if (t.ranks != n) continue;
      for (CommRegime& g : t.regimes) {
        g.alpha = g.alpha.scaled(f);
        g.bandwidth_factor /= f;
      }
    }
    ref->second = s;
  }
  return p;
}

void apply_network_yaml(const YamlNode& node, DeviceProfile& p) {
  node.check_keys({"backend", "source", "tables", "state_reference"});
  p.network.clear();
  p.comm_reference.clear();
  p.comm_state_exponent.clear();
  if (auto sr = node.find("state_reference")) {
    for (const auto& e : sr->items()) {
      e.check_keys({"ranks", "allreduce_4k", "exponent"});
      const int n = e.at("ranks").as_positive_int();
      const double s = e.at("allreduce_4k").as_time().seconds();
      if (s <= 0) e.at("allreduce_4k").fail("must be positive");
      if (!p.comm_reference.empty() && n <= p.comm_reference.back().first)
        e.at("ranks").fail("state_reference entries need ascending ranks");
      p.comm_reference.emplace_back(n, s);
      if (auto b = e.find("exponent")) {
        const double x = b->as_non_negative();
        if (x > 1) b->fail("must be within [0, 1] (how far the collectives follow the probe)");
        p.comm_state_exponent.emplace_back(n, x);
      }
    }
  }
  if (auto t = node.find("tables")) {
    for (const auto& e : t->items()) {
      e.check_keys({"link_kind", "collective", "ranks", "algorithm", "regimes"});
      CommCalibration c;
      c.link_kind = e.get<std::string>("link_kind", "");
      static const char* kKinds[] = {"nvlink", "pcie", "cpu-interconnect", "infiniband", "ethernet", "shared-memory",
                                     "other"};
      if (!c.link_kind.empty() && std::find(std::begin(kKinds), std::end(kKinds), c.link_kind) == std::end(kKinds))
        e.at("link_kind").fail(fmt::format("unknown link kind '{}'", c.link_kind));
      c.collective = e.get<std::string>("collective", "");
      CollectiveKind named;
      if (!c.collective.empty() && !parse_collective_kind(c.collective, named))
        e.at("collective").fail(fmt::format("unknown collective '{}'", c.collective));
      if (auto r = e.find("ranks")) c.ranks = r->as_positive_int();
      if (auto a = e.find("algorithm")) {
        Algorithm alg;
        if (!parse_algorithm(a->as<std::string>(), alg) || alg == Algorithm::Auto)
          a->fail(fmt::format("unknown algorithm '{}' (ring, tree, hd, hierarchical, direct, ps)", a->as<std::string>()));
        c.algorithm = alg;
      }
      for (const auto& rg : e.at("regimes").items()) {
        rg.check_keys({"up_to", "alpha", "bandwidth_factor", "measured"});
        CommRegime g;
        if (auto u = rg.find("up_to")) g.up_to = u->as_bytes().value();
        if (auto m = rg.find("measured")) {
          const auto sizes = m->items();
          if (sizes.size() != 2) m->fail("measured: [smallest, largest] buffer the regime's fit saw");
          g.measured_from = sizes[0].as_bytes().value();
          g.measured_to = sizes[1].as_bytes().value();
          if (!(g.measured_from > 0 && g.measured_to >= g.measured_from))
            m->fail("measured: [smallest, largest] needs 0 < smallest <= largest");
          if (!c.regimes.empty() && c.regimes.back().measured_to > 0 && g.measured_from <= c.regimes.back().measured_to)
            m->fail("measured sizes must ascend from regime to regime");
          // The bound between two regimes lies between their measured sizes.
          if (g.up_to > 0 && g.up_to < g.measured_to)
            m->fail("measured sizes beyond the regime's up_to");
          if (!c.regimes.empty() && c.regimes.back().up_to >= g.measured_from)
            m->fail("measured sizes at or below the previous regime's up_to");
        }
        g.alpha = rg.at("alpha").as_time();
        if (g.alpha.seconds() > 10) rg.at("alpha").fail("alpha above 10 s per step is not meaningful");
        g.bandwidth_factor = rg.at("bandwidth_factor").as_positive();
        if (g.bandwidth_factor > 1e4 || g.bandwidth_factor < 1e-6)
          rg.at("bandwidth_factor").fail("bandwidth_factor must be within [1e-6, 1e4]");
        if (!c.regimes.empty() && (c.regimes.back().up_to <= 0 || (g.up_to > 0 && g.up_to <= c.regimes.back().up_to)))
          rg.fail("regimes must have ascending `up_to`, the unbounded one (no up_to) last");
        c.regimes.push_back(g);
      }
      if (c.regimes.empty()) e.at("regimes").fail("a table needs at least one regime");
      p.network.push_back(std::move(c));
    }
  }
}

const std::vector<std::string>& profile_document_keys() {
  static const std::vector<std::string> keys{"name", "description", "source", "calibrated_with", "device", "network"};
  return keys;
}

void apply_profile_document(const YamlNode& root, DeviceProfile& p) {
  root.check_keys(profile_document_keys());
  if (auto c = root.find("calibrated_with")) {
    c->check_keys({"threads", "bind", "backend", "cluster"});
    DeviceProfile::Conditions w;
    if (auto t = c->find("threads")) {
      w.threads = t->as<int>();
      if (w.threads < 1) t->fail("threads must be at least 1");
    }
    if (auto b = c->find("bind")) {
      w.bind = b->as<std::string>();
      if (w.bind != "auto" && w.bind != "core" && w.bind != "none")
        b->fail("bind must be auto, core or none, got '" + w.bind + "'");
    }
    if (auto b = c->find("backend")) w.backend = b->as<std::string>();
    if (auto k = c->find("cluster")) w.cluster = k->as<std::string>();
    p.calibrated_with = w;
  }
  if (auto d = root.find("device")) apply_profile_yaml(*d, p);
  if (auto n = root.find("network")) apply_network_yaml(*n, p);
}

}  // namespace dptwin::sim
