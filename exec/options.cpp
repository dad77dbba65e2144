// exec/options.cpp — the declarative option table and its CLI11 parser.
#include "exec/options.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sstream>

#include "core/error.hpp"
#include "models/gpt2.hpp"

namespace dptwin::exec {
namespace {

using O = ExecOptions;

InputError cli_error(const std::string& flag, const std::string& msg) {
  return InputError(SourceLocation{"command line", 0, 0}, flag, msg);
}

}  // namespace

const std::vector<OptionRow>& exec_option_table() {
  static const std::vector<OptionRow> table = {
      {"--strategy", "data-parallel strategy", &O::strategy,
       {"single", "sps", "dps", "horovod", "dps+amp", "horovod+amp"}},
      {"--np", "number of ranks (processes)", &O::np, {}},
      {"--backend", "communication backend", &O::backend, {"mpi", "gloo", "nccl", "fake"}},
      {"--precision", "half type used under amp (fp32 with amp picks bf16 on CPU)", &O::precision,
       {"fp32", "bf16", "fp16"}},
      {"--amp", "mixed precision level (auto: o2 for dps+amp, o1 for horovod+amp)", &O::amp,
       {"auto", "none", "o1", "o2"}},
      {"--device",
       "where the model runs: cuda (cuda:LOCAL_RANK), cpu, or auto (the rank's GPU under nccl, the GPU for single "
       "when one is visible, else the CPU)",
       &O::device, {"auto", "cpu", "cuda"}},
      {"--model", "GPT-2 preset (tiny, small, paper, gpt2, gpt2-medium, ...)", &O::model, {}},
      {"--seq-len", "tokens per sample (0: the model's n_ctx)", &O::seq_len, {}},
      {"--steps", "optimizer steps", &O::steps, {}},
      {"--warmup-steps", "first steps excluded from timing statistics", &O::warmup_steps, {}},
      {"--micro-batch", "samples per rank per micro-step", &O::micro_batch, {}},
      {"--grad-accum", "micro-steps per optimizer step", &O::grad_accum, {}},
      {"--threads", "intra-op threads per rank", &O::threads, {}},
      {"--bind", "launcher: bind each rank to its own cores (auto: while ranks x threads fit the cores, as mpirun does "
                 "by default; core: always; none)",
       &O::bind, {"auto", "core", "none"}},
      {"--gloo-loop-nice",
       "gloo: how much nicer than the rank Gloo's event-loop thread runs (it spins while a worker thread holds a "
       "pair's lock; 0: as Gloo starts it; -1: 19 while this host's ranks x threads fit its cores, 10 beyond)",
       &O::gloo_loop_nice, {}},
      {"--seed", "seed of model init and data order", &O::seed, {}},
      {"--lr", "peak learning rate", &O::lr, {}},
      {"--lr-warmup", "linear learning-rate warm-up steps", &O::lr_warmup, {}},
      {"--lr-decay", "learning-rate decay after warm-up", &O::lr_decay, {"cosine", "linear", "constant"}},
      {"--min-lr-ratio", "final learning rate as a fraction of --lr", &O::min_lr_ratio, {}},
      {"--weight-decay", "AdamW weight decay (weights and embeddings)", &O::weight_decay, {}},
      {"--beta1", "AdamW beta1", &O::beta1, {}},
      {"--beta2", "AdamW beta2", &O::beta2, {}},
      {"--adam-eps", "AdamW epsilon", &O::adam_eps, {}},
      {"--clip", "max global gradient norm (<= 0: no clipping)", &O::clip, {}},
      {"--data", "'synthetic' or a token shard file/directory made by prepare-data", &O::data, {}},
      {"--synthetic-tokens", "size of the synthetic corpus in tokens", &O::synthetic_tokens, {}},
      {"--bucket-cap-mb", "dps: gradient bucket cap (MiB)", &O::bucket_cap_mb, {}},
      {"--first-bucket-mb", "dps: first bucket cap (MiB)", &O::first_bucket_mb, {}},
      {"--broadcast-buffers", "dps: broadcast buffers from rank 0 every forward", &O::broadcast_buffers, {}},
      {"--rebuild-buckets",
       "dps: after the first iteration rebuild the buckets in the order gradients became ready (rank 0's order); "
       "--rebuild-buckets=false keeps reverse registration order",
       &O::rebuild_buckets, {}},
      {"--sps-bucket-mb", "sps: coalescing buffer for reduce and broadcast (MiB)", &O::sps_bucket_mb, {}},
      {"--devices-per-process",
       "sps: K > 1 runs nn.DataParallel in one process (--np 1): K replicas (cuda:0..K-1, or K CPU replicas "
       "without CUDA), each in its own thread with --threads intra-op threads; --micro-batch is scattered over them",
       &O::devices_per_process, {}},
      {"--fusion-threshold-mb", "horovod: fusion buffer (MiB)", &O::fusion_threshold_mb, {}},
      {"--cycle-time-ms", "horovod: background cycle time (ms)", &O::cycle_time_ms, {}},
      {"--hvd-cache", "horovod: response cache (bit-vector negotiation)", &O::hvd_cache, {}},
      {"--double-step", "horovod+amp: second optimizer step per iteration, as the paper's code", &O::double_step,
       {}},
      {"--hvd-ring", "horovod: allreduce with dptwin's own ring over send/recv instead of the backend's",
       &O::hvd_ring, {}},
      {"--out", "result JSON written by rank 0", &O::out, {}},
      {"--trace", "merged Chrome trace written by rank 0", &O::trace, {}},
      {"--comm-timeout-s", "a collective not finished after this many seconds is an error", &O::comm_timeout_s,
       {}},
      {"--checkpoint-dir", "directory of atomic checkpoints", &O::checkpoint_dir, {}},
      {"--checkpoint-every", "steps between checkpoints (0: only at the end)", &O::checkpoint_every, {}},
      {"--resume", "resume from the latest checkpoint in --checkpoint-dir", &O::resume, {}},
      {"--stop-after", "stop cleanly after this many steps of this run (0: all), as if interrupted", &O::stop_after,
       {}},
      {"--final-params", "rank 0 writes the final fp32 parameters to this file", &O::final_params, {}},
      {"--log-every", "print the loss every k steps on rank 0 (0: quiet)", &O::log_every, {}},
      {"--worker", "launcher: path of the dptwin-exec worker", &O::worker, {}},
      {"--store", "gloo rendezvous: file:PATH or tcp:HOST:PORT", &O::store, {}},
      {"--launch-timeout-s", "launcher: kill all ranks after this many seconds", &O::launch_timeout_s, {}},
      {"--fault", "fault injection (tests): kill:RANK:STEP | stall:RANK:STEP | exit:RANK:STEP | nan:STEP | ckptkill:STEP",
       &O::fault, {}},
  };
  return table;
}

ExecOptions parse_exec_options(int argc, const char* const* argv) {
  ExecOptions o;
  CLI::App app{"dptwin exec: train GPT-2 with a data-parallel strategy and measure every phase"};
  app.set_help_flag("-h,--help", "print this help");
  for (const auto& row : exec_option_table()) {
    std::visit(
        [&](auto member) {
          auto& ref = o.*member;
          using T = std::decay_t<decltype(ref)>;
          CLI::Option* opt;
          if constexpr (std::is_same_v<T, bool>) {
            opt = app.add_flag(row.flag, ref, row.help);
          } else {
            opt = app.add_option(row.flag, ref, row.help)->capture_default_str();
          }
          if (!row.choices.empty()) opt->check(CLI::IsMember(row.choices));
        },
        row.field);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    throw HelpRequested(app.help());
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::string flag;
    for (const auto& row : exec_option_table())
      if (msg.find(row.flag) != std::string::npos) flag = row.flag;
    throw cli_error(flag, msg);
  }
  validate_exec_options(o);
  return o;
}

void validate_exec_options(const ExecOptions& o) {
  auto need = [](bool ok, const char* flag, const std::string& msg) {
    if (!ok) throw cli_error(flag, msg);
  };
  need(o.np >= 1, "--np", "must be >= 1");
  need(o.strategy != "single" || o.np == 1, "--np", "strategy 'single' runs on exactly 1 rank");
  need(o.steps >= 1, "--steps", "must be >= 1");
  need(o.warmup_steps >= 0 && o.warmup_steps < o.steps, "--warmup-steps", "must be in [0, --steps)");
  need(o.micro_batch >= 1, "--micro-batch", "must be >= 1");
  need(o.grad_accum >= 1, "--grad-accum", "must be >= 1");
  need(o.threads >= 1 && o.threads <= 1024, "--threads", "must be in [1, 1024]");
  need(o.gloo_loop_nice >= -1 && o.gloo_loop_nice <= 19, "--gloo-loop-nice", "must be -1 (auto) or in [0, 19]");
  need(o.seq_len >= 0, "--seq-len", "must be >= 0");
  need(o.lr > 0, "--lr", "must be > 0");
  need(o.lr_warmup >= 0, "--lr-warmup", "must be >= 0");
  need(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio", "must be in [0, 1]");
  need(o.weight_decay >= 0, "--weight-decay", "must be >= 0");
  need(o.beta1 >= 0 && o.beta1 < 1, "--beta1", "must be in [0, 1)");
  need(o.beta2 >= 0 && o.beta2 < 1, "--beta2", "must be in [0, 1)");
  need(o.adam_eps > 0, "--adam-eps", "must be > 0");
  need(o.synthetic_tokens >= 1024, "--synthetic-tokens", "must be >= 1024");
  need(o.bucket_cap_mb > 0, "--bucket-cap-mb", "must be > 0");
  need(o.first_bucket_mb > 0, "--first-bucket-mb", "must be > 0");
  need(o.sps_bucket_mb > 0, "--sps-bucket-mb", "must be > 0");
  need(o.devices_per_process >= 1 && o.devices_per_process <= 64, "--devices-per-process", "must be in [1, 64]");
  if (o.devices_per_process > 1) {
    need(o.strategy == "sps", "--devices-per-process", "only strategy 'sps' runs replicas in one process");
    need(o.np == 1, "--devices-per-process", "runs in one process: use --np 1");
    need(o.micro_batch >= o.devices_per_process, "--devices-per-process",
         fmt::format("--micro-batch {} is scattered over the replicas: needs at least {} samples", o.micro_batch,
                     o.devices_per_process));
  }
  need(o.fusion_threshold_mb > 0, "--fusion-threshold-mb", "must be > 0");
  need(o.cycle_time_ms >= 0, "--cycle-time-ms", "must be >= 0");
  need(o.comm_timeout_s > 0, "--comm-timeout-s", "must be > 0");
  need(o.checkpoint_every >= 0, "--checkpoint-every", "must be >= 0");
  need(!o.resume || !o.checkpoint_dir.empty(), "--resume", "needs --checkpoint-dir");
  need(o.launch_timeout_s > 0, "--launch-timeout-s", "must be > 0");
  need(o.log_every >= 0, "--log-every", "must be >= 0");
  need(o.stop_after >= 0, "--stop-after", "must be >= 0");
  need(models::find_gpt2_preset(o.model).has_value(), "--model",
       fmt::format("unknown GPT-2 preset '{}'", o.model));
  const auto cfg = *models::find_gpt2_preset(o.model);
  need(o.seq_len <= cfg.n_positions, "--seq-len",
       fmt::format("{} exceeds n_positions {} of model '{}'", o.seq_len, cfg.n_positions, o.model));
  need(!o.double_step || strategy_kind(o) == StrategyKind::Horovod, "--double-step",
       "only meaningful for horovod strategies");
  need(!o.hvd_ring || strategy_kind(o) == StrategyKind::Horovod, "--hvd-ring", "only meaningful for horovod strategies");
  const std::string amp = resolved_amp(o);
  need(!(amp != "none" && o.precision == "fp16" && device_placement(o) == "cpu"), "--precision",
       "fp16 with loss scaling needs CUDA (--device cuda or backend nccl); use bf16 on CPU");
  need(!(o.backend == "nccl" && o.device == "cpu"), "--device", "backend nccl reduces CUDA tensors: not --device cpu");
  need(!(o.precision == "fp16" && amp == "none"), "--precision", "fp16 needs --amp o1 or o2");
  need(o.backend != "nccl" || o.strategy != "single", "--backend", "single runs without a backend");
  if (!o.fault.empty()) {
    // kind:RANK:STEP or kind:STEP with integers
    const auto colon = o.fault.find(':');
    const std::string kind = o.fault.substr(0, colon);
    const bool two = kind == "kill" || kind == "stall" || kind == "exit";
    const bool one = kind == "nan" || kind == "ckptkill";
    bool ok = colon != std::string::npos && (one || two);
    if (ok) {
      const std::string rest = o.fault.substr(colon + 1);
      const auto c2 = rest.find(':');
      auto is_int = [](const std::string& x) {
        return !x.empty() && x.find_first_not_of("0123456789") == std::string::npos;
      };
      ok = two ? (c2 != std::string::npos && is_int(rest.substr(0, c2)) && is_int(rest.substr(c2 + 1)))
               : is_int(rest);
    }
    need(ok, "--fault", "expected kill:RANK:STEP, stall:RANK:STEP, exit:RANK:STEP, nan:STEP or ckptkill:STEP");
  }
}

StrategyKind strategy_kind(const ExecOptions& o) {
  if (o.strategy == "single") return StrategyKind::Single;
  if (o.strategy == "sps") return StrategyKind::Sps;
  if (o.strategy == "dps" || o.strategy == "dps+amp") return StrategyKind::Dps;
  return StrategyKind::Horovod;
}

CommBackend comm_backend(const ExecOptions& o) {
  if (o.backend == "mpi") return CommBackend::Mpi;
  if (o.backend == "nccl") return CommBackend::Nccl;
  if (o.backend == "fake") return CommBackend::Fake;
  return CommBackend::Gloo;
}

std::string resolved_amp(const ExecOptions& o) {
  if (o.amp != "auto") return o.amp;
  if (o.strategy == "dps+amp") return "o2";
  if (o.strategy == "horovod+amp") return "o1";
  if (o.precision != "fp32") return "o1";  // --precision bf16 alone: autocast
  return "none";
}

std::string resolved_half_dtype(const ExecOptions& o) {
  if (o.precision == "fp16") return "fp16";
  return "bf16";
}

std::string device_placement(const ExecOptions& o) {
  if (o.device != "auto") return o.device;
  if (o.backend == "nccl") return "cuda";
  if (o.strategy == "single" || o.devices_per_process > 1) return "cuda_if_visible";
  return "cpu";
}

std::vector<std::string> to_args(const ExecOptions& o) {
  const ExecOptions def;
  std::vector<std::string> args;
  for (const auto& row : exec_option_table()) {
    std::visit(
        [&](auto member) {
          const auto& v = o.*member;
          if (v == def.*member) return;
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            args.push_back(fmt::format("{}={}", row.flag, v ? "true" : "false"));
          } else if constexpr (std::is_same_v<T, std::string>) {
            args.push_back(row.flag);
            args.push_back(v);
          } else if constexpr (std::is_same_v<T, double>) {
            args.push_back(row.flag);
            args.push_back(fmt::format("{}", v));  // shortest round-trip form
          } else {
            args.push_back(row.flag);
            args.push_back(std::to_string(v));
          }
        },
        row.field);
  }
  return args;
}

std::optional<int> parse_exec_options_or_exit(int argc, const char* const* argv, const char* program,
                                              ExecOptions& out) {
  try {
    out = parse_exec_options(argc, argv);
  } catch (const HelpRequested& h) {
    std::fputs(h.text.c_str(), stdout);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitInputError;
  }
  return std::nullopt;
}

}  // namespace dptwin::exec
