// exec/strategy_ps.cpp — `single` and `sps` (central parameter server on rank 0),
// plus the strategy factory and shared helpers.
//
// sps: each rank computes gradients on its own micro-batches; gradients are
// reduced (summed) onto rank 0 through coalesced buffers of sps_bucket_mb
// (nn.DataParallel's reduce_add_coalesced uses 10 MiB); rank 0 averages, clips,
// steps, and broadcasts the parameters back through buffers of the same size
// (DataParallel's replicate broadcast_coalesced). No overlap with backward:
// the traffic pattern of one endpoint serving all ranks.
//
// sps in one process (--devices-per-process K, nn.DataParallel): the trainer
// runs forward and backward through the DataParallel replica set; this
// strategy copies the parameters of replica 0 onto the others before the first
// forward of every optimizer step (replicate) and reduce-adds the replicas'
// gradients onto replica 0 after the last backward, both as exposed "wait";
// the optimizer steps replica 0 alone. DataParallel replicates on every
// forward and reduces on every backward; with --grad-accum > 1 this does both
// once per optimizer step (the parameters do not change in between, and the
// replicas accumulate their gradients locally).
#include <fmt/format.h>

#include <numeric>

#include "exec/data_parallel.hpp"
#include "exec/strategy.hpp"

namespace dptwin::exec {

void Strategy::zero_grad() {
  torch::NoGradGuard no_grad;
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().zero_();
}

std::vector<std::vector<size_t>> group_by_bytes(const std::vector<torch::Tensor>& tensors,
                                                const std::vector<size_t>& order, int64_t cap_bytes) {
  std::vector<std::vector<size_t>> groups;
  int64_t used = 0;
  for (size_t i : order) {
    const int64_t b = tensors[i].numel() * static_cast<int64_t>(tensors[i].element_size());
    if (groups.empty() || (used + b > cap_bytes && used > 0)) {
      groups.emplace_back();
      used = 0;
    }
    groups.back().push_back(i);
    used += b;
  }
  return groups;
}

void broadcast_coalesced(Communicator& comm, const std::vector<torch::Tensor>& tensors, int root, int64_t cap_bytes,
                         const char* label) {
  torch::NoGradGuard no_grad;
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  // Different dtypes never share a flat buffer.
  std::vector<std::vector<size_t>> by_type;
  for (size_t i : order) {
    bool placed = false;
    for (auto& g : by_type)
      if (tensors[g[0]].scalar_type() == tensors[i].scalar_type()) {
        g.push_back(i);
        placed = true;
        break;
      }
    if (!placed) by_type.push_back({i});
  }
  int k = 0;
  for (const auto& same : by_type) {
    for (const auto& group : group_by_bytes(tensors, same, cap_bytes)) {
      std::vector<torch::Tensor> parts;
      for (size_t i : group) parts.push_back(tensors[i].reshape({-1}));
      auto flat = torch::cat(parts);
      comm.label_next(fmt::format("{}{}", label, k++));
      comm.broadcast(flat, root)->wait(comm.timeout());
      if (comm.rank() != root) {
        int64_t off = 0;
        for (size_t i : group) {
          const int64_t n = tensors[i].numel();
          tensors[i].view({-1}).copy_(flat.narrow(0, off, n));
          off += n;
        }
      }
    }
  }
}

namespace {

class SingleStrategy final : public Strategy {
 public:
  explicit SingleStrategy(StrategyInputs in) { params_ = std::move(in.params); }
  void synchronize_gradients() override {}
  void resynchronize_gradients() override {}
};

class SpsStrategy final : public Strategy {
 public:
  explicit SpsStrategy(StrategyInputs in) : comm_(*in.comm), rec_(in.recorder) {
    params_ = std::move(in.params);
    cap_ = static_cast<int64_t>(in.options->sps_bucket_mb * 1024 * 1024);
  }

  void setup() override { broadcast_coalesced(comm_, params_, 0, cap_, "broadcast.init"); }

  void synchronize_gradients() override {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (auto& p : params_) grads.push_back(p.grad());
    std::vector<size_t> order(grads.size());
    std::iota(order.begin(), order.end(), 0);
    const double inv = 1.0 / comm_.size();
    int k = 0;
    for (const auto& group : group_by_bytes(grads, order, cap_)) {
      std::vector<torch::Tensor> parts;
      for (size_t i : group) parts.push_back(grads[i].reshape({-1}));
      auto flat = torch::cat(parts);
      comm_.label_next(fmt::format("reduce.grad{}", k++));
      auto w = comm_.reduce(flat, 0);
      {
        ScopedSpan wait(rec_, "wait");
        w->wait(comm_.timeout());
      }
      if (comm_.rank() == 0) {
        flat.mul_(inv);
        int64_t off = 0;
        for (size_t i : group) {
          const int64_t n = grads[i].numel();
          grads[i].view({-1}).copy_(flat.narrow(0, off, n));
          off += n;
        }
      }
    }
  }

  bool runs_optimizer() const override { return comm_.rank() == 0; }

  void after_optimizer() override {
    ScopedSpan wait(rec_, "wait");
    broadcast_coalesced(comm_, params_, 0, cap_, "broadcast.param");
  }

  void resynchronize_gradients() override {}  // gradients live on rank 0 only

 private:
  Communicator& comm_;
  Recorder* rec_;
  int64_t cap_;
};

class SpsInProcessStrategy final : public Strategy {
 public:
  explicit SpsInProcessStrategy(StrategyInputs in) : replicas_(*in.replicas), rec_(in.recorder) {
    params_ = std::move(in.params);
  }

  void setup() override {
    ScopedSpan wait(rec_, "wait");
    replicas_.copy_buffers();
  }

  void before_forward() override {
    if (!stale_) return;
    ScopedSpan wait(rec_, "wait");
    replicas_.replicate();
    stale_ = false;
  }

  void synchronize_gradients() override {
    ScopedSpan wait(rec_, "wait");
    replicas_.reduce_gradients();
  }

  void after_optimizer() override { stale_ = true; }
  void resynchronize_gradients() override {}  // gradients live on replica 0 only

 private:
  DataParallel& replicas_;
  Recorder* rec_;
  bool stale_ = true;  // replica parameters differ from replica 0's
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy(StrategyInputs in) { return std::make_unique<SingleStrategy>(std::move(in)); }
std::unique_ptr<Strategy> make_sps_strategy(StrategyInputs in) {
  if (in.replicas) return std::make_unique<SpsInProcessStrategy>(std::move(in));
  return std::make_unique<SpsStrategy>(std::move(in));
}

std::unique_ptr<Strategy> make_strategy(StrategyKind kind, StrategyInputs in) {
  if (kind != StrategyKind::Single && in.comm == nullptr && !(kind == StrategyKind::Sps && in.replicas))
    throw std::invalid_argument("data-parallel strategies need a communicator");
  switch (kind) {
    case StrategyKind::Single: return make_single_strategy(std::move(in));
    case StrategyKind::Sps: return make_sps_strategy(std::move(in));
    case StrategyKind::Dps: return make_ddp_strategy(std::move(in));
    case StrategyKind::Horovod: return make_horovod_strategy(std::move(in));
  }
  return nullptr;
}

}  // namespace dptwin::exec
