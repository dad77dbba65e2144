// core/host_load.hpp — how much CPU time the hypervisor took from this
// machine while it measured (the "steal" column of /proc/stat).
//
// A virtual machine's vCPUs may wait for the host's cores: that time is
// counted as steal. Calibration and validation record the share stolen over
// their runs, so a reader can tell a quiet measurement from a contended one
// (on the 2-vCPU development VM: 1.9% over its first 8.6 hours, 5-12% in its
// contended phases, where run-to-run times moved by up to 2x).
//
// Pure parsing plus one file read; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dptwin {

// Above this share of stolen CPU time, calibrate and validate warn.
inline constexpr double kStealWarnPct = 2.0;

struct CpuTimes {
  uint64_t total = 0;  // all columns of the aggregate "cpu" line, in clock ticks
  uint64_t steal = 0;  // its 8th column
  bool ok = false;     // parsed
};

// The aggregate "cpu " line of /proc/stat text (not ok when missing or short).
CpuTimes parse_cpu_times(const std::string& proc_stat_text);
// Reads `path` (default /proc/stat); not ok where it does not exist.
CpuTimes read_cpu_times(const std::string& path = "/proc/stat");
// Percent of CPU time stolen between two readings; -1 when either is not ok or no time passed.
double steal_pct(const CpuTimes& before, const CpuTimes& after);
// Which of a run's rounds to keep, given each round's steal (-1: unknown): those
// at or below kStealWarnPct, or every round when none was (unknown counts as calm).
std::vector<bool> calm_rounds(const std::vector<double>& steal_pct);

}  // namespace dptwin
