#include "validate/validation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/host_load.hpp"
#include "exec/launcher.hpp"
#include "exec/process.hpp"
#include "sim/output.hpp"
#include "sim/simulate.hpp"
#include "validate/metrics.hpp"
#include "validate/profile_fit.hpp"
#include "validate/trace_compare.hpp"

namespace dptwin::validate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Whether the rounds order two cases: the case with the faster median ran
// faster round for round at 5% significance (one-sided Mann-Whitney: with 5
// rounds each, U <= 4, i.e. one contended round may overlap; with 3, only a
// complete separation). Cases without rounds are ordered by their figures.
bool rounds_order(const CaseOutcome& a, const CaseOutcome& b) {
  if (a.measured_rounds_s.size() < 2 || b.measured_rounds_s.size() < 2) return true;
  const bool a_faster = a.measured_step_s <= b.measured_step_s;
  const auto& f = a_faster ? a.measured_rounds_s : b.measured_rounds_s;
  const auto& s = a_faster ? b.measured_rounds_s : a.measured_rounds_s;
  return mann_whitney_p_less(f, s) <= kRankingSignificance;
}

double seconds_at(const json& j, const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }

std::vector<ValidationSummary::ComponentError> component_errors(const std::vector<const CaseOutcome*>& ok) {
  struct Samples {
    std::vector<double> step, compute, rest;
  };
  // Every case counts in its precision's group and in its rank count's.
  std::map<std::string, Samples> by_precision;
  std::map<int, Samples> by_ranks;
  for (const auto* c : ok) {
    const json &m = c->measured_breakdown, &p = c->predicted_breakdown;
    const double mc = seconds_at(m, "forward_s") + seconds_at(m, "backward_s"), pc = seconds_at(p, "compute_s");
    const double rest = (c->predicted_step_s - pc - seconds_at(p, "optimizer_s")) -
                        (c->measured_step_s - mc - seconds_at(m, "optimizer_s"));
    for (Samples* g : {&by_precision[c->c.precision], &by_ranks[c->c.ranks]}) {
      g->step.push_back(error_pct(c->predicted_step_s, c->measured_step_s));
      if (mc > 0 && pc > 0) g->compute.push_back(error_pct(pc, mc));
      g->rest.push_back(rest);
    }
  }
  std::vector<ValidationSummary::ComponentError> out;
  auto add = [&](const std::string& name, const Samples& g) {
    out.push_back({name, static_cast<int>(g.step.size()), median(g.step), median(g.compute), median(g.rest) * 1e3});
  };
  for (const char* prec : {"fp32", "bf16"})
    if (auto it = by_precision.find(prec); it != by_precision.end()) add(prec, it->second);
  for (const auto& [ranks, g] : by_ranks) add(fmt::format("x{}", ranks), g);
  return out;
}

}  // namespace

ValidationSummary summarize(const std::vector<CaseOutcome>& cases, double tie_pct) {
  ValidationSummary s;
  std::vector<double> pred, meas;
  std::vector<const CaseOutcome*> ok;
  for (const auto& c : cases)
    if (c.status == "ok" && c.measured_step_s > 0) {
      ok.push_back(&c);
      pred.push_back(c.predicted_step_s);
      meas.push_back(c.measured_step_s);
    }
  s.cases = static_cast<int>(ok.size());
  s.mape_pct = mape_pct(pred, meas);
  s.worst_pct = worst_pct(pred, meas);
  for (const auto* c : ok)
    if (std::abs(error_pct(c->predicted_step_s, c->measured_step_s)) == s.worst_pct && s.worst_case.empty())
      s.worst_case = c->c.label();
  // Strategy ranking within each configuration; measured near-ties are ties.
  for (size_t i = 0; i < ok.size(); ++i)
    for (size_t j = i + 1; j < ok.size(); ++j) {
      if (ok[i]->c.group_key() != ok[j]->c.group_key()) continue;
      const double mi = meas[i], mj = meas[j];
      const double dm = mi - mj, dp = pred[i] - pred[j];
      const bool band_tie = std::abs(dm) <= tie_pct / 100.0 * std::min(mi, mj) || dp == 0;
      const bool agrees = (dm > 0) == (dp > 0);
      if (!band_tie && !agrees) ++s.discordant_band_only;
      if (band_tie) {
        ++s.ties;
      } else if (!rounds_order(*ok[i], *ok[j])) {
        ++s.ties;
        ++s.ties_unordered;
      } else if (agrees) {
        ++s.concordant;
      } else {
        ++s.discordant;
      }
    }
  double steal_sum = 0;
  int steal_runs = 0;
  for (const auto* c : ok) {
    const std::vector<double> one{c->host_steal_pct};
    for (double v : c->host_steal_rounds_pct.empty() ? one : c->host_steal_rounds_pct)
      if (v >= 0) {
        steal_sum += v;
        ++steal_runs;
      }
  }
  if (steal_runs > 0) s.host_steal_pct = steal_sum / steal_runs;
  std::vector<double> unc, unc_meas;
  for (const auto* c : ok)
    if (!c->speed.is_null() && c->predicted_uncompensated_step_s > 0) {
      unc.push_back(c->predicted_uncompensated_step_s);
      unc_meas.push_back(c->measured_step_s);
    }
  s.compensated = static_cast<int>(unc.size());
  if (!unc.empty()) {
    s.mape_uncompensated_pct = mape_pct(unc, unc_meas);
    s.worst_uncompensated_pct = worst_pct(unc, unc_meas);
  }
  s.components = component_errors(ok);
  RankAgreement r{s.concordant, s.discordant, s.ties};
  s.kendall_tau = r.tau();
  s.ranking_correct = s.discordant == 0;
  return s;
}

