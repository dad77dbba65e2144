#include "validate/calibrate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/error.hpp"
#include "core/host_load.hpp"
#include "exec/process.hpp"
#include "topology/cluster.hpp"
#include "validate/metrics.hpp"

namespace dptwin::validate {

namespace fs = std::filesystem;
using nlohmann::json;

std::string find_microbench_binary(const std::string& hint) {
  if (!hint.empty()) return hint;
  if (const char* e = std::getenv("DPTWIN_MICROBENCH"); e && *e) return e;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {self.parent_path() / ".." / "exec" / "microbench" / "dptwin-microbench",
                              self.parent_path() / "dptwin-microbench",
                              self.parent_path() / "microbench" / "dptwin-microbench"})
      if (fs::exists(p)) return fs::weakly_canonical(p).string();
  }
  return "dptwin-microbench";
}

namespace {

topology::ClusterSpec cluster_of(const std::string& c) {
  if (c.find('/') != std::string::npos || c.ends_with(".yaml")) return topology::load_cluster(c);
  return topology::load_cluster_preset(c);
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError({}, "microbenchmark", fmt::format("cannot read '{}'", path));
  try {
    return json::parse(f);
  } catch (const std::exception& e) {
    throw InputError({}, "microbenchmark", fmt::format("'{}' is not JSON: {}", path, e.what()));
  }
}

void write_json(const std::string& path, const json& doc) {
  std::ofstream f(path);
  f << doc.dump(1) << "\n";
  if (!f) throw InputError({}, "calibrate", fmt::format("cannot write '{}'", path));
}

std::vector<std::string> common_args(const CalibrateOptions& o) {
  std::vector<std::string> a{"--threads", std::to_string(o.threads), "--budget-s", fmt::format("{}", o.budget_s),
                             "--max-bytes", fmt::format("{:.0f}", o.max_bytes)};
  if (o.quick) a.push_back("--quick");
  return a;
}

void run_group(const std::vector<exec::ProcessSpec>& specs, double timeout_s, const std::string& what) {
  exec::GroupOutcome g = exec::run_process_group(specs, timeout_s);
  if (!g.ok)
    throw InputError({}, "calibrate",
                     fmt::format("{} failed: {}", what, g.timed_out ? std::string("timed out") : g.failure));
}

std::vector<std::pair<std::string, std::string>> thread_env(const CalibrateOptions& o) {
  const std::string th = std::to_string(o.threads);
  return {{"OMP_NUM_THREADS", th}, {"OPENBLAS_NUM_THREADS", th}, {"MKL_NUM_THREADS", th}};
}

// One compute-mode run of dptwin-microbench; its document is kept at compute<sfx>.json.
// Bound (o.bind), pass `pass` runs on the core of rank `pass`: the passes take
// the cores in turn, so the speed states their probes read hold every core's
// slow phases (each core has its own: one at +45% on dispatch for a minute
// while the other stayed fast), as an N-rank step meets them.
json run_compute_pass(const CalibrateOptions& o, const std::string& bin, const fs::path& raw_dir,
                      const std::string& sfx, int pass, std::vector<std::string>& raw) {
  const std::string out = (raw_dir / ("compute" + sfx + ".json")).string();
  exec::ProcessSpec s;
  s.argv = {bin, "--mode", "compute", "--out", out};
  for (auto& a : common_args(o)) s.argv.push_back(a);
  s.env = thread_env(o);
  s.cpus = exec::bind_cpus(o.bind, pass, 1, o.threads, exec::usable_cores());
  s.label = "microbench compute";
  if (o.log)
    o.log(fmt::format("compute microbenchmarks ({} thread(s) per rank{})", o.threads,
                      s.cpus.empty() ? std::string() : fmt::format(", on cpu {}", fmt::join(s.cpus, ","))));
  run_group({s}, o.timeout_s, "the compute microbenchmark");
  raw.push_back(out);
  return read_json(out);
}

// One comm-mode run on `n` ranks (mpirun, forked Gloo ranks with a file store,
// or one rank per network namespace with a TCP store on port + store_run).
json run_comm_pass(const CalibrateOptions& o, const std::string& bin, const fs::path& raw_dir, const std::string& sfx,
                   int n, int store_run, std::vector<std::string>& raw) {
  const std::string out = (raw_dir / fmt::format("comm-{}-{}{}.json", o.backend, n, sfx)).string();
  std::vector<std::string> args{"--mode", "comm", "--backend", o.backend, "--rounds", std::to_string(o.comm_rounds),
                                "--out", out};
  for (auto& a : common_args(o)) args.push_back(a);
  const auto env = thread_env(o);
  std::vector<exec::ProcessSpec> specs;
  if (o.backend == "mpi") {
    exec::ProcessSpec s;
    const bool bind = !exec::bind_cpus(o.bind, 0, n, o.threads, exec::usable_cores()).empty();
    s.argv = {"mpirun", "-np", std::to_string(n), "--oversubscribe", "--bind-to", bind ? "core" : "none"};
    if (bind && o.threads > 1) s.argv.insert(s.argv.end(), {"--map-by", fmt::format("slot:PE={}", o.threads)});
    if (::geteuid() == 0) s.argv.push_back("--allow-run-as-root");
    for (const auto& [k, v] : env) s.argv.insert(s.argv.end(), {"-x", k + "=" + v});
    s.argv.push_back(bin);
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    s.env = env;
    s.label = "mpirun";
    specs.push_back(std::move(s));
  } else {
    const fs::path store_file = raw_dir / fmt::format("store-{}-{}", ::getpid(), n);
    const std::string store = o.emulated ? fmt::format("tcp:{}:{}", o.netns.addresses.at(0), o.netns.port + store_run)
                                         : fmt::format("file:{}", store_file.string());
    if (!o.emulated) fs::remove(store_file);
    for (int r = 0; r < n; ++r) {
      exec::ProcessSpec s;
      if (o.emulated) {
        if (r >= static_cast<int>(o.netns.namespaces.size()))
          throw InputError({}, "--ranks", fmt::format("{} ranks but only {} namespaces", n, o.netns.namespaces.size()));
        s.argv = {"ip", "netns", "exec", o.netns.namespaces[r], bin};
        s.env.push_back({"GLOO_SOCKET_IFNAME", o.netns.interface});
      } else {
        s.argv = {bin};
      }
      s.argv.insert(s.argv.end(), args.begin(), args.end());
      s.env.insert(s.env.end(), env.begin(), env.end());
      s.env.insert(s.env.end(), {{"RANK", std::to_string(r)}, {"WORLD_SIZE", std::to_string(n)}, {"DPTWIN_STORE", store}});
      s.cpus = exec::bind_cpus(o.bind, r, n, o.threads, exec::usable_cores());
      s.label = fmt::format("microbench rank {}", r);
      specs.push_back(std::move(s));
    }
  }
  if (o.log) o.log(fmt::format("communication microbenchmarks: {} ranks, {}", n, o.backend));
  run_group(specs, o.timeout_s, fmt::format("the {}-rank comm microbenchmark", n));
  raw.push_back(out);
  return read_json(out);
}

}  // namespace

