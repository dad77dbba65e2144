#include "sim/engine.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dptwin::sim {

void Simulation::schedule_at(Time at, Action action) {
  DPTWIN_ASSERT(at >= now_, "event scheduled in the past");
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(action);
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::move(action));
  }
  queue_.push(Entry{at, next_seq_++, slot});
}

int64_t Simulation::run(int64_t limit) {
  int64_t n = 0;
  while (!queue_.empty() && n < limit) {
    Entry e = queue_.top();
    queue_.pop();
    now_ = e.at;
    Action action = std::move(slots_[e.slot]);
    free_slots_.push_back(e.slot);
    action();
    ++n;
  }
  processed_ += n;
  return n;
}

double Simulation::jitter_factor(double sigma) {
  if (sigma <= 0) return 1.0;
  std::normal_distribution<double> d(0.0, sigma);
  return std::clamp(1.0 + d(rng_), 0.5, 2.0);
}

}  // namespace dptwin::sim