json to_json(const std::string& matrix, const std::string& profile, const std::vector<CaseOutcome>& cases,
             const ValidationSummary& s, double tie_pct, const json& run_state_readings) {
  json out;
  out["matrix"] = matrix;
  out["profile"] = profile;
  json& arr = out["cases"] = json::array();
  for (const auto& c : cases) {
    json j;
    j["labels"] = {{"model", c.c.model},     {"strategy", c.c.strategy},       {"ranks", c.c.ranks},
                   {"precision", c.c.precision}, {"micro_batch", c.c.micro_batch}, {"seq_len", c.c.seq_len}};
    j["label"] = c.c.label();
    j["status"] = c.status;
    if (!c.message.empty()) j["message"] = c.message;
    const bool ok = c.status == "ok" && c.measured_step_s > 0;
    j["predicted_step_s"] = c.predicted_step_s;
    j["measured_step_s"] = ok ? json(c.measured_step_s) : json(nullptr);
    j["error_pct"] = ok ? json(error_pct(c.predicted_step_s, c.measured_step_s)) : json(nullptr);
    if (!c.measured_rounds_s.empty()) j["measured_rounds_s"] = c.measured_rounds_s;
    if (c.host_steal_pct >= 0) j["host_steal_pct"] = c.host_steal_pct;
    if (!c.host_steal_rounds_pct.empty()) j["host_steal_rounds_pct"] = c.host_steal_rounds_pct;
    j["measured_p10_s"] = c.measured_p10_s;
    j["measured_p90_s"] = c.measured_p90_s;
    j["predicted_breakdown"] = c.predicted_breakdown;
    if (!c.comm_state_s.empty()) j["comm_state_s"] = c.comm_state_s;
    if (c.comm_state_priced_s > 0) j["comm_state_priced_s"] = c.comm_state_priced_s;
    if (!c.speed.is_null()) {
      j["speed_ratio"] = c.speed;
      j["predicted_uncompensated_step_s"] = c.predicted_uncompensated_step_s;
    }
    j["measured_breakdown"] = c.measured_breakdown;
    arr.push_back(std::move(j));
  }
  out["summary"] = {{"cases", s.cases},
                    {"mape_pct", s.mape_pct},
                    {"worst_pct", s.worst_pct},
                    {"worst_case", s.worst_case},
                    {"kendall_tau", s.kendall_tau},
                    {"concordant", s.concordant},
                    {"discordant", s.discordant},
                    {"ties", s.ties},
                    {"ties_unordered", s.ties_unordered},
                    {"discordant_band_only", s.discordant_band_only},
                    {"ranking_correct", s.ranking_correct},
                    {"host_steal_pct", s.host_steal_pct >= 0 ? json(s.host_steal_pct) : json(nullptr)},
                    {"ranking_tie_pct", tie_pct}};
  json& comp = out["summary"]["components"] = json::array();
  for (const auto& e : s.components)
    comp.push_back({{"group", e.group},
                    {"cases", e.cases},
                    {"step_error_median_pct", e.step_pct},
                    {"compute_error_median_pct", e.compute_pct},
                    {"rest_diff_median_ms", e.rest_ms}});
  if (!s.profile_mismatches.empty()) out["summary"]["profile_mismatches"] = s.profile_mismatches;
  if (s.compensated > 0) {
    out["summary"]["compensated"] = s.compensated;
    out["summary"]["mape_uncompensated_pct"] = s.mape_uncompensated_pct;
    out["summary"]["worst_uncompensated_pct"] = s.worst_uncompensated_pct;
  }
  if (run_state_readings.is_array() && !run_state_readings.empty()) out["run_state_readings"] = run_state_readings;
  return out;
}

std::string to_table(const std::vector<CaseOutcome>& cases, const ValidationSummary& s) {
  std::string t = fmt::format("{:<30} {:>11} {:>11} {:>8}   {:>23}   {}\n", "case", "measured ms", "predicted ms",
                              "error %", "measured fwd/bwd/comm/opt", "predicted compute/exp.comm/opt/ovh");
  auto ms = [](const json& j, const char* k) { return seconds_at(j, k) * 1e3; };
  for (const auto& c : cases) {
    if (c.status != "ok" || c.measured_step_s <= 0) {
      t += fmt::format("{:<30} {:>11} {:>11.2f} {:>8}   {}\n", c.c.label(), c.status, c.predicted_step_s * 1e3, "-",
                       c.message);
      continue;
    }
    const auto& m = c.measured_breakdown;
    const auto& p = c.predicted_breakdown;
    t += fmt::format("{:<30} {:>11.2f} {:>11.2f} {:>+8.1f}   {:>5.1f}/{:>5.1f}/{:>5.1f}/{:>5.1f}   {:>6.1f}/{:>5.1f}/{:>5.1f}/{:>5.1f}\n",
                     c.c.label(), c.measured_step_s * 1e3, c.predicted_step_s * 1e3,
                     error_pct(c.predicted_step_s, c.measured_step_s), ms(m, "forward_s"), ms(m, "backward_s"),
                     ms(m, "comm_s"), ms(m, "optimizer_s"), ms(p, "compute_s"), ms(p, "exposed_comm_s"),
                     ms(p, "optimizer_s"), ms(p, "overhead_s"));
  }
  t += fmt::format("\ncases {}  MAPE {:.1f}%  worst {:.1f}% ({})  Kendall tau {:.3f} (concordant {}, discordant {}, "
                   "ties {}, of which {} the rounds do not order)  ranking {}\n",
                   s.cases, s.mape_pct, s.worst_pct, s.worst_case, s.kendall_tau, s.concordant, s.discordant, s.ties,
                   s.ties_unordered, s.ranking_correct ? "correct" : "WRONG");
  if (s.discordant_band_only != s.discordant)
    t += fmt::format("(with the tie band alone, rounds ignored: {} discordant)\n", s.discordant_band_only);
  if (s.compensated > 0)
    t += fmt::format("predicted at speeds probed during the validation ({} cases); the profile's own predictions: "
                     "MAPE {:.1f}%  worst {:.1f}%\n",
                     s.compensated, s.mape_uncompensated_pct, s.worst_uncompensated_pct);
  if (!s.components.empty()) {
    t += "where the error lives (medians; compute: predicted compute vs measured forward + backward; rest: step less "
         "compute and optimizer, predicted - measured):\n";
    for (const auto& e : s.components)
      t += fmt::format("  {:<5} {:>2} cases  step {:+6.1f}%  compute {:+6.1f}%  rest {:+7.2f} ms\n", e.group, e.cases,
                       e.step_pct, e.compute_pct, e.rest_ms);
  }
  if (s.host_steal_pct >= 0)
    t += fmt::format("host: {:.1f}% of CPU time stolen by the hypervisor during the runs (mean over runs, /proc/stat)\n",
                     s.host_steal_pct);
  for (const auto& d : s.profile_mismatches) t += fmt::format("profile: {}\n", d);
  return t;
}

