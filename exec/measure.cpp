// exec/measure.cpp — see measure.hpp.
#include "exec/measure.hpp"

#include <sys/resource.h>

namespace dptwin::exec {

void Recorder::set_epoch(std::chrono::steady_clock::time_point origin) {
  const int64_t shift = std::chrono::duration_cast<std::chrono::nanoseconds>(origin - epoch_).count();
  std::lock_guard<std::mutex> lock(mu_);
  epoch_ = origin;
  for (auto& s : spans_) {
    if (s.launch_ns >= 0) s.launch_ns -= shift;
    s.start_ns -= shift;
    s.end_ns -= shift;
  }
}

void Recorder::add(Span s) {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.push_back(std::move(s));
}

std::vector<Span> Recorder::spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spans_;
}

void Recorder::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.clear();
}

ScopedSpan::ScopedSpan(Recorder* rec, std::string name, std::string stream) : rec_(rec) {
  if (!rec_) return;
  span_.name = std::move(name);
  span_.stream = std::move(stream);
  span_.step = rec_->step();
  span_.start_ns = rec_->now_ns();
}

ScopedSpan::~ScopedSpan() {
  if (!rec_) return;
  span_.end_ns = rec_->now_ns();
  rec_->add(std::move(span_));
}

int64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace dptwin::exec
