// exec/comm.cpp — Work, the recording wrapper of Communicator, helpers.
#include "exec/comm.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <vector>
#include <fmt/format.h>

#include "exec/result.hpp"

namespace dptwin::exec {
namespace {

int64_t process_clock_ns() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void Work::wait(std::chrono::duration<double> timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool counted = waiters_ && !done_;
  if (counted) waiters_->fetch_add(1);
  const bool done = cv_.wait_for(lock, timeout, [&] { return done_; });
  if (counted) waiters_->fetch_sub(1);
  if (!done)
    throw CommTimeout(fmt::format("{} did not complete within {:.1f} s (a peer rank may be dead or stalled)", what_,
                                  timeout.count()));
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError(fmt::format("{} failed: {}", what_, e.what()));
    }
  }
}

bool Work::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::mark_started(int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  start_ns_ = ns;
}

// The callbacks (the recorder's span) run before the waiters wake: a caller
// that returns from wait() and then reads its recorder sees this op's span.
// (Waking them first lost the last collective's record of a run now and then:
// rank 0 of an MPI dps run reported 4 of its 5 bucket allreduces.)
void Work::finish(int64_t end_ns, std::exception_ptr error) {
  std::vector<std::function<void(const Work&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    end_ns_ = end_ns;
    if (start_ns_ < 0) start_ns_ = end_ns;
    error_ = error;
    callbacks.swap(callbacks_);
  }
  for (auto& fn : callbacks) fn(*this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void Work::on_complete(std::function<void(const Work&)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finishing_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn(*this);
}

int64_t Communicator::now_ns() const { return recorder_ ? recorder_->now_ns() : process_clock_ns(); }

WorkPtr Communicator::record(const char* kind, int64_t bytes, WorkPtr w, int64_t launch_ns) {
  std::string label = next_label_.empty() ? std::string(kind) : std::move(next_label_);
  next_label_.clear();
  if (recorder_ && recording_ && w) {
    Recorder* rec = recorder_;
    const int step = rec->step();
    w->on_complete([rec, label = std::move(label), bytes, launch_ns, step](const Work& done) {
      Span s;
      s.name = label;
      s.stream = "comm";
      s.step = step;
      s.launch_ns = launch_ns;
      s.start_ns = done.start_ns();
      s.end_ns = done.end_ns();
      s.bytes = bytes;
      rec->add(std::move(s));
    });
  }
  return w;
}

static int64_t nbytes(const at::Tensor& t) { return static_cast<int64_t>(t.numel() * t.element_size()); }

WorkPtr Communicator::allreduce(at::Tensor t, ReduceOp op) {
  const auto t0 = now_ns();
  return record("allreduce", nbytes(t), do_allreduce(t, op), t0);
}
WorkPtr Communicator::reduce(at::Tensor t, int root, ReduceOp op) {
  const auto t0 = now_ns();
  return record("reduce", nbytes(t), do_reduce(t, root, op), t0);
}
WorkPtr Communicator::broadcast(at::Tensor t, int root) {
  const auto t0 = now_ns();
  return record("broadcast", nbytes(t), do_broadcast(t, root), t0);
}
WorkPtr Communicator::allgather(at::Tensor in, at::Tensor out) {
  if (out.numel() != in.numel() * size()) throw CommError("allgather: out.numel() must be size() * in.numel()");
  const auto t0 = now_ns();
  return record("allgather", nbytes(out), do_allgather(in, out), t0);
}
WorkPtr Communicator::reduce_scatter(at::Tensor in, at::Tensor out, ReduceOp op) {
  if (in.numel() != out.numel() * size()) throw CommError("reduce_scatter: in.numel() must be size() * out.numel()");
  const auto t0 = now_ns();
  return record("reduce_scatter", nbytes(in), do_reduce_scatter(in, out, op), t0);
}
WorkPtr Communicator::send(at::Tensor t, int dst, int tag) {
  const auto t0 = now_ns();
  return record("send", nbytes(t), do_send(t, dst, tag), t0);
}
WorkPtr Communicator::recv(at::Tensor t, int src, int tag) {
  const auto t0 = now_ns();
  return record("recv", nbytes(t), do_recv(t, src, tag), t0);
}
WorkPtr Communicator::barrier() {
  const auto t0 = now_ns();
  return record("barrier", 0, do_barrier(), t0);
}

void wait_all(const std::vector<WorkPtr>& works, std::chrono::duration<double> timeout) {
  for (const auto& w : works)
    if (w) w->wait(timeout);
}

void ring_allreduce(Communicator& comm, at::Tensor t, int tag_base) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  auto flat = t.view({-1});
  const int64_t total = flat.numel();
  auto chunk = [&](int k) {
    k = ((k % n) + n) % n;
    const int64_t lo = total * k / n, hi = total * (k + 1) / n;
    return flat.narrow(0, lo, hi - lo);
  };
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const auto timeout = comm.timeout();
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: rank r ends holding chunk r + 1 reduced
    auto out = chunk(r - s);
    auto into = chunk(r - s - 1);
    auto tmp = at::empty_like(into);
    auto sw = comm.send(out, right, tag_base + s);
    comm.recv(tmp, left, tag_base + s)->wait(timeout);
    sw->wait(timeout);
    into.add_(tmp);
  }
  for (int s = 0; s < n - 1; ++s) {  // allgather of the reduced chunks
    auto sw = comm.send(chunk(r + 1 - s), right, tag_base + n + s);
    comm.recv(chunk(r - s), left, tag_base + n + s)->wait(timeout);
    sw->wait(timeout);
  }
}

double probe_comm_state(Communicator& comm, int reps) {
  const auto timeout = comm.timeout();
  auto buf = at::ones({kCommStateBytes / 4}, at::kFloat);
  comm.barrier()->wait(timeout);
  comm.allreduce(buf)->wait(timeout);  // warm-up
  auto xs = at::zeros({reps}, at::kDouble);
  auto acc = xs.accessor<double, 1>();
  for (int i = 0; i < reps; ++i) {
    comm.barrier()->wait(timeout);
    const auto t = std::chrono::steady_clock::now();
    comm.allreduce(buf)->wait(timeout);
    acc[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  comm.allreduce(xs, ReduceOp::Max)->wait(timeout);
  return compute_stats(std::vector<double>(xs.data_ptr<double>(), xs.data_ptr<double>() + reps)).median;
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

#ifndef DPTWIN_HAVE_NCCL
bool nccl_available() { return false; }
std::unique_ptr<Communicator> make_nccl_communicator(const std::string&, int, int, std::chrono::duration<double>) {
  throw CommError("this dptwin was built without NCCL (needs a CUDA LibTorch and -Dnccl=enabled)");
}
#endif

}  // namespace dptwin::exec
