// exec/checkpoint.hpp — atomic training checkpoints.
//
// One file, <dir>/checkpoint.pt, a torch archive holding: the fp32 parameters
// (the O2 master copy when there is one) by name, the optimizer state (AdamW
// moments and step counts; absent on sps ranks other than 0), the loss scaler,
// the next step, the data sampler position, the CPU generator state, and a
// fingerprint of the run (model, seq_len, world, micro-batch, grad-accum,
// strategy, amp) that must match on resume. It is written by rank 0 with
// write_file_atomically (temp + fsync + rename), so a crash or SIGKILL during a
// write leaves the previous checkpoint intact and loadable.
//
// Exec-internal (LibTorch). Thread-safety: call from the training thread.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/amp.hpp"
#include "exec/token_data.hpp"

namespace dptwin::exec {

struct CheckpointMeta {
  int64_t next_step = 0;
  DistributedSampler::Position sampler;
  LossScaler::State scaler{65536.0, 0};
  std::string fingerprint;
};

std::string checkpoint_path(const std::string& dir);

// REQUIRES: names.size() == params.size(). optimizer may be null.
// `before_commit` (fault injection) runs when the new file is written but not yet in place.
void save_checkpoint(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<torch::Tensor>& params, torch::optim::Optimizer* optimizer,
                     const CheckpointMeta& meta, const std::function<void()>& before_commit = {});

// Returns nullopt when there is no checkpoint. Throws std::runtime_error when
// the file is unreadable or was written by a different configuration
// (fingerprint mismatch). Loads parameters in place; optimizer may be null.
std::optional<CheckpointMeta> load_checkpoint(const std::string& dir, const std::vector<std::string>& names,
                                              const std::vector<torch::Tensor>& params,
                                              torch::optim::Optimizer* optimizer, const std::string& fingerprint);

}  // namespace dptwin::exec
