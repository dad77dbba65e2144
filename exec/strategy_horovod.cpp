// exec/strategy_horovod.cpp — `horovod`: hvd.DistributedOptimizer semantics.
//
// Mechanism (Horovod 0.21):
//  * Gradient hooks (AccumulateGrad post-hooks) only enqueue a request "tensor
//    i is ready" for the background thread; backward is never blocked.
//  * A background thread wakes every cycle_time_ms and negotiates with the
//    other ranks which tensors are ready everywhere: the first time through
//    rank 0 as coordinator (requests reduced onto rank 0, the response list
//    broadcast back); once every tensor has been negotiated, with the response
//    cache's bit-vector allreduce (hvd_cache). The loop ticks even when idle,
//    as Horovod's does. It runs on its own channel (Communicator::split), so it
//    never interleaves with the main thread's collectives.
//  * Ready tensors are packed, in response order, into a fusion buffer of up to
//    fusion_threshold_mb, allreduced (sum), copied back and divided by the
//    world size (Horovod's Average). A tensor alone in its group is reduced in place.
//    The allreduce is the backend's, or (--hvd-ring) dptwin's own ring over
//    send/recv (ring_allreduce in comm.hpp).
//  * synchronize_gradients() waits until every gradient has been reduced
//    (recorded as "wait"). resynchronize_gradients() (the paper's second
//    optimizer.step()) requests every tensor again.
#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <thread>

#include "exec/grad_hooks.hpp"
#include "exec/strategy.hpp"

namespace dptwin::exec {
namespace {

class HorovodStrategy final : public Strategy {
 public:
  explicit HorovodStrategy(StrategyInputs in)
      : comm_(*in.comm), rec_(in.recorder), opts_(*in.options), n_(in.params.size()) {
    params_ = std::move(in.params);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : params_) p.mutable_grad() = torch::zeros_like(p);
    }
    requested_.assign(n_, 0);
    for (size_t i = 0; i < n_; ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
      hook_keys_.push_back(acc->add_post_hook(std::make_unique<PostHook>([this, i] { on_grad_ready(i); })));
      accumulators_.push_back(std::move(acc));
    }
    hvd_comm_ = comm_.split("horovod");
    hvd_comm_->set_recorder(rec_);
    hvd_comm_->set_waiters_idle(false);  // the loop waits while backward computes
    threshold_ = static_cast<int64_t>(opts_.fusion_threshold_mb * 1024 * 1024);
    thread_ = std::thread([this] { background_loop(); });
  }