std::vector<std::string> calibration_mismatches(const sim::DeviceProfile::Conditions& calibrated,
                                                const ValidationMatrix& m) {
  std::vector<std::string> out;
  auto differ = [&](const char* key, const std::string& cal, const std::string& runs) {
    if (!cal.empty() && cal != runs)
      out.push_back(fmt::format("{}: calibrated {}, the matrix runs {}", key, cal, runs));
  };
  if (calibrated.threads > 0) differ("threads", std::to_string(calibrated.threads), std::to_string(m.threads));
  differ("bind", calibrated.bind, m.bind);
  differ("backend", calibrated.backend, m.backend);
  return out;
}

sim::PointSpec point_for_case(const ValidationMatrix& m, const ValidationCase& c, const std::string& profile_path) {
  std::string y;
  y += "name: validate\n";
  // dptwin-exec's GPT-2 runs one fused tanh-GELU kernel and no dropout layers.
  y += fmt::format("model: {{preset: {}, gelu: fused, dropout: false", c.model);
  if (c.seq_len > 0) y += fmt::format(", n_ctx: {}", c.seq_len);
  y += "}\n";
  y += fmt::format("cluster: \"{}\"\n", m.cluster);
  y += fmt::format("devices: {}\n", c.ranks);
  y += fmt::format("strategy: {}\n", c.strategy);
  y += fmt::format("micro_batch: {}\n", c.micro_batch);
  y += fmt::format("amp: {}\n", c.precision == "bf16" ? "o1" : "none");
  y += "half: bf16\n";
  y += "options:\n  common: {algorithm: ring}\n  sps: {mode: central-server}\n";
  y += "simulation: {steps: 3}\n";
  sim::Scenario sc = sim::parse_scenario(load_yaml_string(y, "validation case " + c.label()));
  DPTWIN_ASSERT(sc.points.size() == 1, "a validation case is one scenario point");
  sim::PointSpec p = sc.points.front();
  if (!profile_path.empty()) {
    try {
      sim::apply_profile_document(load_yaml_file(profile_path), p.profile);
    } catch (const InputError& e) {
      throw e.with_context(fmt::format("while applying profile '{}'", profile_path));
    }
    p.calibration = profile_path;
  }
  if (m.emulated) p.profile.ranks_share_machine = true;
  return p;
}

std::vector<std::string> exec_args(const ValidationMatrix& m, const ValidationCase& c) {
  std::vector<std::string> a{"--strategy", c.strategy, "--np", std::to_string(c.ranks), "--backend", m.backend,
                             "--model", c.model, "--micro-batch", std::to_string(c.micro_batch), "--steps",
                             std::to_string(c.steps > 0 ? c.steps : m.steps), "--warmup-steps",
                             std::to_string(c.steps > 0 ? c.warmup_steps : m.warmup_steps), "--threads",
                             std::to_string(m.threads), "--bind", m.bind, "--precision", c.precision, "--amp",
                             c.precision == "bf16" ? "o1" : "none"};
  if (c.seq_len > 0) a.insert(a.end(), {"--seq-len", std::to_string(c.seq_len)});
  return a;
}

void read_exec_result(const json& r, CaseOutcome& out) {
  const json& s = r.at("summary");
  const json& st = s.at("step_time_s");
  out.measured_step_s = st.at("median").get<double>();
  out.measured_p10_s = st.value("p10", 0.0);
  out.measured_p90_s = st.value("p90", 0.0);
  out.measured_breakdown = json::object();
  if (s.contains("phases"))
    for (const auto& [k, v] : s.at("phases").items())
      if (k != "step_s" && v.contains("median")) out.measured_breakdown[k] = v.at("median");
  if (r.contains("comm_state"))
    for (const auto& x : r.at("comm_state").at("readings_s")) out.comm_state_s.push_back(x.get<double>());
}