json median_of_documents(const std::vector<json>& docs) {
  if (docs.empty()) return nullptr;
  const json& first = docs.front();
  auto all = [&](auto pred) { return std::all_of(docs.begin(), docs.end(), pred); };
  if (first.is_number() && all([](const json& d) { return d.is_number(); })) {
    if (first.is_number_integer() && all([&](const json& d) { return d == first; })) return first;
    std::vector<double> v;
    for (const auto& d : docs) v.push_back(d.get<double>());
    return median(std::move(v));
  }
  if (first.is_object() && all([](const json& d) { return d.is_object(); })) {
    json out = json::object();
    for (const auto& [k, v] : first.items()) {
      if (!all([&k = k](const json& d) { return d.contains(k); })) {
        out[k] = v;
        continue;
      }
      std::vector<json> parts;
      for (const auto& d : docs) parts.push_back(d.at(k));
      out[k] = median_of_documents(parts);
    }
    return out;
  }
  if (first.is_array() && all([&](const json& d) { return d.is_array() && d.size() == first.size(); })) {
    json out = json::array();
    for (size_t i = 0; i < first.size(); ++i) {
      std::vector<json> parts;
      for (const auto& d : docs) parts.push_back(d.at(i));
      out.push_back(median_of_documents(parts));
    }
    return out;
  }
  return first;
}

