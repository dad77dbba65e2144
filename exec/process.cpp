// exec/process.cpp — see process.hpp.
#include "exec/process.hpp"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dptwin::exec {
namespace {

pid_t spawn(const ProcessSpec& spec) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& [k, v] : spec.env) overridden = overridden || k == key;
    if (!overridden) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (!spec.cpus.empty()) {
    const std::vector<int> usable = usable_cpus();
    for (int i : spec.cpus) {
      const int c = usable.empty() ? i : usable[static_cast<size_t>(std::max(i, 0)) % usable.size()];
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &mask);
    }
  }

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    // Bound before exec, so every thread the program starts inherits the mask.
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof mask, &mask) != 0)
      std::fprintf(stderr, "dptwin: warning: %s runs unbound: sched_setaffinity failed: %s\n", spec.label.c_str(),
                   std::strerror(errno));
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "dptwin: cannot execute '%s': %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, to avoid racing the child
  return pid;
}

void signal_group(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

// A descriptor that becomes readable when `pid` exits (Linux 5.3+), -1 where
// the kernel or a seccomp filter refuses it.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// Sleeps until one of the `watched` processes exits or `limit` passes. The
// ranks being timed share the launcher's cores: waking it every few
// milliseconds to poll would preempt them, so it sleeps on the children's
// pidfds and polls (every 5 ms) only where one could not be opened.
void wait_for_exit(const std::vector<int>& pidfds, const std::vector<bool>& watched, std::chrono::milliseconds limit) {
  std::vector<pollfd> fds;
  for (size_t i = 0; i < pidfds.size(); ++i) {
    if (!watched[i]) continue;
    if (pidfds[i] < 0) limit = std::min(limit, std::chrono::milliseconds(5));
    else fds.push_back({pidfds[i], POLLIN, 0});
  }
  const int ms = static_cast<int>(std::max<int64_t>(1, limit.count()));
  if (fds.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  else ::poll(fds.data(), fds.size(), ms);  // EINTR: the caller reaps and comes back
}

}  // namespace

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> bind_cpus(const std::string& policy, int rank, int ranks, int threads, int cores) {
  if (policy != "none" && policy != "core" && policy != "auto")
    throw std::invalid_argument(fmt::format("binding policy '{}': expected auto, core or none", policy));
  threads = std::max(1, threads);
  cores = std::max(1, cores);
  if (policy == "none" || (policy == "auto" && ranks * threads > cores)) return {};
  std::vector<int> cpus;
  for (int i = 0; i < std::min(threads, cores); ++i) cpus.push_back((rank * threads + i) % cores);
  return cpus;
}

std::string describe(const ProcessResult& r) {
  if (r.signal != 0)
    return fmt::format("{} (pid {}) killed by signal {} ({}){}", r.label, r.pid, r.signal, ::strsignal(r.signal),
                       r.killed_by_us ? " [terminated by the launcher]" : "");
  return fmt::format("{} (pid {}) exited with code {}", r.label, r.pid, r.exit_code);
}

GroupOutcome run_process_group(const std::vector<ProcessSpec>& specs, double timeout_s, double grace_s) {
  using clock = std::chrono::steady_clock;
  GroupOutcome out;
  out.results.resize(specs.size());
  std::vector<bool> running(specs.size(), false);
  std::vector<int> pidfds(specs.size(), -1);
  size_t alive = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.results[i].label = specs[i].label.empty() ? fmt::format("process {}", i) : specs[i].label;
    out.results[i].pid = static_cast<int>(spawn(specs[i]));
    pidfds[i] = open_pidfd(out.results[i].pid);
    running[i] = true;
    ++alive;
  }
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  clock::time_point kill_at = clock::time_point::max();
  bool terminating = false;

  auto terminate_all = [&](const std::string& why) {
    if (terminating) return;
    terminating = true;
    if (out.failure.empty()) out.failure = why;
    for (size_t i = 0; i < specs.size(); ++i)
      if (running[i]) {
        out.results[i].killed_by_us = true;
        signal_group(out.results[i].pid, SIGTERM);
      }
    kill_at = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(grace_s));
  };

  while (alive > 0) {
    bool reaped = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!running[i]) continue;
      int status = 0;
      if (::waitpid(out.results[i].pid, &status, WNOHANG) != out.results[i].pid) continue;
      reaped = true;
      running[i] = false;
      --alive;
      auto& r = out.results[i];
      if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
      else r.exit_code = WEXITSTATUS(status);
      if ((r.signal != 0 || r.exit_code != 0) && !r.killed_by_us) terminate_all(describe(r));
    }
    if (reaped) continue;
    const auto now = clock::now();
    if (!terminating && now >= deadline) {
      out.timed_out = true;
      terminate_all(fmt::format("the job did not finish within {:.0f} s", timeout_s));
    }
    if (terminating && now >= kill_at) {
      for (size_t i = 0; i < specs.size(); ++i)
        if (running[i]) signal_group(out.results[i].pid, SIGKILL);
      kill_at = clock::time_point::max();
    }
    const auto next = std::min(terminating ? kill_at : deadline, now + std::chrono::seconds(1));
    wait_for_exit(pidfds, running, std::chrono::ceil<std::chrono::milliseconds>(next - now));
  }
  for (int fd : pidfds)
    if (fd >= 0) ::close(fd);
  out.ok = !terminating;
  for (const auto& r : out.results) out.ok = out.ok && r.signal == 0 && r.exit_code == 0;
  return out;
}

}  // namespace dptwin::exec