namespace {

// Processes the speed probe runs for a case of `ranks` ranks: as many as the
// case has, but no more than the cores hold at `threads` threads each. Beyond
// that the probes time-slice, and their short loops (200 dispatches, one
// matmul) fall in or out of a slice by chance: on 2 cores, 4 probe processes
// read dispatch 0.4-0.7x and elementwise 1.1-1.9x of the reference (after the
// sharing factor 2) across one validation.
int probe_processes(const ValidationMatrix& m, int ranks) {
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  return std::clamp(cores / std::max(1, m.threads), 1, std::max(1, ranks));
}

// `now`: the speed probe's reading, by probe_processes(c.ranks) processes at
// once when `probed_now`, else one process (a profile's reference).
// `states` (with `now` from another profile): that profile's speed states
// replace this one's, where this one has some.
// `comm`: the host's communication state by rank count to price the
// collectives at (sim::DeviceProfile::at_comm_state; empty: the profile's).
json predict(const ValidationMatrix& m, const ValidationCase& c, const std::string& profile, CaseOutcome& out,
             const sim::SpeedProbe& now = {}, bool probed_now = true, const sim::SpeedStates& states = {},
             const std::vector<std::pair<int, double>>& comm = {}) {
  sim::PointSpec point = point_for_case(m, c, profile);
  out.comm_state_priced_s = 0;
  for (auto [n, s] : comm)
    if (n == c.ranks && std::any_of(point.profile.comm_reference.begin(), point.profile.comm_reference.end(),
                                    [n = n](const auto& r) { return r.first == n; }))
      out.comm_state_priced_s = s;
  const sim::SpeedProbe ref = point.profile.speed_reference;
  const bool at_speed = !now.empty() && !ref.empty();
  if (at_speed || out.comm_state_priced_s > 0)
    out.predicted_uncompensated_step_s = sim::simulate_point(point).step_time_s.value_or(0.0);
  if (out.comm_state_priced_s > 0) point.profile = point.profile.at_comm_state(comm);
  if (at_speed) {
    // Probed by probe_processes(c.ranks) processes at once: their slowdown
    // includes any core sharing that the simulator applies itself
    // (host_sharing), so the speed relative to the reference is divided by it.
    const int procs = probed_now ? probe_processes(m, c.ranks) : 1;
    const double f = point.profile.sharing_factor(procs);
    const sim::SpeedProbe at{now.matmul_s / f, now.elementwise_s / f, now.dispatch_s / f, now.matmul_bf16_s / f,
                             now.elementwise_form};
    out.speed = {{"matmul", at.matmul_s / ref.matmul_s}, {"dispatch", at.dispatch_s / ref.dispatch_s}, {"probe_processes", procs}};
    if (at.elementwise_comparable(ref)) out.speed["elementwise"] = at.elementwise_s / ref.elementwise_s;
    if (at.matmul_bf16_s > 0 && ref.matmul_bf16_s > 0) out.speed["matmul_bf16"] = at.matmul_bf16_s / ref.matmul_bf16_s;
    point.profile = point.profile.at_speed(at);
    if (!states.empty() && !point.profile.speed_states.empty()) {
      // The skew between the ranks' cores: another profile's (--at-speed-of)
      // where both price it so (a profile without one keeps its lag, and
      // both would count the cores' difference twice); the run states'
      // probes do not read it, and the profile's stays. Their pooled
      // readings hold part of it in the slowest-of-N draws, so that part
      // is priced twice there: dropping the profile's skew at run states
      // moved MAPE on vdq6 by at most 0.4 points either way over 14
      // profiles (validate/README "Runs of 2026-12-07 09:49-").
      const auto skew = point.profile.speed_states.rank_skew;
      point.profile.speed_states = states;
      if (states.rank_skew.empty() || skew.empty()) point.profile.speed_states.rank_skew = skew;
    }
  }
  sim::PointResult r = sim::simulate_point(point);
  if (r.status != "ok" || !r.step_time_s) {
    out.status = "failed";
    out.message = "simulator: " + r.status + " " + r.message;
    return json::object();
  }
  out.predicted_step_s = *r.step_time_s;
  const auto& b = r.breakdown;
  out.predicted_breakdown = {{"compute_s", b.compute_s},
                             {"exposed_comm_s", b.exposed_comm_s},
                             {"hidden_comm_s", b.hidden_comm_s},
                             {"optimizer_s", b.optimizer_s},
                             {"overhead_s", b.overhead_s}};
  return out.predicted_breakdown;
}

std::vector<exec::ProcessSpec> launch_specs(const ValidationMatrix& m, const ValidationCase& c,
                                            const std::string& binary, const std::string& result_path, int port,
                                            const std::string& trace_path) {
  std::vector<std::string> args = exec_args(m, c);
  args.insert(args.end(), {"--out", result_path});
  if (!trace_path.empty()) args.insert(args.end(), {"--trace", trace_path});
  std::vector<exec::ProcessSpec> specs;
  if (!m.emulated || c.ranks == 1) {
    exec::ProcessSpec s;
    s.argv = {binary};
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    s.label = "dptwin-exec";
    specs.push_back(std::move(s));
    return specs;
  }
  // One rank per namespace; Gloo over TCP on the namespaces' addresses, store on rank 0's.
  const std::string th = std::to_string(m.threads);
  for (int r = 0; r < c.ranks; ++r) {
    exec::ProcessSpec s;
    s.argv = {"ip", "netns", "exec", m.netns.namespaces[r], binary};
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    s.env = {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(c.ranks)},
             {"LOCAL_RANK", "0"},
             {"DPTWIN_LAUNCHED", "1"},
             {"GLOO_SOCKET_IFNAME", m.netns.interface},
             {"DPTWIN_STORE", fmt::format("tcp:{}:{}", m.netns.addresses[0], port)},
             {"OMP_NUM_THREADS", th},
             {"OPENBLAS_NUM_THREADS", th},
             {"MKL_NUM_THREADS", th}};
    s.cpus = exec::bind_cpus(m.bind, r, c.ranks, m.threads, exec::usable_cores());
    s.label = fmt::format("rank {} ({})", r, m.netns.namespaces[r]);
    specs.push_back(std::move(s));
  }
  return specs;
}

