// exec/trainer.hpp — the training loop of one rank, and result collection.
//
// train_rank() builds the GPT-2 of the options' preset (n_ctx = --seq-len when
// given), checks it against models::gpt2_tensors() (names, order, shapes),
// sets up precision (fp32 / O1 autocast / O2 half model + fp32 masters / loss
// scaling), AdamW with warm-up + decay, the data sampler of this rank and the
// strategy, then runs the steps (see strategy.hpp for the order of calls),
// recording every phase into `rec`. Rank-agnostic: the same code runs on
// every rank; `comm` is null only for the `single` strategy and for `sps` in
// one process (--devices-per-process > 1), which drives its replicas itself.
//
// Torch-free header (the trainer's LibTorch types stay in trainer.cpp).
// Thread-safety: one call per rank; with the fake backend several ranks run in
// threads of one process, each with its own Recorder.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "exec/comm_fwd.hpp"
#include "exec/measure.hpp"
#include "exec/options.hpp"
#include "exec/result.hpp"

namespace dptwin::exec {

// A non-finite loss without loss scaling, a bad checkpoint, a model that does
// not match models/: the run stops with this error.
class TrainingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainOutput {
  RankReport report;  // this rank's measurements
  RunInfo info;       // identical on every rank
};

// REQUIRES: validated options; comm != nullptr unless strategy is single or
// sps with devices_per_process > 1 (which ignores a communicator it is given).
TrainOutput train_rank(const ExecOptions& opts, Communicator* comm, Recorder& rec);

// Collective: every rank's report reaches rank 0 (sorted by rank); other ranks get {}.
std::vector<RankReport> gather_reports(Communicator* comm, const RankReport& mine);

}  // namespace dptwin::exec
