// exec/options.hpp — the options of one execution run (`dptwin exec`, `dptwin-exec`).
//
// ExecOptions is parsed once from the command line through ONE declarative
// table (exec_option_table(): flag, help, field), validated and resolved
// (strategy defaults for amp, precision) by resolve_exec_options(). The same
// struct drives the launcher and every worker rank, and is echoed into the
// result JSON. Torch-free.
//
// Thread-safety: value type; the table is immutable.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "exec/comm_fwd.hpp"

namespace dptwin::exec {

// Data-parallel strategy mechanisms (DESIGN.md §2). "dps+amp" and "horovod+amp"
// are Dps and Horovod with an amp default (O2 and O1 as in the paper).
enum class StrategyKind { Single, Sps, Dps, Horovod };

enum class CommBackend { Mpi, Gloo, Nccl, Fake };

struct ExecOptions {
  // --- what to run
  std::string strategy = "dps";    // single | sps | dps | horovod | dps+amp | horovod+amp
  int np = 1;                      // ranks (processes); 1 for single
  std::string backend = "gloo";    // mpi | gloo | nccl | fake (fake: in-process, tests only)
  std::string precision = "fp32";  // fp32 | bf16 | fp16: the half type used when amp is on
  std::string amp = "auto";        // auto | none | o1 | o2 (auto: o2 for dps+amp, o1 for horovod+amp, else none)
  std::string device = "auto";     // auto | cpu | cuda (auto: the rank's GPU under nccl, the GPU for single when
                                   // one is visible, else the CPU)
  std::string model = "tiny";      // a models/ preset name (tiny, small, paper, gpt2, ...)
  int seq_len = 0;                 // tokens per sample; 0 = the model's n_ctx
  int steps = 20;                  // optimizer steps to run (including measurement warm-up)
  int warmup_steps = 2;            // first steps excluded from timing statistics
  int micro_batch = 2;             // samples per rank per micro-step
  int grad_accum = 1;              // micro-steps per optimizer step
  int threads = 1;                 // intra-op threads per rank (torch, OpenMP, OpenBLAS)
  std::string bind = "auto";       // launcher: ranks bound to cores (auto: while they fit, as mpirun | core | none; exec::bind_cpus)
  int gloo_loop_nice = kGlooLoopNiceAuto;  // Gloo's loop thread this much nicer than the rank (comm_fwd.hpp)
  int seed = 1234;                 // model init, data order

  // --- optimizer (AdamW) and schedule
  double lr = 6e-4;                // peak learning rate
  int lr_warmup = 10;              // linear warm-up steps
  std::string lr_decay = "cosine"; // cosine | linear | constant: decay to min_lr_ratio·lr at `steps`
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;      // on weights and embeddings (not biases, not LayerNorm)
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;
  double clip = 1.0;               // max global gradient norm; <= 0 disables clipping

  // --- data
  std::string data = "synthetic";  // "synthetic" or a token shard file / directory (prepare-data)
  long synthetic_tokens = 1 << 21; // size of the synthetic corpus

  // --- strategy knobs (defaults from the real frameworks)
  double bucket_cap_mb = 25.0;       // dps: DDP bucket cap (MiB)
  double first_bucket_mb = 1.0;      // dps: first bucket cap (MiB)
  bool broadcast_buffers = true;     // dps: broadcast module buffers from rank 0 every forward
  bool rebuild_buckets = true;       // dps: rebuild buckets in gradient-readiness order after the first iteration
  double sps_bucket_mb = 10.0;       // sps: coalesced reduce/broadcast buffer (MiB)
  int devices_per_process = 1;       // sps: > 1 runs nn.DataParallel in one process (--np 1) over this many
                                     // replicas (cuda:0..K-1, or K CPU replicas); the micro-batch is scattered
  double fusion_threshold_mb = 128;  // horovod: fusion buffer (MiB; Horovod 0.21 code)
  double cycle_time_ms = 1.0;        // horovod: background loop cycle
  bool hvd_cache = true;             // horovod: response cache (bit-vector negotiation after first step)
  bool double_step = false;          // horovod+amp: the paper's second optimizer.step() per iteration
  bool hvd_ring = false;             // horovod: allreduce with dptwin's own ring over send/recv

  // --- output, robustness
  std::string out;                   // result JSON (rank 0); empty: none
  std::string trace;                 // merged Chrome trace (rank 0); empty: none
  double comm_timeout_s = 120;       // a collective not done by then is an error
  std::string checkpoint_dir;        // empty: no checkpoints
  int checkpoint_every = 0;          // steps between checkpoints (0: only at the end when dir set)
  bool resume = false;               // resume from checkpoint_dir/latest
  int stop_after = 0;                // stop cleanly after this many steps of this run (0: run all), as if interrupted
  std::string final_params;          // rank 0 writes the final fp32 parameters here (torch archive)
  int log_every = 0;                 // print loss every k steps on rank 0 (0: quiet)
  std::string worker;                // launcher: path of dptwin-exec (default: next to the caller)
  std::string store;                 // gloo rendezvous: file:PATH or tcp:HOST:PORT (default from env/launcher)
  double launch_timeout_s = 600;     // launcher: kill the job after this long
  std::string fault;                 // fault injection for tests: kill:RANK:STEP, stall:RANK:STEP, exit:RANK:STEP,
                                     // nan:STEP, ckptkill:STEP (rank 0 dies inside the checkpoint write after STEP)
};

// One row of the declarative option table. `field` points into ExecOptions.
struct OptionRow {
  const char* flag;   // e.g. "--micro-batch"
  const char* help;
  std::variant<std::string ExecOptions::*, int ExecOptions::*, long ExecOptions::*, double ExecOptions::*,
               bool ExecOptions::*>
      field;
  std::vector<std::string> choices;  // allowed values for string options; empty: any
};

const std::vector<OptionRow>& exec_option_table();

// Parses argv[1..] (every flag of the table, --help). Throws InputError (key =
// flag) on unknown flags, bad values or inconsistent combinations; throws
// HelpRequested when --help was given (its what() is the help text).
ExecOptions parse_exec_options(int argc, const char* const* argv);
struct HelpRequested : std::exception {
  std::string text;
  explicit HelpRequested(std::string t) : text(std::move(t)) {}
  const char* what() const noexcept override { return text.c_str(); }
};

// parse_exec_options for a program's main: prints the help (exit code 0) or
// "PROGRAM: error: ..." (exit code 2) and returns that code when the caller
// should stop; nullopt with `out` filled when it should go on.
std::optional<int> parse_exec_options_or_exit(int argc, const char* const* argv, const char* program,
                                              ExecOptions& out);

// Checks ranges and combinations; throws InputError naming the flag.
void validate_exec_options(const ExecOptions& o);

// Resolved views of the string fields (REQUIRES: validated options).
StrategyKind strategy_kind(const ExecOptions& o);
CommBackend comm_backend(const ExecOptions& o);
std::string resolved_amp(const ExecOptions& o);        // none | o1 | o2
std::string resolved_half_dtype(const ExecOptions& o);  // bf16 | fp16 (meaningful when amp != none)
// Where --device puts a rank: cpu | cuda | cuda_if_visible (auto for single
// and in-process sps replicas: the GPU when one is visible at run time).
std::string device_placement(const ExecOptions& o);

// Back to command-line arguments (only fields that differ from the defaults),
// e.g. to forward a parsed configuration to worker processes.
std::vector<std::string> to_args(const ExecOptions& o);

}  // namespace dptwin::exec
