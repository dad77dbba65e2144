// exec/amp.cpp — see amp.hpp.
#include "exec/amp.hpp"

#include <ATen/autocast_mode.h>

namespace dptwin::exec {

AutocastScope::AutocastScope(bool enabled, torch::DeviceType device, torch::ScalarType dtype)
    : enabled_(enabled), device_(device) {
  if (!enabled_) return;
  if (device_ == torch::kCPU) {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(true);
  } else {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
  }
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (device_ == torch::kCPU) {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  }
}

MasterWeights::MasterWeights(const std::vector<torch::Tensor>& model_params) : model_(model_params) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model_) {
    auto m = p.detach().to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
    m.set_requires_grad(true);
    m.mutable_grad() = torch::zeros_like(m);
    master_.push_back(m);
  }
}

void MasterWeights::copy_grads_from_model() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) master_[i].mutable_grad().copy_(model_[i].grad());
}

void MasterWeights::copy_params_to_model() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) model_[i].copy_(master_[i]);
}

bool LossScaler::unscale_and_update(const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& g : grads) {
    g.mul_(1.0 / scale_);
    if (finite && !torch::isfinite(g).all().item<bool>()) finite = false;
  }
  if (!finite) {
    scale_ *= backoff_;
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= interval_) {
    scale_ *= growth_;
    good_steps_ = 0;
  }
  return true;
}

double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(g.to(torch::kFloat32).norm(2));
  const double total = torch::stack(norms).norm(2).item<double>();
  if (max_norm > 0) {
    const double coef = max_norm / (total + 1e-6);
    if (coef < 1.0)
      for (const auto& g : grads) g.mul_(coef);
  }
  return total;
}

}  // namespace dptwin::exec
