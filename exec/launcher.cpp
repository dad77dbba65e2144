// exec/launcher.cpp — see launcher.hpp.
#include "exec/launcher.hpp"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "exec/atomic_file.hpp"

#ifndef DPTWIN_EXEC_WORKER_PATH
#define DPTWIN_EXEC_WORKER_PATH ""
#endif

namespace dptwin::exec {
namespace {

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::vector<std::pair<std::string, std::string>> thread_env(const ExecOptions& o) {
  const std::string t = std::to_string(o.threads);
  return {{"OMP_NUM_THREADS", t}, {"OPENBLAS_NUM_THREADS", t}, {"MKL_NUM_THREADS", t}};
}

void print_summary(const std::string& path) {
  std::ifstream in(path);
  if (!in) return;
  nlohmann::json r;
  try {
    in >> r;
    const auto& s = r.at("summary");
    const auto& c = r.at("config");
    std::fprintf(stderr,
                 "dptwin exec: %s np=%d backend=%s model=%s: median step %.4f s (p10 %.4f, p90 %.4f), %.0f tokens/s, "
                 "loss %.4f -> %.4f, peak RSS %.0f MiB; result in %s\n",
                 c.at("strategy").get<std::string>().c_str(), r.at("world").get<int>(),
                 c.at("backend").get<std::string>().c_str(), c.at("model").get<std::string>().c_str(),
                 s.at("step_time_s").at("median").get<double>(), s.at("step_time_s").at("p10").get<double>(),
                 s.at("step_time_s").at("p90").get<double>(), s.at("tokens_per_s").get<double>(),
                 s.at("loss_first").get<double>(), s.at("loss_last").get<double>(),
                 s.at("peak_rss_bytes").get<double>() / (1024.0 * 1024.0), path.c_str());
  } catch (const std::exception&) {
    // A summary is a courtesy; the result file is the product.
  }
}

}  // namespace

int online_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string find_worker_binary(const std::string& hint) {
  if (!hint.empty()) return hint;
  if (const char* env = std::getenv("DPTWIN_EXEC_WORKER"); env && *env) return env;
  const std::string dir = self_dir();
  for (const std::string& cand : {dir + "/dptwin-exec", dir + "/../exec/dptwin-exec"})
    if (executable(cand)) return cand;
  if (executable(DPTWIN_EXEC_WORKER_PATH)) return DPTWIN_EXEC_WORKER_PATH;
  return "dptwin-exec";
}

std::vector<ProcessSpec> plan_launch(const ExecOptions& o, const std::vector<std::string>& worker_args,
                                     const std::string& worker, const std::string& store_dir) {
  std::vector<ProcessSpec> specs;
  const auto tenv = thread_env(o);
  if (o.backend == "mpi") {
    ProcessSpec s;
    s.label = "mpirun";
    const bool bind = !bind_cpus(o.bind, 0, o.np, o.threads, usable_cores()).empty();
    s.argv = {"mpirun", "-np", std::to_string(o.np), "--bind-to", bind ? "core" : "none"};
    if (bind && o.threads > 1) s.argv.insert(s.argv.end(), {"--map-by", fmt::format("slot:PE={}", o.threads)});
    if (o.np > online_cores()) s.argv.push_back("--oversubscribe");
    if (::geteuid() == 0) s.argv.push_back("--allow-run-as-root");
    for (const auto& [k, v] : tenv) {
      s.argv.push_back("-x");
      s.argv.push_back(k + "=" + v);
    }
    s.argv.push_back(worker);
    s.argv.insert(s.argv.end(), worker_args.begin(), worker_args.end());
    s.env = tenv;
    s.env.push_back({"DPTWIN_LAUNCHED", "1"});
    specs.push_back(std::move(s));
    return specs;
  }
  const int procs = o.backend == "fake" ? 1 : o.np;
  for (int r = 0; r < procs; ++r) {
    ProcessSpec s;
    s.label = o.backend == "fake" ? "fake ranks" : fmt::format("rank {}", r);
    s.argv = {worker};
    s.argv.insert(s.argv.end(), worker_args.begin(), worker_args.end());
    s.env = tenv;
    if (o.backend != "fake") {
      s.cpus = bind_cpus(o.bind, r, procs, o.threads, usable_cores());
      s.env.push_back({"RANK", std::to_string(r)});
      s.env.push_back({"LOCAL_RANK", std::to_string(r)});
      s.env.push_back({"LOCAL_WORLD_SIZE", std::to_string(o.np)});
      s.env.push_back({"WORLD_SIZE", std::to_string(o.np)});
      if (o.store.empty()) s.env.push_back({"DPTWIN_STORE", "file:" + store_dir + "/store"});
    }
    s.env.push_back({"DPTWIN_LAUNCHED", "1"});
    specs.push_back(std::move(s));
  }
  return specs;
}

int run_exec_command(int argc, char** argv) {
  ExecOptions o;
  if (auto code = parse_exec_options_or_exit(argc, argv, "dptwin exec", o)) return *code;
  std::vector<std::string> worker_args(argv + 1, argv + argc);
  const std::string worker = find_worker_binary(o.worker);
  std::string store_dir;
  try {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dptwin-exec-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    store_dir = tmpl;
    const auto specs = plan_launch(o, worker_args, worker, store_dir);
    const auto outcome = run_process_group(specs, o.launch_timeout_s);
    std::error_code ec;
    std::filesystem::remove_all(store_dir, ec);
    if (!outcome.ok) {
      std::fprintf(stderr, "dptwin exec: job failed: %s\n", outcome.failure.c_str());
      for (const auto& r : outcome.results)
        if (r.signal != 0 || r.exit_code != 0) std::fprintf(stderr, "  %s\n", describe(r).c_str());
      return kExitRuntimeError;
    }
  } catch (const std::exception& e) {
    if (!store_dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(store_dir, ec);
    }
    std::fprintf(stderr, "dptwin exec: error: %s\n", e.what());
    return kExitRuntimeError;
  }
  if (!o.out.empty()) print_summary(o.out);
  return 0;
}

}  // namespace dptwin::exec
