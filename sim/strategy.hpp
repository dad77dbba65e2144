// sim/strategy.hpp — the six training strategies and their knobs.
//
// Each strategy is modelled by its mechanism (DESIGN.md §2); the knobs below
// are the real frameworks' parameters with their real defaults, so a scenario
// can ask "what if DDP used 50 MiB buckets" or "what if Horovod fused 16 MB".
//
// Thread-safety: value types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/precision.hpp"
#include "core/units.hpp"
#include "sim/collectives.hpp"

namespace dptwin::sim {

enum class StrategyKind { Single, Sps, Dps, Horovod, DpsAmp, HorovodAmp };

std::string to_string(StrategyKind k);
std::optional<StrategyKind> parse_strategy(const std::string& s);  // "single", "sps", "dps", "horovod", "dps+amp", "horovod+amp"
const std::vector<StrategyKind>& all_strategies();
std::string describe(StrategyKind k);  // one line for `dptwin list strategies`

// How `sps` runs: torch.nn.DataParallel inside one process (GPUs of one node),
// or a multi-process central parameter server on rank 0 (any devices). Auto
// picks DataParallel when all devices are GPUs of one node, else CentralServer.
enum class SpsMode { Auto, DataParallel, CentralServer };

struct StrategyOptions {
  // --- all strategies ---
  int accumulation = 1;                 // micro-steps per optimizer step (gradient accumulation)
  Algorithm algorithm = Algorithm::Auto;  // allreduce algorithm; Auto prices ring and tree per message and takes the faster (NCCL tuner)
  bool clip_grad_norm = true;           // clip_grad_norm_(1.0) every step, as the paper's code does

  // --- precision (dps+amp and horovod+amp; `amp` may also be set for dps/horovod) ---
  std::optional<AmpLevel> amp;          // default: O2 for dps+amp, O1 for horovod+amp, none otherwise
  DType half = DType::FP16;             // reduced type under amp (fp16 as Apex; bf16 on newer devices/CPUs)
  bool double_step = false;             // horovod+amp: the paper code's second optimizer step (re-allreduce + second AdamW)

  // --- sps (DataParallel / central parameter server) ---
  SpsMode sps_mode = SpsMode::Auto;
  Bytes broadcast_buffer = mib(10);     // DataParallel replicate: coalesced broadcast buffer size
  bool gather_kv_cache = true;          // HF GPT-2 returns `presents` (K/V caches), gathered to GPU0 with the logits

  // --- dps (DistributedDataParallel; Apex DDP for dps+amp) ---
  Bytes bucket_cap = mib(25);           // bucket_cap_mb
  Bytes first_bucket = mib(1);          // first (smallest) bucket, dist._DEFAULT_FIRST_BUCKET_BYTES
  std::optional<double> apex_message_elements;  // Apex DDP message_size in elements (default 1e7 under dps+amp)
  bool broadcast_buffers = true;        // broadcast module buffers from rank 0 at every forward
  bool gradient_as_bucket_view = false; // PyTorch >= 1.7 option; false copies grads into buckets

  // --- horovod ---
  Time cycle_time = Time::ms(1);        // HOROVOD_CYCLE_TIME
  Bytes fusion_threshold = mib(128);    // HOROVOD_FUSION_THRESHOLD as in the 0.21 code the paper ran (docs: 64 MB)
  bool response_cache = true;           // HOROVOD_CACHE_CAPACITY > 0: skip negotiation for cached tensors
  bool fp16_compression = false;        // hvd.Compression.fp16
  bool hierarchical_allreduce = false;  // HOROVOD_HIERARCHICAL_ALLREDUCE
};

// Effective precision mode of a strategy with its options.
PrecisionMode precision_of(StrategyKind k, const StrategyOptions& o);

}  // namespace dptwin::sim
