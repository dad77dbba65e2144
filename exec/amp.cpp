// exec/amp.cpp — see amp.hpp.
#include "exec/amp.hpp"

#include <ATen/autocast_mode.h>

#include "exec/torch_compat.hpp"

namespace dptwin::exec {

// LibTorch 2.4 keys the autocast state by device type; 1.13 has one setter
// pair for the CPU and one for CUDA ("gpu").
namespace {

bool autocast_enabled(torch::DeviceType d) {
#if DPTWIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(d);
#else
  return d == torch::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

void set_autocast_enabled(torch::DeviceType d, bool on) {
#if DPTWIN_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(d, on);
#else
  d == torch::kCPU ? at::autocast::set_cpu_enabled(on) : at::autocast::set_enabled(on);
#endif
}

torch::ScalarType autocast_dtype(torch::DeviceType d) {
#if DPTWIN_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(d);
#else
  return d == torch::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_autocast_dtype(torch::DeviceType d, torch::ScalarType t) {
#if DPTWIN_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(d, t);
#else
  d == torch::kCPU ? at::autocast::set_autocast_cpu_dtype(t) : at::autocast::set_autocast_gpu_dtype(t);
#endif
}

}  // namespace

AutocastScope::AutocastScope(bool enabled, torch::DeviceType device, torch::ScalarType dtype)
    : enabled_(enabled), device_(device) {
  if (!enabled_) return;
  prev_enabled_ = autocast_enabled(device_);
  prev_dtype_ = autocast_dtype(device_);
  set_autocast_dtype(device_, dtype);
  set_autocast_enabled(device_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_, prev_enabled_);
  set_autocast_dtype(device_, prev_dtype_);
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
