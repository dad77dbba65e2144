// exec/data_parallel.cpp — see data_parallel.hpp.
#include "exec/data_parallel.hpp"

#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "exec/strategy.hpp"

namespace dptwin::exec {

std::vector<torch::Device> replica_devices(int k, bool cuda) {
  if (cuda) {
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    if (gpus < k)
      throw std::runtime_error(fmt::format("--devices-per-process {} but only {} CUDA devices are visible", k, gpus));
    std::vector<torch::Device> d;
    for (int i = 0; i < k; ++i) d.emplace_back(torch::kCUDA, static_cast<int16_t>(i));
    return d;
  }
  return std::vector<torch::Device>(static_cast<size_t>(k), torch::Device(torch::kCPU));
}

// --- ReplicaThreads ---------------------------------------------------------

ReplicaThreads::ReplicaThreads(int extra_threads, int intra_op_threads)
    : errors_(static_cast<size_t>(extra_threads) + 1) {
  for (int k = 1; k <= extra_threads; ++k) threads_.emplace_back([this, k, intra_op_threads] { loop(k, intra_op_threads); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaThreads::loop(int k, int intra_op_threads) {
  at::set_num_threads(intra_op_threads);  // this thread's OpenMP team size
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (k < n_) job = job_;
    }
    std::exception_ptr error;
    if (job) {
      try {
        (*job)(k);
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_[static_cast<size_t>(k)] = error;
      --pending_;
    }
    done_cv_.notify_one();
  }
}

void ReplicaThreads::run(int n, const std::function<void(int)>& fn) {
  if (n < 1 || n > static_cast<int>(threads_.size()) + 1) throw std::logic_error("ReplicaThreads::run: bad count");
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    std::fill(errors_.begin(), errors_.end(), nullptr);
  }
  start_cv_.notify_all();
  try {
    fn(0);
  } catch (...) {
    errors_[0] = std::current_exception();  // slot 0 is only written by the caller
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  for (const auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

// --- DataParallel -----------------------------------------------------------

DataParallel::DataParallel(std::vector<Gpt2> replicas, std::vector<torch::Device> devices, int threads_per_replica,
                           int64_t bucket_bytes, Recorder* rec, LossFn loss)
    : replicas_(std::move(replicas)),
      devices_(std::move(devices)),
      bucket_bytes_(bucket_bytes),
      rec_(rec),
      loss_fn_(std::move(loss)),
      threads_(static_cast<int>(replicas_.size()) - 1, threads_per_replica) {
  if (replicas_.empty() || replicas_.size() != devices_.size())
    throw std::invalid_argument("DataParallel: one device per replica");
  for (auto& r : replicas_) params_.push_back(ordered_parameters(*r));
  for (size_t k = 1; k < params_.size(); ++k) {
    if (params_[k].size() != params_[0].size())
      throw std::invalid_argument("DataParallel: replicas differ in their parameters");
    for (size_t i = 0; i < params_[0].size(); ++i)
      if (!params_[k][i].sizes().equals(params_[0][i].sizes()) ||
          params_[k][i].scalar_type() != params_[0][i].scalar_type())
        throw std::invalid_argument(fmt::format("DataParallel: replica {} parameter {} differs from replica 0's", k, i));
  }
}

int DataParallel::broadcast_from_first(const std::vector<std::vector<torch::Tensor>>& lists, const std::string& label,
                                       int index) {
  if (lists.size() < 2) return index;
  torch::NoGradGuard no_grad;
  const auto& src = lists[0];
  std::vector<size_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  for (const auto& group : group_by_bytes(src, order, bucket_bytes_)) {
    Span span{fmt::format("{}{}", label, index++), "comm", rec_ ? rec_->step() : -1};
    span.launch_ns = span.start_ns = rec_ ? rec_->now_ns() : 0;
    std::vector<torch::Tensor> parts;
    for (size_t i : group) {
      parts.push_back(src[i].reshape({-1}));
      span.bytes += src[i].numel() * static_cast<int64_t>(src[i].element_size());
    }
    // One dtype per buffer: parameters share one; copy_buffers() passes one dtype at a time.
    const auto flat = torch::cat(parts);
    for (size_t k = 1; k < lists.size(); ++k) {
      const auto on_k = devices_[k] == devices_[0] ? flat : flat.to(devices_[k]);
      int64_t off = 0;
      for (size_t i : group) {
        const int64_t n = src[i].numel();
        lists[k][i].view({-1}).copy_(on_k.narrow(0, off, n));
        off += n;
      }
    }
    if (rec_) {
      span.end_ns = rec_->now_ns();
      rec_->add(std::move(span));
    }
  }
  return index;
}

void DataParallel::copy_buffers() {
  std::vector<std::vector<torch::Tensor>> buffers;
  for (auto& r : replicas_) buffers.push_back(r->buffers());
  if (buffers.empty() || buffers[0].empty()) return;
  // One pass per dtype (the masks are bool, masked_bias float).
  std::vector<torch::ScalarType> types;
  for (const auto& b : buffers[0])
    if (std::find(types.begin(), types.end(), b.scalar_type()) == types.end()) types.push_back(b.scalar_type());
  int index = 0;
  for (const auto type : types) {
    std::vector<std::vector<torch::Tensor>> same(buffers.size());
    for (size_t k = 0; k < buffers.size(); ++k)
      for (size_t i = 0; i < buffers[0].size(); ++i)
        if (buffers[0][i].scalar_type() == type) same[k].push_back(buffers[k][i]);
    index = broadcast_from_first(same, "broadcast.buffers", index);
  }
}

void DataParallel::replicate() { broadcast_from_first(params_, "broadcast.param", 0); }

torch::Tensor DataParallel::forward(const torch::Tensor& x, const torch::Tensor& y) {
  const int64_t batch = x.size(0);
  const auto xs = x.chunk(size(), 0), ys = y.chunk(size(), 0);
  const int active = static_cast<int>(xs.size());
  losses_.assign(static_cast<size_t>(active), torch::Tensor());
  threads_.run(active, [&](int k) {
    const auto& dev = devices_[static_cast<size_t>(k)];
    c10::DeviceGuard guard(dev);
    const auto xk = xs[static_cast<size_t>(k)].to(dev), yk = ys[static_cast<size_t>(k)].to(dev);
    const double weight = static_cast<double>(xk.size(0)) / static_cast<double>(batch);
    losses_[static_cast<size_t>(k)] = loss_fn_(*replicas_[static_cast<size_t>(k)], xk, yk) * weight;
  });
  // Gather the (weighted) replica losses onto device 0.
  torch::NoGradGuard no_grad;
  auto total = losses_[0].detach().to(torch::kFloat);
  for (int k = 1; k < active; ++k) total = total + losses_[static_cast<size_t>(k)].detach().to(devices_[0]).to(torch::kFloat);
  return total;
}

void DataParallel::backward(double factor) {
  if (losses_.empty()) throw std::logic_error("DataParallel::backward without forward");
  threads_.run(static_cast<int>(losses_.size()), [&](int k) {
    c10::DeviceGuard guard(devices_[static_cast<size_t>(k)]);
    (losses_[static_cast<size_t>(k)] * factor).backward();
  });
  losses_.clear();
}

void DataParallel::reduce_gradients() {
  if (size() < 2) return;
  torch::NoGradGuard no_grad;
  const auto& dst = params_[0];
  std::vector<torch::Tensor> grads0;
  for (const auto& p : dst) grads0.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  std::vector<size_t> order(dst.size());
  std::iota(order.begin(), order.end(), 0);
  int g = 0;
  for (const auto& group : group_by_bytes(dst, order, bucket_bytes_)) {
    Span span{fmt::format("reduce.grad{}", g++), "comm", rec_ ? rec_->step() : -1};
    span.launch_ns = span.start_ns = rec_ ? rec_->now_ns() : 0;
    std::vector<torch::Tensor> parts;
    for (size_t i : group) {
      parts.push_back(grads0[i].reshape({-1}));
      span.bytes += dst[i].numel() * static_cast<int64_t>(dst[i].element_size());
    }
    auto sum = torch::cat(parts);
    for (size_t k = 1; k < params_.size(); ++k) {
      std::vector<torch::Tensor> theirs;
      for (size_t i : group) {
        const auto& p = params_[k][i];
        theirs.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
      }
      sum.add_(torch::cat(theirs).to(devices_[0]));
    }
    int64_t off = 0;
    for (size_t i : group) {
      const int64_t n = dst[i].numel();
      auto slice = sum.narrow(0, off, n).view(dst[i].sizes());
      if (dst[i].grad().defined()) {
        dst[i].mutable_grad().copy_(slice);
      } else {
        dst[i].mutable_grad() = slice.clone();
      }
      off += n;
    }
    if (rec_) {
      span.end_ns = rec_->now_ns();
      rec_->add(std::move(span));
    }
  }
  for (size_t k = 1; k < params_.size(); ++k)
    for (auto& p : params_[k])
      if (p.grad().defined()) p.mutable_grad().zero_();
}

}  // namespace dptwin::exec
