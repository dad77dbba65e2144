// exec/strategy_ddp.cpp — `dps`: DistributedDataParallel semantics.
//
// Mechanism (PyTorch DDP's Reducer):
//  * Buckets: parameters in REVERSE registration order (the order gradients
//    become ready in backward) are packed into buckets; the first bucket closes
//    at first_bucket_mb (1 MiB), later ones at bucket_cap_mb (25 MiB); a bucket
//    closes once its size reaches the cap (the last tensor may overshoot), as
//    compute_bucket_assignment_by_size does. Different dtypes never share one.
//  * Gradients are views into the bucket's flat buffer (gradient_as_bucket_view),
//    so autograd accumulates straight into the bucket: no copy in or out.
//  * A post-hook on each parameter's AccumulateGrad node marks it ready; when a
//    bucket's last gradient is ready the bucket is divided by the world size
//    and its allreduce launched asynchronously, in bucket order (a bucket that
//    is ready before an earlier one waits for it), overlapping the rest of
//    backward.
//  * synchronize_gradients() waits for all buckets in order (recorded as
//    "wait": the exposed communication). Gradient accumulation: hooks do
//    nothing on non-final micro-steps (no_sync).
//  * broadcast_buffers: module buffers are broadcast from rank 0 before every
//    forward, coalesced (DDP's _sync_buffers).
//  * Bucket rebuild (Reducer::rebuild_buckets, --rebuild-buckets): during the
//    first synchronized backward the hooks record the order in which gradients
//    became ready; at the start of the second iteration (before its first
//    forward) rank 0's order is broadcast ("broadcast.bucket_order") and every
//    rank rebuilds its buckets in that order with the same caps (first bucket
//    first_bucket_mb, then bucket_cap_mb), so later buckets fill in readiness
//    order. It happens once per run (a resumed run records and rebuilds again).
//    Gradients are re-pointed into the new flat buffers, their values copied;
//    parameters and optimizer state (keyed by parameter) are untouched.
#include <fmt/format.h>

#include "exec/grad_hooks.hpp"
#include "exec/strategy.hpp"

namespace dptwin::exec {
namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into params_
  torch::Tensor flat;
  int pending = 0;
  WorkPtr work;
};

class DdpStrategy final : public Strategy {
 public:
  explicit DdpStrategy(StrategyInputs in)
      : comm_(*in.comm), rec_(in.recorder), opts_(*in.options), buffers_(std::move(in.buffers)) {
    params_ = std::move(in.params);
    std::vector<size_t> reverse(params_.size());
    for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
    build_buckets(reverse);
    record_order_ = opts_.rebuild_buckets;
    install_hooks();
  }

  ~DdpStrategy() override {
    // Hooks capture `this`: remove them (the parameters may outlive us).
    for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }

  void setup() override {
    // DDP broadcasts rank 0's parameters (and buffers) at construction.
    broadcast_coalesced(comm_, params_, 0, 250LL << 20, "broadcast.init");
    if (!buffers_.empty()) broadcast_coalesced(comm_, buffers_, 0, 250LL << 20, "broadcast.buffers");
  }

  void before_forward() override {
    if (record_order_ && ready_order_.size() == params_.size()) rebuild_buckets();
    if (opts_.broadcast_buffers && !buffers_.empty()) broadcast_coalesced(comm_, buffers_, 0, 250LL << 20, "broadcast.buffers");
  }

  void before_backward(bool sync) override {
    sync_ = sync;
    if (!sync) return;
    if (record_order_) ready_order_.clear();
    next_bucket_ = 0;
    for (auto& b : buckets_) {
      b.pending = static_cast<int>(b.params.size());
      b.work.reset();
    }
    std::fill(ready_.begin(), ready_.end(), false);
  }

