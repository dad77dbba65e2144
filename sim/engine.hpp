// sim/engine.hpp — the discrete-event engine.
//
// A Simulation owns its clock, its event queue and its random stream; nothing
// is global, so a sweep can run many Simulations at once in one process and
// tests need no reset. Events are owned, move-only callables scheduled at an
// integer Time; events at the same time run in the order they were scheduled
// (deterministic for the same inputs and seed).
//
// Thread-safety: one Simulation per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/units.hpp"

namespace dptwin::sim {

// A move-only `void()` callable (std::move_only_function is C++23).
class Action {
 public:
  Action() = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Action>>>
  Action(F&& f) : impl_(std::make_unique<Model<std::decay_t<F>>>(std::forward<F>(f))) {}
  Action(Action&&) noexcept = default;
  Action& operator=(Action&&) noexcept = default;
  explicit operator bool() const { return impl_ != nullptr; }
  void operator()() { impl_->call(); }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual void call() = 0;
  };
  template <typename F>
  struct Model final : Concept {
    explicit Model(F&& f) : fn(std::move(f)) {}
    explicit Model(const F& f) : fn(f) {}
    void call() override { fn(); }
    F fn;
  };
  std::unique_ptr<Concept> impl_;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed = 1) : rng_(seed) {}
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  Time now() const { return now_; }

  // Runs `action` at time `at`. REQUIRES: at >= now().
  void schedule_at(Time at, Action action);
  void schedule_in(Time delay, Action action) { schedule_at(now_ + delay, std::move(action)); }

  // Processes events until the queue is empty (or `limit` events ran).
  // Returns the number of events processed by this call.
  int64_t run(int64_t limit = INT64_MAX);

  int64_t events_processed() const { return processed_; }
  size_t pending() const { return queue_.size(); }

  std::mt19937_64& rng() { return rng_; }
  // A factor 1 + N(0, sigma) clamped to [0.5, 2]; exactly 1 when sigma == 0
  // (and then the random stream is not advanced).
  double jitter_factor(double sigma);

 private:
  struct Entry {
    Time at;
    uint64_t seq;
    uint32_t slot;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  Time now_;
  uint64_t next_seq_ = 0;
  int64_t processed_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_;
  std::vector<Action> slots_;
  std::vector<uint32_t> free_slots_;
  std::mt19937_64 rng_;
};

}  // namespace dptwin::sim