// The traced run's measured timeline (exec's trace at `trace`) next to the
// simulator's timeline of the same case, written to o.trace_path.
void write_side_by_side(const ValidationMatrix& m, const ValidationOptions& o, const CaseOutcome& run,
                        const json& result, const std::string& trace) {
  const int step = representative_step(result);
  if (step < 0 || !fs::exists(trace)) {
    if (o.log) o.log("note: the traced run left no trace of two measured steps; no side-by-side trace written");
    return;
  }
  json measured;
  {
    std::ifstream f(trace);
    measured = json::parse(f);
  }
  sim::PointSpec point = point_for_case(m, run.c, o.profile);
  point.sim.trace = true;
  point.sim.trace_devices = std::max(point.sim.trace_devices, run.c.ranks);
  const sim::PointResult r = sim::simulate_point(point);
  const json predicted = sim::chrome_trace({r}, 0);
  double step_s = run.measured_step_s;
  for (const auto& s : result.at("steps"))
    if (s.value("step", -1) == step) step_s = s.value("step_time_s", step_s);
  const json doc = side_by_side_trace(measured, step, predicted, run.c.label(), step_s, r.step_time_s.value_or(0.0));
  std::ofstream out(o.trace_path);
  out << doc.dump() << "\n";
  if (!out) throw InputError({"command line", 0, 0}, "--trace", fmt::format("cannot write '{}'", o.trace_path));
  if (o.log) o.log(fmt::format("side-by-side trace of {} (measured step {}) written to {}", run.c.label(), step, o.trace_path));
}

}  // namespace

std::vector<exec::ProcessSpec> speed_probe_specs(const ValidationMatrix& m, const std::string& binary,
                                                const std::vector<std::string>& out_paths, int first_slot) {
  std::vector<exec::ProcessSpec> specs;
  const int procs = static_cast<int>(out_paths.size());
  for (int r = 0; r < procs; ++r) {
    exec::ProcessSpec s;
    s.argv = {binary, "--mode", "speed", "--threads", std::to_string(m.threads), "--out", out_paths[static_cast<size_t>(r)]};
    s.cpus = exec::bind_cpus(m.bind, first_slot + r, procs, m.threads, exec::usable_cores());
    s.label = fmt::format("dptwin-microbench --mode speed ({} of {})", r + 1, procs);
    specs.push_back(std::move(s));
  }
  return specs;
}

namespace {

// The speed probe's documents (their "speed" and "speed_readings", and
// "cpus": the cores the process was bound to), from `procs` processes run at
// once; empty when any of them failed.
std::vector<json> run_speed_probes(const ValidationMatrix& m, const std::string& binary, int procs,
                                   int first_slot = 0) {
  std::vector<std::string> paths;
  for (int r = 0; r < procs; ++r)
    paths.push_back((fs::temp_directory_path() / fmt::format("dptwin-speed-{}-{}.json", ::getpid(), r)).string());
  const std::vector<exec::ProcessSpec> specs = speed_probe_specs(m, binary, paths, first_slot);
  exec::GroupOutcome g = exec::run_process_group(specs, 60);
  std::vector<json> docs;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (g.ok && fs::exists(paths[i])) {
      try {
        std::ifstream f(paths[i]);
        docs.push_back(json::parse(f));
        docs.back()["cpus"] = specs[i].cpus;
      } catch (const std::exception&) {
      }
    }
    fs::remove(paths[i]);
  }
  if (docs.size() != paths.size()) docs.clear();
  return docs;
}

// The speed probe now, run by probe_processes(ranks) processes at once, as the
// case's ranks will keep the cores busy; the median over the processes of each
// figure. Empty when off or when it fails: the
// prediction is then uncompensated.
sim::SpeedProbe probe_speed(const ValidationMatrix& m, const ValidationOptions& o, int ranks) {
  if (o.speed_probe.empty()) return {};
  std::vector<double> mm, el, di, mh;
  std::string form;
  const std::vector<json> docs = run_speed_probes(m, o.speed_probe, probe_processes(m, ranks));
  try {
    for (const auto& d : docs) {
      const json& sp = d.at("speed");
      mm.push_back(sp.at("matmul_s").get<double>());
      el.push_back(sp.at("elementwise_s").get<double>());
      di.push_back(sp.at("dispatch_s").get<double>());
      if (sp.contains("matmul_bf16_s")) mh.push_back(sp.at("matmul_bf16_s").get<double>());
      form = elementwise_form_of(sp);  // one binary: every process's alike
    }
  } catch (const std::exception&) {
    mm.clear();
  }
  sim::SpeedProbe p;
  if (!mm.empty()) p = {median(mm), median(el), median(di), mh.size() == mm.size() ? median(mh) : 0.0, form};
  if (p.empty() && o.log) o.log("note: the speed probe failed; this prediction is not drift-compensated");
  return p;
}

// The most speed probes --run-states runs in one validation.
constexpr int kStateProbes = 40;