  ~HorovodStrategy() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_requested_ = true;
    }
    // Unwinding after an error: peers may be dead or stalled and never agree to
    // stop; abandon the loop at once (its current wait ends within 100 ms).
    if (std::uncaught_exceptions() > 0) abort_.store(true);
    if (thread_.joinable()) thread_.join();
    for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }

  void setup() override { broadcast_coalesced(comm_, params_, 0, 64LL << 20, "broadcast.init"); }

  void before_backward(bool sync) override {
    std::lock_guard<std::mutex> lock(mu_);
    sync_ = sync;
    if (sync) remaining_ = n_;
  }

  void synchronize_gradients() override {
    ScopedSpan wait(rec_, "wait");
    std::unique_lock<std::mutex> lock(mu_);
    if (!sync_) return;
    const bool done = cv_.wait_for(lock, comm_.timeout(), [&] { return remaining_ == 0 || bg_error_; });
    if (bg_error_) std::rethrow_exception(bg_error_);
    if (!done)
      throw CommTimeout(fmt::format("horovod: {} of {} gradients not reduced within {:.0f} s", remaining_, n_,
                                    comm_.timeout().count()));
  }

  void resynchronize_gradients() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      remaining_ = n_;
      for (size_t i = n_; i-- > 0;) queue_.push_back(i);
      sync_ = true;
    }
    synchronize_gradients();
  }

 private:
  void on_grad_ready(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sync_) queue_.push_back(i);
  }

  void background_loop() {
    try {
      const auto cycle = std::chrono::duration<double, std::milli>(opts_.cycle_time_ms);
      auto next = std::chrono::steady_clock::now();
      for (;;) {
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(cycle);
        const auto now = std::chrono::steady_clock::now();
        if (next < now) next = now;
        std::this_thread::sleep_until(next);
        if (!run_cycle()) return;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      bg_error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  // One Horovod cycle; returns false once every rank asked to stop.
  bool run_cycle() {
    // Host copy for the logic; the exchanged tensor lives where the backend wants
    // it (NCCL: on the GPU of the parameters).
    auto flags = torch::zeros({static_cast<int64_t>(n_) + 1}, torch::kInt);
    auto* f = flags.data_ptr<int32_t>();
    bool any_local = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i : queue_) requested_[i] = 1;
      queue_.clear();
      for (size_t i = 0; i < n_; ++i) {
        f[i] = requested_[i];
        any_local = any_local || requested_[i];
      }
      f[n_] = stop_requested_ ? 1 : 0;
    }
    // Idle ticks are not recorded (they would flood the trace); real negotiations are.
    hvd_comm_->set_recording(any_local);
    const auto device = params_[0].device();
    auto wire = device.is_cpu() ? flags : flags.to(device);
    if (opts_.hvd_cache && cache_warm_) {
      hvd_comm_->label_next("hvd.negotiate.bitvector");
      wait_or_abandon(hvd_comm_->allreduce(wire, ReduceOp::Min));
    } else {
      hvd_comm_->label_next("hvd.negotiate.request");
      wait_or_abandon(hvd_comm_->reduce(wire, 0, ReduceOp::Min));
      hvd_comm_->label_next("hvd.negotiate.response");
      wait_or_abandon(hvd_comm_->broadcast(wire, 0));
    }
    if (!device.is_cpu()) flags.copy_(wire.cpu());
    hvd_comm_->set_recording(true);
    if (f[n_] == 1) return false;
    std::vector<size_t> ready;
    for (size_t i = n_; i-- > 0;)
      if (f[i]) ready.push_back(i);
    if (ready.empty()) return true;
    reduce_fused(ready);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i : ready) {
      requested_[i] = 0;
      negotiated_once_ += seen_[i] ? 0 : 1;
      seen_[i] = true;
    }
    if (negotiated_once_ == n_) cache_warm_ = true;
    remaining_ -= std::min(remaining_, ready.size());
    cv_.notify_all();
    return true;
  }

  void reduce_fused(const std::vector<size_t>& ready) {
    torch::NoGradGuard no_grad;
    const double inv = 1.0 / comm_.size();
    size_t k = 0;
    while (k < ready.size()) {
      // Next group: same dtype, up to the fusion threshold.
      std::vector<size_t> group{ready[k]};
      int64_t bytes = params_[ready[k]].numel() * static_cast<int64_t>(params_[ready[k]].element_size());
      size_t j = k + 1;
      for (; j < ready.size(); ++j) {
        const auto& g = params_[ready[j]];
        const int64_t b = g.numel() * static_cast<int64_t>(g.element_size());
        if (bytes + b > threshold_ || g.scalar_type() != params_[ready[k]].scalar_type()) break;
        group.push_back(ready[j]);
        bytes += b;
      }
      k = j;
      if (group.size() == 1) {
        auto g = params_[group[0]].grad();
        allreduce(g, "hvd.allreduce");
        g.mul_(inv);
        continue;
      }
      const auto dtype = params_[group[0]].scalar_type();
      if (!fusion_.defined() || fusion_.scalar_type() != dtype || fusion_.numel() * fusion_.element_size() < bytes)
        fusion_ = torch::empty({bytes / static_cast<int64_t>(params_[group[0]].element_size())},
                               params_[group[0]].options());
      int64_t off = 0;
      for (size_t i : group) {
        const auto n = params_[i].numel();
        fusion_.narrow(0, off, n).copy_(params_[i].grad().view({-1}));
        off += n;
      }
      auto flat = fusion_.narrow(0, 0, off);
      allreduce(flat, "hvd.allreduce.fused");
      off = 0;
      for (size_t i : group) {
        const auto n = params_[i].numel();
        params_[i].mutable_grad().view({-1}).copy_(flat.narrow(0, off, n)).mul_(inv);
        off += n;
      }
    }
  }

  // Sum over ranks: the backend's allreduce, or dptwin's ring over send/recv (--hvd-ring).
  void allreduce(torch::Tensor& t, const char* label) {
    if (opts_.hvd_ring) {
      ring_allreduce(*hvd_comm_, t);
      return;
    }
    hvd_comm_->label_next(label);
    wait_or_abandon(hvd_comm_->allreduce(t));
  }

  // Waits in slices so that an abandoned loop (abort_) stops within 100 ms.
  void wait_or_abandon(const WorkPtr& w) {
    const auto deadline = std::chrono::steady_clock::now() + comm_.timeout();
    for (;;) {
      if (abort_.load()) throw CommError("horovod: loop abandoned");
      try {
        w->wait(std::chrono::milliseconds(100));
        return;
      } catch (const CommTimeout&) {
        if (std::chrono::steady_clock::now() >= deadline) throw;
      }
    }
  }

  Communicator& comm_;
  Recorder* rec_;
  const ExecOptions& opts_;
  const size_t n_;
  std::unique_ptr<Communicator> hvd_comm_;
  int64_t threshold_ = 0;
  torch::Tensor fusion_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::vector<size_t> queue_;        // ready requests not yet seen by the loop
  std::vector<int32_t> requested_;   // requested locally, not yet reduced
  std::vector<bool> seen_ = std::vector<bool>(n_, false);
  size_t negotiated_once_ = 0;
  bool cache_warm_ = false;
  size_t remaining_ = 0;             // gradients of this step not yet reduced
  bool sync_ = true;
  bool stop_requested_ = false;
  std::atomic<bool> abort_{false};
  std::exception_ptr bg_error_;

  std::thread thread_;  // last
};

}  // namespace

std::unique_ptr<Strategy> make_horovod_strategy(StrategyInputs in) {
  return std::make_unique<HorovodStrategy>(std::move(in));
}

}  // namespace dptwin::exec
