// exec/measure.hpp — per-rank recording of timed spans (compute phases, comm ops).
//
// Every rank owns one Recorder. The trainer opens compute spans (forward,
// backward, optimizer, wait, ...) with ScopedSpan; the communication layer adds
// one span per operation (launch time, execution start and end, bytes). Times
// are nanoseconds since the Recorder's epoch (steady clock). The trainer sets
// it after a start-up barrier: to rank 0's clock reading when every rank runs
// on one kernel (same boot id: one steady clock, so cross-rank times are
// exact), else to the barrier's exit (off by the barrier's release skew).
//
// Torch-free. Thread-safety: add()/set_step() may be called from any thread
// (the training thread, backend completion threads, the Horovod loop).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dptwin::exec {

struct Span {
  std::string name;     // "forward", "backward", "optimizer", "wait", "allreduce", ...
  std::string stream;   // "compute" or "comm"
  int step = -1;        // optimizer step the span belongs to
  int64_t launch_ns = -1;  // comm: when the op was issued (start_ns: when it began executing)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;    // comm: payload bytes of this rank's buffer
};

class Recorder {
 public:
  Recorder() : epoch_(std::chrono::steady_clock::now()) {}

  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch_).count();
  }
  // Makes `origin` the origin; spans recorded before are shifted alike.
  void set_epoch(std::chrono::steady_clock::time_point origin);

  void set_step(int step) { step_.store(step, std::memory_order_relaxed); }
  int step() const { return step_.load(std::memory_order_relaxed); }

  void add(Span s);
  std::vector<Span> spans() const;  // a copy, in insertion order
  void clear();

 private:
  std::chrono::steady_clock::time_point epoch_;
  std::atomic<int> step_{-1};
  mutable std::mutex mu_;
  std::vector<Span> spans_;
};

// Records [construction, destruction) as a compute span of the current step.
class ScopedSpan {
 public:
  ScopedSpan(Recorder* rec, std::string name, std::string stream = "compute");
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Recorder* rec_;
  Span span_;
};

// Peak resident set size of this process in bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();

}  // namespace dptwin::exec