// One process's quick readings now (`--run-states`), appended to `pool` as
// {"class", "s", "cpu"}, the form of the compute suite's probe readings. The
// `slot`-th probe runs on the core of rank `slot` (bound matrices), so the
// probes visit every core in turn: each core has slow phases of its own (a
// core at +45% on dispatch for a minute while the other stays fast), and an
// N-rank step waits for its slowest core.
void probe_states(const ValidationMatrix& m, const ValidationOptions& o, int slot, json& pool) {
  const std::vector<json> docs = run_speed_probes(m, o.states_probe, 1, slot);
  if (docs.empty() || !docs.front().contains("speed_readings")) {
    if (o.log) o.log("note: the speed probe failed before this run; its readings are missing from the run states");
    return;
  }
  const std::string form = elementwise_form_of(docs.front().value("speed", json::object()));
  const std::vector<int> cpus = docs.front().value("cpus", std::vector<int>{});
  for (const auto& [cls, v] : docs.front().at("speed_readings").items())
    for (const auto& x : v)
      if (x.is_number()) {
        pool.push_back({{"class", cls}, {"s", x}, {"cpu", cpus.empty() ? -1 : cpus.front()}});
        if (cls == "elementwise") pool.back()["form"] = form;
      }
}

// Every case predicted again at the speed states of the validation's own probe
// readings (`pool`) relative to the profile's speed_reference; classes with
// too few readings keep the profile's states. Returns false (cases untouched)
// when the profile has no reference or states, or the readings give none.
bool predict_at_run_states(const ValidationMatrix& m, const ValidationOptions& o, const json& pool,
                           std::vector<CaseOutcome>& out) {
  if (out.empty()) return false;
  const sim::DeviceProfile profile = point_for_case(m, out.front().c, o.profile).profile;
  const sim::SpeedProbe& r = profile.speed_reference;
  if (r.empty() || profile.speed_states.empty()) return false;
  SpeedReference ref{{"matmul", r.matmul_s}, {"elementwise", r.elementwise_s}, {"dispatch", r.dispatch_s}};
  if (r.matmul_bf16_s > 0) ref["matmul_bf16"] = r.matmul_bf16_s;
  const int cores = profile.speed_states.cores > 0 ? profile.speed_states.cores
                                                   : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  // The machine's level during the runs (each class's median reading) and
  // the spread around it, split as the fit splits a calibration's readings
  // (each against its pass's level): the level moves the profile by at_speed,
  // short calls' table points partly by the dispatch ratio; the spread
  // replaces its speed states, class by class (validate/README gap 8).
  // Add readings of another form than the profile's reference say nothing
  // about it: that class keeps the profile's level and states.
  json usable = json::array();
  std::string other_form;
  for (const auto& x : pool) {
    const std::string form = x.value("form", r.elementwise_form);
    if (form == r.elementwise_form) usable.push_back(x);
    else other_form = form;
  }
  if (!other_form.empty() && o.log)
    o.log(fmt::format("note: the profile's elementwise speed reference was read by the {} add probe, the run states' "
                      "readings by the {} one: the memory tables stay at the profile's speed (calibrate again)",
                      r.elementwise_form, other_form));
  std::map<std::string, std::vector<double>> by_class;
  for (const auto& x : usable) by_class[x.at("class").get<std::string>()].push_back(x.at("s").get<double>());
  SpeedReference level = ref;
  for (const auto& [cls, v] : by_class)
    if (ref.count(cls) && !v.empty()) level[cls] = median(v);
  sim::SpeedStates states = speed_states(json{{"cores", cores}, {"probe_readings", usable}}, level);
  if (states.empty()) return false;
  json summary = {{"states", "probed during the validation"}, {"readings", usable.size()}};
  for (const char* cls : sim::SpeedStates::kClasses) {
    std::vector<double>* q = states.of(cls);
    const std::vector<double>* mine = profile.speed_states.of(cls);
    if (q->empty()) {  // too few readings of this class: the profile's level and states
      *q = *mine;
      if (ref.count(cls)) level[cls] = ref.at(cls);
    }
    const double lv = ref.count(cls) ? level.at(cls) / ref.at(cls) : 1.0;
    summary[cls] = {{"level", lv},
                    {"mean", lv * sim::expected_slowest(*q, 1)},
                    {"slowest_of_2", lv * sim::expected_slowest(*q, 2)},
                    {"profile_mean", sim::expected_slowest(*mine, 1)}};
  }
  // Each probed core's mean reading against the level (diagnostic): where the
  // slow phases fell.
  std::map<int, std::map<std::string, std::vector<double>>> by_cpu;
  for (const auto& x : usable) {
    const std::string cls = x.at("class").get<std::string>();
    if (level.count(cls)) by_cpu[x.value("cpu", -1)][cls].push_back(x.at("s").get<double>() / level.at(cls));
  }
  for (const auto& [cpu, classes] : by_cpu)
    for (const auto& [cls, v] : classes)
      summary["by_cpu"][std::to_string(cpu)][cls] = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  const sim::SpeedProbe now{level.at("matmul"), level.at("elementwise"), level.at("dispatch"),
                            level.count("matmul_bf16") ? level.at("matmul_bf16") : 0.0};
  // The runs' comm-state readings by rank count: their median over the validation.
  std::map<int, std::vector<double>> comm_readings;
  for (const auto& c : out)
    if (c.status == "ok") comm_readings[c.c.ranks].insert(comm_readings[c.c.ranks].end(), c.comm_state_s.begin(), c.comm_state_s.end());
  std::vector<std::pair<int, double>> comm;
  for (auto& [n, v] : comm_readings)
    if (!v.empty()) comm.emplace_back(n, median(v));
  for (auto& c : out) {
    if (c.status != "ok") continue;
    predict(m, c.c, o.profile, c, now, false, states, comm);
    c.speed = summary;
  }
  if (o.log) {
    std::vector<std::string> by_class;
    for (const char* cls : sim::SpeedStates::kClasses)
      by_class.push_back(fmt::format("{} {:.2f} / {:.2f}", cls, summary[cls]["mean"].get<double>(),
                                     summary[cls]["profile_mean"].get<double>()));
    o.log(fmt::format("speed states during the runs ({} readings), mean / the profile's: {}", usable.size(),
                      fmt::join(by_class, ", ")));
    if (by_cpu.size() > 1) {
      std::vector<std::string> cores;
      for (const auto& [cpu, classes] : summary["by_cpu"].items())
        cores.push_back(fmt::format("cpu {}: matmul {:.2f}, dispatch {:.2f}", cpu, classes.value("matmul", 0.0),
                                    classes.value("dispatch", 0.0)));
      o.log(fmt::format("speed states by core (mean reading / level): {}", fmt::join(cores, "; ")));
    }
    std::vector<std::string> by_ranks;
    for (auto [n, s] : comm)
      for (auto [rn, rs] : profile.comm_reference)
        if (rn == n) by_ranks.push_back(fmt::format("{} ranks {:.1f} / {:.1f} us", n, s * 1e6, rs * 1e6));
    if (!by_ranks.empty())
      o.log(fmt::format("comm state during the runs (4 KiB allreduce, median), the runs' / the profile's: {}",
                        fmt::join(by_ranks, ", ")));
  }
  return true;
}

