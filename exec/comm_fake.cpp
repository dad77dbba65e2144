// exec/comm_fake.cpp — in-process fake backend: ranks are threads of one process.
//
// Each channel is shared by its ranks; each rank runs its operations in order
// on its own OpQueue thread, so operations are asynchronous exactly as with
// MPI. A collective is a rendezvous: every rank deposits its buffers, the last
// one to arrive computes the result for all (in rank order, so every rank gets
// bit-identical results), then all are released. Mismatched collectives (rank 0
// allreduces while rank 1 broadcasts) are reported as CommError.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>
#include <tuple>

#include "exec/comm.hpp"
#include "exec/op_queue.hpp"

namespace dptwin::exec {
namespace {

struct Deposit {
  std::string kind;
  at::Tensor a, b;
  int root = 0;
  ReduceOp op = ReduceOp::Sum;
};

struct FakeChannel {
  explicit FakeChannel(int n) : size(n), slots(static_cast<size_t>(n)) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  std::string error;  // set when a rendezvous failed; every later op fails
  std::vector<Deposit> slots;
  std::map<std::tuple<int, int, int>, std::deque<at::Tensor>> mail;  // (src, dst, tag)
  std::map<std::string, std::shared_ptr<FakeChannel>> children;
};

at::Tensor reduce_all(const std::vector<Deposit>& d, const std::function<at::Tensor(const Deposit&)>& pick,
                      ReduceOp op) {
  const auto type = pick(d[0]).scalar_type();
  const auto acc_type = at::isFloatingType(type) ? (type == at::kDouble ? at::kDouble : at::kFloat) : at::kLong;
  at::Tensor acc = pick(d[0]).to(acc_type).clone();
  for (size_t r = 1; r < d.size(); ++r) {
    const auto x = pick(d[r]).to(acc.scalar_type());
    if (op == ReduceOp::Sum) acc.add_(x);
    else if (op == ReduceOp::Min) acc = at::minimum(acc, x);
    else acc = at::maximum(acc, x);
  }
  return acc;
}

void combine(std::vector<Deposit>& d) {
  const std::string& kind = d[0].kind;
  const int n = static_cast<int>(d.size());
  if (kind == "allreduce") {
    auto acc = reduce_all(d, [](const Deposit& x) { return x.a; }, d[0].op);
    for (auto& x : d) x.a.copy_(acc);
  } else if (kind == "reduce") {
    auto acc = reduce_all(d, [](const Deposit& x) { return x.a; }, d[0].op);
    d[static_cast<size_t>(d[0].root)].a.copy_(acc);
  } else if (kind == "broadcast") {
    const auto& src = d[static_cast<size_t>(d[0].root)].a;
    for (int r = 0; r < n; ++r)
      if (r != d[0].root) d[static_cast<size_t>(r)].a.copy_(src);
  } else if (kind == "allgather") {
    for (auto& x : d) {
      auto chunks = x.b.view({-1}).chunk(n);
      for (int r = 0; r < n; ++r) chunks[static_cast<size_t>(r)].copy_(d[static_cast<size_t>(r)].a.view({-1}));
    }
  } else if (kind == "reduce_scatter") {
    auto acc = reduce_all(d, [](const Deposit& x) { return x.a.view({-1}); }, d[0].op);
    auto chunks = acc.chunk(n);
    for (int r = 0; r < n; ++r) d[static_cast<size_t>(r)].b.view({-1}).copy_(chunks[static_cast<size_t>(r)]);
  }  // barrier: nothing to combine
}

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(int rank, std::shared_ptr<FakeChannel> ch) : rank_(rank), ch_(std::move(ch)) {}

  int rank() const override { return rank_; }
  int size() const override { return ch_->size; }
  std::string backend() const override { return "fake"; }

  std::unique_ptr<Communicator> split(const std::string& name) override {
    std::lock_guard<std::mutex> lock(ch_->mu);
    auto& child = ch_->children[name];
    if (!child) child = std::make_shared<FakeChannel>(ch_->size);
    auto c = std::make_unique<FakeCommunicator>(rank_, child);
    c->set_timeout(timeout());
    return c;
  }

