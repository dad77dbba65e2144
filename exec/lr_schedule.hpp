// exec/lr_schedule.hpp — learning rate per optimizer step.
//
// Linear warm-up from lr/warmup to lr over `warmup` steps (step 0 uses
// lr·1/warmup, as Megatron/nanoGPT do), then decay to min_ratio·lr at
// `total` steps: cosine (0.5·(1+cos(pi·progress))), linear, or constant.
// Pure function; torch-free.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

namespace dptwin::exec {

struct LrSchedule {
  double lr = 6e-4;
  int warmup = 0;
  int total = 1;
  std::string decay = "cosine";  // cosine | linear | constant
  double min_ratio = 0.1;

  double at(int step) const {
    if (warmup > 0 && step < warmup) return lr * static_cast<double>(step + 1) / warmup;
    if (decay == "constant" || total <= warmup) return lr;
    const double progress = std::clamp(static_cast<double>(step - warmup) / (total - warmup), 0.0, 1.0);
    const double min_lr = lr * min_ratio;
    if (decay == "linear") return lr - (lr - min_lr) * progress;
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
};

}  // namespace dptwin::exec