// `--replay`: each case's measured figures from the previous validation's
// case of the same label. A case the document lacks, or did not measure,
// fails with the reason.
void replay_measurements(const json& doc, std::vector<CaseOutcome>& out) {
  std::map<std::string, const json*> by_label;
  if (doc.contains("cases") && doc.at("cases").is_array())
    for (const auto& c : doc.at("cases"))
      if (c.is_object() && c.contains("label") && c.at("label").is_string()) by_label[c.at("label").get<std::string>()] = &c;
  auto numbers = [](const json& c, const char* key) {
    std::vector<double> v;
    if (c.contains(key) && c.at(key).is_array())
      for (const auto& x : c.at(key))
        if (x.is_number()) v.push_back(x.get<double>());
    return v;
  };
  auto number = [](const json& c, const char* key, double fallback) {
    return c.contains(key) && c.at(key).is_number() ? c.at(key).get<double>() : fallback;
  };
  auto text = [](const json& c, const char* key) {
    return c.contains(key) && c.at(key).is_string() ? c.at(key).get<std::string>() : std::string();
  };
  for (auto& co : out) {
    if (co.status != "ok") continue;  // the simulator refused it: it never ran
    const auto it = by_label.find(co.c.label());
    if (it == by_label.end()) {
      co.status = "failed";
      co.message = "not in the replayed validation";
      continue;
    }
    const json& c = *it->second;
    co.measured_step_s = number(c, "measured_step_s", 0.0);
    const std::string status = text(c, "status"), message = text(c, "message");
    if (!status.empty() && status != "ok") {
      co.status = "failed";
      co.message = "not measured in the replayed validation: " + status + (message.empty() ? "" : " " + message);
      continue;
    }
    if (co.measured_step_s <= 0) {
      co.status = "failed";
      co.message = "no measured_step_s in the replayed validation (a --predict-only one?)";
      continue;
    }
    co.measured_p10_s = number(c, "measured_p10_s", 0.0);
    co.measured_p90_s = number(c, "measured_p90_s", 0.0);
    if (c.contains("measured_breakdown") && c.at("measured_breakdown").is_object()) co.measured_breakdown = c.at("measured_breakdown");
    co.measured_rounds_s = numbers(c, "measured_rounds_s");
    co.host_steal_pct = number(c, "host_steal_pct", -1.0);
    co.host_steal_rounds_pct = numbers(c, "host_steal_rounds_pct");
    co.comm_state_s = numbers(c, "comm_state_s");
  }
}

}  // namespace

