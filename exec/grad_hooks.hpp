// exec/grad_hooks.hpp — run a callback when autograd has accumulated a gradient.
//
// DDP and Horovod both need "gradient i is ready" events during backward: a
// post hook on each parameter's grad accumulator node (what PyTorch's reducer
// does). Internal to exec/ (LibTorch header).
#pragma once

#include <torch/csrc/autograd/function_hook.h>

#include <functional>
#include <utility>

namespace dptwin::exec {

class PostHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit PostHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace dptwin::exec