 protected:
  WorkPtr do_allreduce(at::Tensor& t, ReduceOp op) override { return collective({"allreduce", t, {}, 0, op}); }
  WorkPtr do_reduce(at::Tensor& t, int root, ReduceOp op) override { return collective({"reduce", t, {}, root, op}); }
  WorkPtr do_broadcast(at::Tensor& t, int root) override { return collective({"broadcast", t, {}, root}); }
  WorkPtr do_allgather(at::Tensor& in, at::Tensor& out) override { return collective({"allgather", in, out}); }
  WorkPtr do_reduce_scatter(at::Tensor& in, at::Tensor& out, ReduceOp op) override {
    return collective({"reduce_scatter", in, out, 0, op});
  }
  WorkPtr do_barrier() override { return collective({"barrier", {}, {}}); }

  WorkPtr do_send(at::Tensor& t, int dst, int tag) override {
    auto w = std::make_shared<Work>(fmt::format("fake send rank {} -> {} (tag {})", rank_, dst, tag));
    auto copy = t.clone();
    queue_.submit([this, w, copy, dst, tag] {
      w->mark_started(now_ns());
      {
        std::lock_guard<std::mutex> lock(ch_->mu);
        ch_->mail[{rank_, dst, tag}].push_back(copy);
      }
      ch_->cv.notify_all();
      w->finish(now_ns());
    });
    return w;
  }

  WorkPtr do_recv(at::Tensor& t, int src, int tag) override {
    auto w = std::make_shared<Work>(fmt::format("fake recv rank {} <- {} (tag {})", rank_, src, tag));
    queue_.submit([this, w, t, src, tag]() mutable {
      w->mark_started(now_ns());
      std::unique_lock<std::mutex> lock(ch_->mu);
      auto& box = ch_->mail[{src, rank_, tag}];
      if (!ch_->cv.wait_for(lock, timeout(), [&] { return !box.empty(); })) {
        lock.unlock();
        w->finish(now_ns(), std::make_exception_ptr(CommTimeout(w->what() + ": timed out")));
        return;
      }
      auto msg = box.front();
      box.pop_front();
      lock.unlock();
      std::exception_ptr err;
      if (msg.numel() != t.numel()) err = std::make_exception_ptr(CommError(w->what() + ": size mismatch"));
      else t.view({-1}).copy_(msg.view({-1}));
      w->finish(now_ns(), err);
    });
    return w;
  }

 private:
  WorkPtr collective(Deposit dep) {
    auto w = std::make_shared<Work>(fmt::format("fake {} on rank {}", dep.kind, rank_));
    queue_.submit([this, w, dep = std::move(dep)]() mutable {
      w->mark_started(now_ns());
      std::exception_ptr err;
      std::unique_lock<std::mutex> lock(ch_->mu);
      if (!ch_->error.empty()) {
        err = std::make_exception_ptr(CommError(ch_->error));
      } else {
        const std::string kind = dep.kind;
        ch_->slots[static_cast<size_t>(rank_)] = std::move(dep);
        const int64_t gen = ch_->generation;
        if (++ch_->arrived == ch_->size) {
          for (const auto& s : ch_->slots)
            if (s.kind != kind || s.root != ch_->slots[0].root)
              ch_->error = fmt::format("mismatched collectives: rank 0 issued {}, a peer issued {}", ch_->slots[0].kind, s.kind);
          if (ch_->error.empty()) {
            try {
              combine(ch_->slots);
            } catch (const std::exception& e) {
              ch_->error = e.what();
            }
          }
          for (auto& s : ch_->slots) s = Deposit{};
          ch_->arrived = 0;
          ++ch_->generation;
          ch_->cv.notify_all();
        } else if (!ch_->cv.wait_for(lock, timeout(), [&] { return ch_->generation != gen; })) {
          ch_->error = fmt::format("fake {} timed out on rank {}", kind, rank_);
        }
        if (!ch_->error.empty()) err = std::make_exception_ptr(CommError(ch_->error));
      }
      lock.unlock();
      ch_->cv.notify_all();
      w->finish(now_ns(), err);
    });
    return w;
  }

  int rank_;
  std::shared_ptr<FakeChannel> ch_;
  OpQueue queue_;  // last: its thread stops before the channel goes
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_fake_communicators(int size) {
  auto ch = std::make_shared<FakeChannel>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<FakeCommunicator>(r, ch));
  return out;
}

}  // namespace dptwin::exec