  void synchronize_gradients() override {
    if (!sync_) return;
    ScopedSpan wait(rec_, "wait");
    if (next_bucket_ < buckets_.size()) {
      std::string missing;
      for (size_t i = 0; i < ready_.size(); ++i)
        if (!ready_[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      throw std::runtime_error(fmt::format(
          "dps: backward finished but parameters [{}] produced no gradient (bucket {} of {} never became ready)",
          missing, next_bucket_, buckets_.size()));
    }
    for (auto& b : buckets_) b.work->wait(comm_.timeout());
  }

  void resynchronize_gradients() override {
    // Re-average what is already averaged: every bucket again, in order.
    const double inv = 1.0 / comm_.size();
    for (size_t k = 0; k < buckets_.size(); ++k) {
      buckets_[k].flat.mul_(inv);
      comm_.label_next(fmt::format("allreduce.bucket{}", k));
      buckets_[k].work = comm_.allreduce(buckets_[k].flat);
    }
    ScopedSpan wait(rec_, "wait");
    for (auto& b : buckets_) b.work->wait(comm_.timeout());
  }

  void zero_grad() override {
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) b.flat.zero_();
  }

  std::vector<std::vector<size_t>> gradient_buckets() const override {
    std::vector<std::vector<size_t>> out;
    for (const auto& b : buckets_) out.push_back(b.params);
    return out;
  }

 private:
  // Packs parameters, taken in `order`, into buckets (see the file comment) and
  // points every gradient into its bucket's flat buffer, keeping its values.
  void build_buckets(const std::vector<size_t>& order) {
    const int64_t first_cap = static_cast<int64_t>(opts_.first_bucket_mb * 1024 * 1024);
    const int64_t cap = static_cast<int64_t>(opts_.bucket_cap_mb * 1024 * 1024);
    buckets_.clear();
    bucket_of_.assign(params_.size(), 0);
    ready_.assign(params_.size(), false);
    // One open bucket per dtype.
    std::vector<std::pair<torch::ScalarType, std::pair<size_t, int64_t>>> open;  // dtype -> (bucket, bytes)
    for (size_t r : order) {
      const auto& p = params_[r];
      auto it = std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == p.scalar_type(); });
      if (it == open.end()) {
        buckets_.emplace_back();
        open.push_back({p.scalar_type(), {buckets_.size() - 1, 0}});
        it = open.end() - 1;
      }
      auto& [bucket, bytes] = it->second;
      buckets_[bucket].params.push_back(r);
      bucket_of_[r] = bucket;
      bytes += p.numel() * static_cast<int64_t>(p.element_size());
      const int64_t limit = buckets_.size() == 1 && bucket == 0 ? first_cap : cap;
      if (bytes >= limit) {
        open.erase(it);  // closed; the next parameter of this dtype opens a new bucket
      }
    }
    // Flat buffers; gradients become views into them.
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) {
      int64_t n = 0;
      for (size_t i : b.params) n += params_[i].numel();
      b.flat = torch::zeros({n}, params_[b.params[0]].options());
      int64_t off = 0;
      for (size_t i : b.params) {
        auto& p = params_[i];
        auto view = b.flat.narrow(0, off, p.numel()).view(p.sizes());
        if (p.grad().defined()) view.copy_(p.grad());
        p.mutable_grad() = view;
        off += p.numel();
      }
    }
  }

  // Once, at the start of the second iteration: every rank adopts rank 0's
  // readiness order (DDP's sync_bucket_indices) and rebuilds its buckets.
  void rebuild_buckets() {
    record_order_ = false;
    auto order = torch::tensor(std::vector<int64_t>(ready_order_.begin(), ready_order_.end()), torch::kLong)
                     .to(params_[0].device());
    comm_.label_next("broadcast.bucket_order");
    comm_.broadcast(order, 0)->wait(comm_.timeout());
    order = order.cpu();
    const int64_t* from_root = order.data_ptr<int64_t>();
    std::vector<size_t> agreed(params_.size());
    std::vector<bool> seen(params_.size(), false);
    for (size_t k = 0; k < agreed.size(); ++k) {
      const int64_t i = from_root[k];
      if (i < 0 || static_cast<size_t>(i) >= params_.size() || seen[static_cast<size_t>(i)])
        throw std::runtime_error(fmt::format("dps: rank 0's gradient order is not a permutation (entry {} = {})", k, i));
      seen[static_cast<size_t>(i)] = true;
      agreed[k] = static_cast<size_t>(i);
    }
    build_buckets(agreed);
    ready_order_.clear();
  }

  void install_hooks() {
    for (size_t i = 0; i < params_.size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
      hook_keys_.push_back(acc->add_post_hook(std::make_unique<PostHook>([this, i] { on_grad_ready(i); })));
      accumulators_.push_back(std::move(acc));  // keep the nodes (and hooks) alive
    }
  }

  void on_grad_ready(size_t i) {
    if (!sync_ || ready_[i]) return;
    ready_[i] = true;
    if (record_order_) ready_order_.push_back(i);
    if (--buckets_[bucket_of_[i]].pending > 0) return;
    // Launch every consecutive ready bucket, in bucket order.
    const double inv = 1.0 / comm_.size();
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
      auto& b = buckets_[next_bucket_];
      {
        torch::NoGradGuard no_grad;
        b.flat.mul_(inv);
      }
      comm_.label_next(fmt::format("allreduce.bucket{}", next_bucket_));
      b.work = comm_.allreduce(b.flat);
      ++next_bucket_;
    }
  }

  Communicator& comm_;
  Recorder* rec_;
  const ExecOptions& opts_;
  std::vector<torch::Tensor> buffers_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> ready_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool record_order_ = false;        // until the rebuild: record the readiness order
  std::vector<size_t> ready_order_;  // parameter indices in the order their gradients became ready
};

}  // namespace

std::unique_ptr<Strategy> make_ddp_strategy(StrategyInputs in) { return std::make_unique<DdpStrategy>(std::move(in)); }

}  // namespace dptwin::exec