std::vector<CaseOutcome> run_validation(const ValidationMatrix& m, const ValidationOptions& o, json* run_state_readings) {
  if (run_state_readings) *run_state_readings = nullptr;
  const bool runs_cases = !o.predict_only && o.replay.is_null();
  const std::string binary = runs_cases ? exec::find_worker_binary(o.exec_binary) : "";
  if (!o.out_dir.empty() && runs_cases) fs::create_directories(fs::path(o.out_dir) / "runs");
  const size_t n = m.cases.size();
  std::vector<CaseOutcome> out(n);
  std::map<int, sim::SpeedProbe> now;  // predict-only: one probe per rank count, taken now
  for (size_t i = 0; i < n; ++i) {
    out[i].c = m.cases[i];
    const int ranks = m.cases[i].ranks;
    if (o.predict_only && (!o.fixed_speed.empty() || !o.fixed_comm_state.empty())) {
      predict(m, m.cases[i], o.profile, out[i], o.fixed_speed, false, o.fixed_states, o.fixed_comm_state);
      continue;
    }
    if (o.predict_only && !o.speed_probe.empty() && !now.count(ranks)) now[ranks] = probe_speed(m, o, ranks);
    predict(m, m.cases[i], o.profile, out[i], o.predict_only ? now[ranks] : sim::SpeedProbe{});
  }
  auto log_case = [&](size_t i, const std::string& round, const CaseOutcome& co) {
    if (!o.log) return;
    const std::string head = fmt::format("{}[{}/{}] {}", round, i + 1, n, co.c.label());
    if (co.status != "ok") o.log(fmt::format("{}: {} {}", head, co.status, co.message));
    else if (o.predict_only) o.log(fmt::format("{}: predicted {:.2f} ms", head, co.predicted_step_s * 1e3));
    else
      o.log(fmt::format("{}: measured {:.2f} ms, predicted {:.2f} ms ({:+.1f}%)", head, co.measured_step_s * 1e3,
                        co.predicted_step_s * 1e3, error_pct(co.predicted_step_s, co.measured_step_s)));
  };
  if (o.predict_only) {
    for (size_t i = 0; i < n; ++i) log_case(i, "", out[i]);
    return out;
  }
  if (!o.replay.is_null()) {
    replay_measurements(o.replay, out);
    const json readings = o.replay.contains("run_state_readings") && o.replay.at("run_state_readings").is_array()
                              ? o.replay.at("run_state_readings")
                              : json::array();
    // The recorded readings go on with the replay's results whatever this
    // profile makes of them, so that its output can be replayed again.
    if (run_state_readings && !readings.empty()) *run_state_readings = readings;
    if (readings.empty() || !predict_at_run_states(m, o, readings, out)) {
      if (o.log)
        o.log(readings.empty() ? "note: the replayed validation recorded no run states (made without --run-states, or "
                                 "before they were kept): predictions at the profile's own state"
                               : "note: no speed states from the recorded readings (profile without speed states): "
                                 "predictions at the profile's own state");
    }
    for (size_t i = 0; i < n; ++i) log_case(i, "", out[i]);
    return out;
  }
  // Rounds are interleaved (round r runs every case once), so that a slow drift
  // of the machine's speed hits every case alike; a case reports the run whose
  // median step time is the median of its rounds (step time and breakdown together).
  for (size_t i = 0; i < n; ++i)
    if (out[i].status != "ok") log_case(i, "", out[i]);  // the simulator refused it: nothing to run
  std::vector<std::vector<CaseOutcome>> runs(n);
  int run_counter = 0;
  // --run-states: the probes' quick readings, from at most kStateProbes probes
  // spread evenly over the runs (a probe costs 1.7-2.4 s here, mostly LibTorch's start).
  json state_readings = json::array();
  const auto runnable = std::count_if(out.begin(), out.end(), [](const CaseOutcome& c) { return c.status == "ok"; });
  const int states_stride = std::max(1, static_cast<int>(std::ceil(static_cast<double>(runnable * m.repeats) / kStateProbes)));
  for (int rep = 0; rep < m.repeats; ++rep) {
    const std::string round = m.repeats > 1 ? fmt::format("round {}/{} ", rep + 1, m.repeats) : "";
    for (size_t i = 0; i < n; ++i) {
      CaseOutcome& co = out[i];
      if (co.status != "ok") continue;
      const ValidationCase& c = co.c;
      const std::string name = fmt::format("{:03d}-{}-{}-x{}-{}-mb{}-r{}", i + 1, c.model, c.strategy, c.ranks,
                                           c.precision, c.micro_batch, rep);
      const fs::path dir = o.out_dir.empty() ? fs::temp_directory_path() : fs::path(o.out_dir) / "runs";
      const std::string result = (dir / (name + ".json")).string();
      fs::remove(result);
      // Each run is predicted at the machine's speed measured just before it.
      CaseOutcome run = co;
      if (!o.speed_probe.empty()) predict(m, c, o.profile, run, probe_speed(m, o, c.ranks));
      if (!o.states_probe.empty() && run_counter % states_stride == 0)
        probe_states(m, o, run_counter / states_stride, state_readings);
      // A fresh store port per run: the previous store's socket may linger in TIME_WAIT.
      const int port = m.netns.port + (run_counter++ % 500);
      const bool traced = !o.trace_path.empty() && static_cast<int>(i) == o.trace_case && rep == m.repeats - 1;
      const std::string trace = traced ? (dir / (name + ".trace.json")).string() : "";
      const CpuTimes cpu_before = read_cpu_times();
      exec::GroupOutcome g = exec::run_process_group(launch_specs(m, c, binary, result, port, trace), o.case_timeout_s);
      run.host_steal_pct = steal_pct(cpu_before, read_cpu_times());
      if (!g.ok || !fs::exists(result)) {
        co.status = "failed";
        co.message = g.timed_out ? "timed out" : g.failure;
        log_case(i, round, co);
        continue;
      }
      std::ifstream f(result);
      const json doc = json::parse(f);
      read_exec_result(doc, run);
      log_case(i, round, run);
      if (traced) write_side_by_side(m, o, run, doc, trace);
      runs[i].push_back(std::move(run));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (out[i].status != "ok" || runs[i].empty()) continue;
    auto& r = runs[i];
    std::vector<double> comm_readings;  // every round's comm-state readings, in run order
    for (const auto& run : r) comm_readings.insert(comm_readings.end(), run.comm_state_s.begin(), run.comm_state_s.end());
    std::sort(r.begin(), r.end(),
              [](const CaseOutcome& a, const CaseOutcome& b) { return a.measured_step_s < b.measured_step_s; });
    out[i] = r[r.size() / 2];
    if (r.size() > 1) {
      out[i].comm_state_s = comm_readings;
      for (const auto& run : r) {
        out[i].measured_rounds_s.push_back(run.measured_step_s);
        out[i].host_steal_rounds_pct.push_back(run.host_steal_pct);
      }
    }
  }
  if (!o.states_probe.empty()) {
    if (predict_at_run_states(m, o, state_readings, out)) {
      if (run_state_readings) *run_state_readings = state_readings;
    } else if (o.log) {
      o.log("note: no speed states from the runs (profile without speed states, or the probes failed): "
            "the predictions are the profile's own");
    }
  }
  return out;
}

}  // namespace dptwin::validate
