// exec/amp.hpp — mixed precision pieces: autocast scope, O2 master weights,
// dynamic loss scaling.
//
//  * O1: fp32 weights; forward runs under autocast (CPU: bf16; CUDA: fp16 or
//    bf16), so matmuls compute in half; gradients and communication stay fp32.
//  * O2: the model is cast to half; the optimizer updates fp32 master copies
//    (MasterWeights): half gradients are copied into the masters' fp32 .grad,
//    the step runs in fp32, and the masters are copied back into the model.
//  * LossScaler: dynamic loss scaling (initial 2^16, x2 after 2000 clean steps,
//    x0.5 and step skipped on inf/NaN gradients), used with fp16 only (CUDA);
//    bf16 needs none. Its logic is device independent and tested on CPU.
//
// Exec-internal (LibTorch). Thread-safety: used by the training thread only.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace dptwin::exec {

// RAII: autocast on `device` with `dtype` for the scope (no-op when !enabled).
class AutocastScope {
 public:
  AutocastScope(bool enabled, torch::DeviceType device, torch::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  torch::DeviceType device_;
  bool prev_enabled_ = false;
  torch::ScalarType prev_dtype_ = torch::kFloat;
};

class MasterWeights {
 public:
  // Creates fp32 copies of `model_params` (which may already be half).
  explicit MasterWeights(const std::vector<torch::Tensor>& model_params);
  std::vector<torch::Tensor>& params() { return master_; }
  void copy_grads_from_model();   // master.grad = float(model.grad)
  void copy_params_to_model();    // model = half(master)

 private:
  std::vector<torch::Tensor> model_, master_;
};

class LossScaler {
 public:
  LossScaler(double init_scale = 65536.0, double growth = 2.0, double backoff = 0.5, int interval = 2000)
      : scale_(init_scale), growth_(growth), backoff_(backoff), interval_(interval) {}

  double scale() const { return scale_; }
  // Divides `grads` by the scale in place; returns false (and backs the scale
  // off) when any gradient is inf/NaN: the caller skips the optimizer step.
  bool unscale_and_update(const std::vector<torch::Tensor>& grads);

  struct State {
    double scale;
    int good_steps;
  };
  State state() const { return {scale_, good_steps_}; }
  void set_state(State s) {
    scale_ = s.scale;
    good_steps_ = s.good_steps;
  }

 private:
  double scale_, growth_, backoff_;
  int interval_;
  int good_steps_ = 0;
};

// Global L2 norm of `grads` (computed in fp32) and in-place clipping to max_norm
// (PyTorch's clip_grad_norm_ formula: scale = max_norm / (norm + 1e-6) when < 1).
// max_norm <= 0: only the norm is returned.
double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm);

}  // namespace dptwin::exec