CalibrateResult run_calibration(const CalibrateOptions& o) {
  CalibrateResult res;
  const CpuTimes cpu_start = read_cpu_times();
  const fs::path raw_dir = !o.raw_dir.empty() ? fs::path(o.raw_dir)
                                              : fs::absolute(o.out).parent_path() / (fs::path(o.out).stem().string() + ".raw");
  json compute;
  std::vector<json> comm;
  json steal_log = json::array();  // host steal of every measured run and attempt
  std::vector<json> compute_passes;
  std::map<std::pair<std::string, int>, std::vector<json>> comm_passes;  // by backend and rank count
  if (!o.inputs.empty()) {
    // The documents of one run, or the passes of one or several runs: several
    // compute documents (or comm documents of one backend and rank count) are
    // merged as the passes of a measured run are.
    for (const auto& p : o.inputs) {
      json d = read_json(p);
      if (d.value("mode", "") == "compute") compute_passes.push_back(std::move(d));
      else comm_passes[{d.value("backend", ""), d.value("ranks", 0)}].push_back(std::move(d));
      res.raw.push_back(p);
    }
    if (compute_passes.empty())
      throw InputError({}, "--input", "no compute-mode microbenchmark document among the inputs");
    // Their probe readings are the rescaling's reference: one form of the add probe.
    for (size_t i = 1; i < compute_passes.size(); ++i)
      if (elementwise_probe_form(compute_passes[i]) != elementwise_probe_form(compute_passes[0]))
        throw InputError({}, "--input",
                         fmt::format("the compute documents read the elementwise speed probe in two forms ({} and {}): "
                                     "refit documents of one dptwin-microbench version",
                                     elementwise_probe_form(compute_passes[0]), elementwise_probe_form(compute_passes[i])));
  } else {
    fs::create_directories(raw_dir);
    const std::string bin = find_microbench_binary(o.microbench);
    const int passes = std::max(1, o.passes);
    int store_run = 0;  // a fresh store port per comm run (emulated), across passes
    // Runs `run` (which writes one raw document) again while the host's steal
    // during it exceeds kStealWarnPct, at most o.steal_retries more times.
    auto calm = [&](const std::string& what, const std::function<json(std::vector<std::string>&)>& run) {
      std::vector<std::string> paths;
      json doc;
      for (int attempt = 0;; ++attempt) {
        paths.clear();
        const CpuTimes before = read_cpu_times();
        doc = run(paths);
        const double st = steal_pct(before, read_cpu_times());
        steal_log.push_back({{"run", what}, {"attempt", attempt + 1}, {"steal_pct", st}});
        if (!(st > kStealWarnPct) || attempt >= o.steal_retries) {
          if (st > kStealWarnPct && o.log)
            o.log(fmt::format("warning: {}: host steal {:.1f}% after {} attempts; its figures follow the host's load",
                              what, st, attempt + 1));
          break;
        }
        if (o.log)
          o.log(fmt::format("{}: the hypervisor took {:.1f}% of the CPU time (over {:.0f}%): measuring it again",
                            what, st, kStealWarnPct));
        std::this_thread::sleep_for(std::chrono::seconds(5));
      }
      res.raw.insert(res.raw.end(), paths.begin(), paths.end());
      return doc;
    };
    for (int pass = 0; pass < passes; ++pass) {
      if (passes > 1 && o.log) o.log(fmt::format("pass {}/{}", pass + 1, passes));
      const std::string sfx = passes > 1 ? fmt::format("-p{}", pass) : "";
      compute_passes.push_back(calm(fmt::format("compute run{}", sfx),
                                    [&](std::vector<std::string>& raw) { return run_compute_pass(o, bin, raw_dir, sfx, pass, raw); }));
      for (int n : o.ranks)
        if (n > 1)
          comm_passes[{o.backend, n}].push_back(calm(fmt::format("comm run, {} ranks{}", n, sfx), [&](std::vector<std::string>& raw) {
            return run_comm_pass(o, bin, raw_dir, sfx, n, store_run++, raw);
          }));
    }
  }
  // Every pass rescaled to the speed all passes' probe readings share (their
  // median), then the median of each figure: a pass in a slow phase of a
  // shared host counts at the common speed, not as a slower machine.
  const SpeedReference ref = probe_reference(compute_passes);
  for (auto& d : compute_passes) d = normalized_to_speed(d, ref);
  compute = median_of_documents(compute_passes);
  const bool several = compute_passes.size() > 1;
  if (several) compute["probe_readings"] = probe_readings(compute_passes);  // the speed states of all passes
  for (auto& [key, docs] : comm_passes) {
    json merged = median_of_documents(normalized_to_comm_state(docs));
    // How far this rank count's collectives followed the comm-state probe
    // from pass to pass: a diagnostic (`.fit.json` comm_state_exponent). With
    // three passes it swung from 0 to 1 between calibrations in a row (rs3,
    // rs4: 0.97, 1.00, 0.00, 0.00 at 2 ranks), so the profile keeps mapping by
    // the ratio itself unless its YAML sets `state_reference: exponent`.
    if (auto e = comm_state_exponent(docs); e && merged.contains("comm_state")) {
      merged["comm_state"]["exponent_fit"] = e->exponent;
      merged["comm_state"]["exponent_pairs"] = e->pairs;
      if (o.log)
        o.log(fmt::format("comm state, {} ranks: pass to pass the collectives followed the 4 KiB allreduce probe "
                          "to the power {:.2f} ({} points; a diagnostic)",
                          key.second, e->exponent, e->pairs));
    }
    comm.push_back(std::move(merged));
  }
  if (several && o.inputs.empty()) {
    // The medians as documents of their own: `--input` refits them like one pass.
    write_json((raw_dir / "compute.json").string(), compute);
    for (const auto& d : comm)
      write_json((raw_dir / fmt::format("comm-{}-{}.json", o.backend, d.value("ranks", 0))).string(), d);
  }
  const topology::ClusterSpec cluster = cluster_of(o.cluster);
  res.fit = fit_profile(compute, comm, o.backend, cluster);
  if (!steal_log.empty()) res.fit.diagnostics["runs_steal_pct"] = steal_log;
  if (o.emulated) res.fit.profile.ranks_share_machine = true;
  // Unbound ranks: one computing rank leaves a core free, and the others'
  // communication threads run there (comm_stall_one 0: the simulator holds a
  // collective only while a member's machine has no core to spare). The
  // overlap probe's reading of it stays a diagnostic (`comm_stall_one_probe`):
  // with unbound ranks it read 0.03-1.0 over ten calibrations, and as a
  // threshold (0.5) that noise moved tiny Horovod x4 by 12% between two
  // calibrations in a row (rb28: 0.26 and 1.0 at 4 ranks). Bound ranks keep
  // the reading.
  for (auto& [n, stall] : res.fit.profile.comm_stall_one_by_ranks)
    if (exec::bind_cpus(o.bind, 0, n, o.threads, exec::usable_cores()).empty()) stall = 0.0;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string name = fs::path(o.out).stem().string();
  std::string where = fmt::format("{} ({} threads/rank, ranks bound: {}, cluster {})", host, o.threads, o.bind, o.cluster);
  // Refits (--input) measured nothing now: the host's load then is unknown.
  const double steal = o.inputs.empty() ? steal_pct(cpu_start, read_cpu_times()) : -1;
  if (steal >= 0) {
    res.fit.diagnostics["host_steal_pct"] = steal;
    where += fmt::format("; host steal {:.1f}% of CPU time while measuring", steal);
    if (steal > kStealWarnPct && o.log)
      o.log(fmt::format("warning: the hypervisor took {:.1f}% of this machine's CPU time during the calibration "
                        "(/proc/stat steal); its figures follow that load: calibrate again when the host is quieter",
                        steal));
  }
  res.fit.profile.calibrated_with = {o.threads, o.bind, o.backend, o.cluster};
  res.yaml = profile_yaml(res.fit.profile, name, where, o.backend);
  {
    std::ofstream f(o.out + ".tmp");
    f << res.yaml;
    f.close();
    if (!f) throw InputError({}, "--out", fmt::format("cannot write '{}'", o.out));
    fs::rename(o.out + ".tmp", o.out);
  }
  {
    std::ofstream f(fs::path(o.out).replace_extension(".fit.json"));
    f << res.fit.diagnostics.dump(1) << "\n";
  }
  return res;
}

}  // namespace dptwin::validate
