// exec/process.hpp — start a group of local processes and supervise them.
//
// run_process_group() forks/execs every spec (each in its own process group,
// so that its own children — e.g. mpirun's ranks — can be signalled too) and
// waits. The first process that fails (non-zero exit or killed by a signal)
// brings the job down: the others get SIGTERM and, after `grace_s`, SIGKILL.
// When `timeout_s` passes, everything is killed the same way. This is how a
// dead rank never leaves its peers hanging in a collective.
//
// Torch-free. Thread-safety: call from one thread; it reaps only its children.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace dptwin::exec {

struct ProcessSpec {
  std::vector<std::string> argv;                          // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;   // added to / overriding the parent's environment
  std::string label;                                      // e.g. "rank 3", used in messages
  // Bind the process and all its threads to these CPUs (sched_setaffinity),
  // given as indices into the CPUs the launcher may use (usable_cpus(): in a
  // container limited to CPUs 4-5, index 0 is CPU 4); empty: unbound.
  std::vector<int> cpus;
};

// The CPUs rank `rank` of `ranks` (each with `threads` intra-op threads) is
// bound to on a machine of `cores` CPUs, by policy: "none" binds nothing;
// "core" gives rank r the cores r*threads .. r*threads+threads-1 (modulo
// `cores`, so more ranks than cores share them in turn); "auto" is "core"
// while ranks x threads fit the cores and "none" beyond (OpenMPI's default:
// bind to cores up to the cores, nothing when oversubscribed). Binding keeps
// a rank's threads (Gloo's, Horovod's loop) off the other ranks' cores: woken
// unbound, they queue behind another rank's compute for up to a scheduler tick.
std::vector<int> bind_cpus(const std::string& policy, int rank, int ranks, int threads, int cores);

// The CPUs this process may run on (sched_getaffinity), ascending; the
// count is the `cores` to bind within.
std::vector<int> usable_cpus();
inline int usable_cores() { return std::max<int>(1, static_cast<int>(usable_cpus().size())); }

struct ProcessResult {
  std::string label;
  int pid = 0;
  int exit_code = 0;      // valid when signal == 0
  int signal = 0;         // signal that ended it, 0 if it exited
  bool killed_by_us = false;
};

struct GroupOutcome {
  std::vector<ProcessResult> results;  // in spec order
  bool ok = false;                     // every process exited 0
  bool timed_out = false;
  std::string failure;                 // first failure, e.g. "rank 2 (pid 123) killed by signal 9 (Killed)"
};

GroupOutcome run_process_group(const std::vector<ProcessSpec>& specs, double timeout_s, double grace_s = 5.0);

// "rank 2 (pid 123) exited with code 1" / "... killed by signal 9 (Killed)".
std::string describe(const ProcessResult& r);

}  // namespace dptwin::exec
