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

#include <string>
#include <utility>
#include <vector>

namespace dptwin::exec {

struct ProcessSpec {
  std::vector<std::string> argv;                          // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;   // added to / overriding the parent's environment
  std::string label;                                      // e.g. "rank 3", used in messages
};

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
