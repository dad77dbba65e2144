// exec/trainer.cpp — one rank's training loop (see trainer.hpp).
#include "exec/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "exec/amp.hpp"
#include "exec/checkpoint.hpp"
#include "exec/comm.hpp"
#include "exec/data_parallel.hpp"
#include "exec/gpt2_model.hpp"
#include "exec/lr_schedule.hpp"
#include "exec/strategy.hpp"
#include "exec/token_data.hpp"
#include "models/gpt2.hpp"

#ifdef DPTWIN_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace dptwin::exec {
namespace {

// On a CUDA device a phase's kernels are only queued when the host leaves it:
// waiting for the compute stream ends the phase's span with its kernels (the
// streams NCCL communicates on are not waited for, so overlap stays).
void wait_for_compute(const std::vector<torch::Device>& devices) {
#ifdef DPTWIN_HAVE_CUDA
  for (const auto& d : devices)
    if (d.is_cuda()) c10::cuda::getCurrentCUDAStream(d.index()).synchronize();
#else
  (void)devices;
#endif
}

// High-water mark of the CUDA caching allocator over `devices` (0 on CPU).
int64_t device_peak_bytes(const std::vector<torch::Device>& devices) {
  int64_t peak = 0;
#ifdef DPTWIN_HAVE_CUDA
  for (const auto& d : devices)
    if (d.is_cuda())
      peak = std::max<int64_t>(peak, c10::cuda::CUDACachingAllocator::getDeviceStats(d.index()).allocated_bytes[0].peak);
#else
  (void)devices;
#endif
  return peak;
}

// --fault kill:R:S | stall:R:S | exit:R:S | nan:S
struct Fault {
  std::string kind;
  int rank = -1, step = -1;
};

Fault parse_fault(const std::string& spec) {
  Fault f;
  if (spec.empty()) return f;
  const auto a = spec.find(':');
  f.kind = spec.substr(0, a);
  const std::string rest = spec.substr(a + 1);
  const auto b = rest.find(':');
  if (f.kind == "nan" || f.kind == "ckptkill") {
    f.step = std::stoi(rest);
  } else {
    f.rank = std::stoi(rest.substr(0, b));
    f.step = std::stoi(rest.substr(b + 1));
  }
  return f;
}

void trigger_fault(const Fault& f, int rank, int step) {
  if (f.kind.empty() || f.kind == "nan" || f.kind == "ckptkill" || f.rank != rank || f.step != step) return;
  std::fprintf(stderr, "dptwin-exec rank %d: injected fault '%s' at step %d\n", rank, f.kind.c_str(), step);
  std::fflush(stderr);
  if (f.kind == "kill") ::raise(SIGKILL);
  if (f.kind == "exit") std::_Exit(3);
  if (f.kind == "stall") std::this_thread::sleep_for(std::chrono::hours(1));
}

// cuda:<local rank>: LOCAL_RANK from the launcher/torchrun, OpenMPI's or
// Slurm's local id, else the rank, modulo the visible GPUs.
torch::Device local_gpu(const Communicator* comm) {
  const int64_t gpus = std::max<int64_t>(1, torch::cuda::device_count());
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) return torch::Device(torch::kCUDA, static_cast<int16_t>(std::atoi(v) % gpus));
  return torch::Device(torch::kCUDA, static_cast<int16_t>((comm ? comm->rank() : 0) % gpus));
}

// The device a rank trains on (device_placement: --device, auto resolved).
torch::Device rank_device(const Communicator* comm, const ExecOptions& o) {
  const std::string where = device_placement(o);
  if (where == "cpu" || (where == "cuda_if_visible" && !torch::cuda::is_available())) {
    if (resolved_half_dtype(o) == "fp16" && resolved_amp(o) != "none")
      throw TrainingError("fp16 with loss scaling runs on a CUDA device; this run is on the CPU (use bf16)");
    return torch::Device(torch::kCPU);
  }
  if (!torch::cuda::is_available())
    throw TrainingError(fmt::format("{} needs a CUDA device, and this dptwin-exec sees none (built without CUDA, "
                                    "or no GPU visible)",
                                    o.backend == "nccl" ? "backend nccl" : "--device cuda"));
  return local_gpu(comm);
}

models::Gpt2Config model_config(const ExecOptions& o) {
  auto cfg = *models::find_gpt2_preset(o.model);
  if (o.seq_len > 0) cfg.n_ctx = o.seq_len;
  return cfg;
}

torch::ScalarType half_type(const ExecOptions& o) {
  return resolved_half_dtype(o) == "fp16" ? torch::kHalf : torch::kBFloat16;
}

// Checks the LibTorch model against the simulator's tensor list.
void check_against_models(const std::vector<std::string>& names, const std::vector<torch::Tensor>& params,
                          const std::vector<models::TensorSpec>& specs) {
  if (names.size() != specs.size())
    throw TrainingError(fmt::format("exec GPT-2 registers {} parameters, models/ lists {}", names.size(), specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (names[i] != specs[i].name || params[i].sizes().vec() != specs[i].shape)
      throw TrainingError(fmt::format("exec GPT-2 parameter {} is '{}' {}, models/ expects '{}'", i, names[i],
                                      fmt::join(params[i].sizes().vec(), "x"), specs[i].name));
  }
}

std::string fingerprint(const ExecOptions& o, int world) {
  return fmt::format("model={} seq_len={} world={} micro_batch={} grad_accum={} strategy={} amp={} half={} data={} seed={}",
                     o.model, o.seq_len, world, o.micro_batch, o.grad_accum, o.strategy, resolved_amp(o),
                     resolved_half_dtype(o), o.data, o.seed);
}

nlohmann::json config_json(const ExecOptions& o, const models::Gpt2Config& cfg, int world) {
  nlohmann::json j;
  for (const auto& row : exec_option_table())
    std::visit([&](auto member) { j[std::string(row.flag).substr(2)] = o.*member; }, row.field);
  j["np"] = world;
  j["amp_resolved"] = resolved_amp(o);
  j["half_dtype"] = resolved_half_dtype(o);
  j["model_config"] = {{"name", cfg.name},           {"n_layer", cfg.n_layer},     {"n_embd", cfg.n_embd},
                       {"n_head", cfg.n_head},       {"n_positions", cfg.n_positions}, {"n_ctx", cfg.n_ctx},
                       {"vocab_size", cfg.vocab_size}, {"tied_embeddings", cfg.tied_embeddings}};
  return j;
}

class Trainer {
 public:
  Trainer(const ExecOptions& o, Communicator* comm, Recorder& rec)
      : o_(o), comm_(comm), rec_(rec), cfg_(model_config(o)), fault_(parse_fault(o.fault)) {
    rank_ = comm ? comm->rank() : 0;
    world_ = comm ? comm->size() : 1;
    amp_ = resolved_amp(o);
    half_ = half_type(o);
    device_ = rank_device(comm, o);
    if (o.devices_per_process > 1) {
      replica_devices_ = replica_devices(o.devices_per_process, device_.is_cuda());
      device_ = replica_devices_[0];
    }
    compute_devices_ = replica_devices_.empty() ? std::vector<torch::Device>{device_} : replica_devices_;
    load_data();
    build_model();
    build_optimizer();
    StrategyInputs in;
    in.options = &o_;
    in.params = params_;
    for (const auto& b : model_->buffers()) in.buffers.push_back(b);
    in.comm = comm_;
    in.recorder = &rec_;
    in.replicas = replicas_.get();
    strategy_ = make_strategy(strategy_kind(o_), std::move(in));
  }

  // The recorder's origin, the same instant on every rank: rank 0's steady
  // clock reading when all ranks share its kernel (boot id), which makes the
  // cross-rank times of the trace and comm_ops exact; otherwise each rank's
  // exit from the barrier just passed.
  void set_common_epoch() {
    auto origin = std::chrono::steady_clock::now();
    // NCCL's collectives take device tensors: its runs keep the barrier's origin.
    if (comm_ && comm_->size() > 1 && comm_->backend() != "nccl") {
      const int64_t boot = boot_id_hash();
      auto t = torch::tensor({boot, static_cast<int64_t>(origin.time_since_epoch().count())}, torch::kInt64);
      comm_->set_recording(false);
      comm_->broadcast(t, 0)->wait(comm_->timeout());
      auto same = torch::tensor({boot != 0 && t[0].item<int64_t>() == boot ? int64_t{1} : int64_t{0}}, torch::kInt64);
      comm_->allreduce(same, ReduceOp::Min)->wait(comm_->timeout());
      comm_->set_recording(true);
      if (same.item<int64_t>() == 1)
        origin = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(t[1].item<int64_t>()));
      else
        clock_ = "barrier";
    } else if (comm_ && comm_->size() > 1) {
      clock_ = "barrier";
    }
    rec_.set_epoch(origin);
  }

  // FNV-1a of the kernel's boot id (0 when unreadable): equal on ranks that share a steady clock.
  static int64_t boot_id_hash() {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (!std::getline(f, id) || id.empty()) return 0;
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char ch : id) h = (h ^ ch) * 1099511628211ULL;
    return static_cast<int64_t>(h >> 1);
  }

  TrainOutput run() {
    int start = 0;
    if (o_.resume) start = resume();
    strategy_->setup();
    if (comm_) comm_->barrier()->wait(comm_->timeout());
    set_common_epoch();
    const int end = o_.stop_after > 0 ? std::min(o_.steps, start + o_.stop_after) : o_.steps;
    for (int step = start; step < end; ++step) {
      report_.steps.push_back(run_step(step));
      const auto& s = report_.steps.back();
      if (rank_ == 0 && o_.log_every > 0 && (step % o_.log_every == 0 || step == end - 1))
        std::fprintf(stderr, "step %4d  loss %.4f  lr %.3e  grad_norm %.3f%s\n", step, s.loss, s.lr, s.grad_norm,
                     s.skipped ? "  (skipped: overflow)" : "");
      const bool last = step + 1 == end;
      if (!o_.checkpoint_dir.empty() && ((o_.checkpoint_every > 0 && (step + 1) % o_.checkpoint_every == 0) || last))
        checkpoint(step + 1);
    }
    rec_.set_step(-1);
    finish();
    return {report_, info()};
  }

 private:
  void load_data() {
    const int T = cfg_.n_ctx;
    if (o_.data == "synthetic") {
      corpus_ = make_synthetic_corpus(static_cast<uint64_t>(o_.seed), o_.synthetic_tokens, static_cast<uint32_t>(cfg_.vocab_size));
    } else {
      corpus_ = load_token_corpus(o_.data);
      if (corpus_.vocab_size > static_cast<uint32_t>(cfg_.vocab_size))
        throw TrainingError(fmt::format("data '{}' has vocab_size {} > the model's {}", o_.data, corpus_.vocab_size,
                                        cfg_.vocab_size));
    }
    const int64_t n = corpus_.num_samples(T);
    if (n < world_ * o_.micro_batch)
      throw TrainingError(fmt::format("corpus {} has {} samples of {} tokens: too few for {} ranks x micro-batch {}",
                                      corpus_.source, n, T, world_, o_.micro_batch));
    sampler_ = std::make_unique<DistributedSampler>(n, world_, rank_, static_cast<uint64_t>(o_.seed));
  }

  void build_model() {
    model_ = Gpt2(cfg_);
    model_->init_weights(static_cast<uint64_t>(o_.seed));
    model_->to(device_);
    names_ = ordered_parameter_names(*model_);
    params_ = ordered_parameters(*model_);
    check_against_models(names_, params_, models::gpt2_tensors(cfg_));
    if (amp_ == "o2") {
      master_ = std::make_unique<MasterWeights>(params_);  // fp32 copies before the cast
      torch::NoGradGuard no_grad;
      for (auto& p : params_) p.set_data(p.data().to(half_));
    }
    if (amp_ != "none" && half_ == torch::kHalf) scaler_ = std::make_unique<LossScaler>();
    if (!replica_devices_.empty()) build_replicas();
  }

  // sps in one process: replicas 1..K-1 of the model (their parameters are
  // copied from model_ before every step's first forward), driven in threads.
  void build_replicas() {
    std::vector<Gpt2> replicas{model_};
    for (size_t k = 1; k < replica_devices_.size(); ++k) {
      Gpt2 r(cfg_);
      r->to(replica_devices_[k]);
      if (amp_ == "o2") {
        torch::NoGradGuard no_grad;
        for (auto& p : ordered_parameters(*r)) p.set_data(p.data().to(half_));
      }
      replicas.push_back(r);
    }
    auto loss = [this](Gpt2Impl& m, const torch::Tensor& x, const torch::Tensor& y) {
      AutocastScope autocast(amp_ == "o1", x.device().type(), half_);
      return m.loss(x, y);
    };
    replicas_ = std::make_unique<DataParallel>(std::move(replicas), replica_devices_, o_.threads,
                                               static_cast<int64_t>(o_.sps_bucket_mb * 1024 * 1024), &rec_, loss);
  }

  void build_optimizer() {
    opt_params_ = master_ ? master_->params() : params_;
    const auto specs = models::gpt2_tensors(cfg_);
    std::vector<torch::Tensor> decay, no_decay;
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto role = specs[i].role;
      const bool d = role == models::TensorRole::Weight || role == models::TensorRole::TokenEmbedding ||
                     role == models::TensorRole::PositionEmbedding;
      (d ? decay : no_decay).push_back(opt_params_[i]);
    }
    auto base = torch::optim::AdamWOptions(o_.lr).betas({o_.beta1, o_.beta2}).eps(o_.adam_eps);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(base).weight_decay(o_.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(base).weight_decay(0.0)));
    optimizer_ = std::make_unique<torch::optim::AdamW>(groups, base);
    schedule_ = LrSchedule{o_.lr, o_.lr_warmup, o_.steps, o_.lr_decay, o_.min_lr_ratio};
  }

  std::pair<torch::Tensor, torch::Tensor> next_batch() {
    const int T = cfg_.n_ctx, B = o_.micro_batch;
    auto idx = sampler_->next(B);
    auto x = torch::empty({B, T}, torch::kLong), y = torch::empty({B, T}, torch::kLong);
    auto* xp = x.data_ptr<int64_t>();
    auto* yp = y.data_ptr<int64_t>();
    for (int b = 0; b < B; ++b) {
      const uint32_t* src = corpus_.tokens.data() + idx[static_cast<size_t>(b)] * T;
      for (int t = 0; t < T; ++t) {
        xp[b * T + t] = src[t];
        yp[b * T + t] = src[t + 1];
      }
    }
    return {x.to(device_), y.to(device_)};
  }

  StepSample run_step(int step) {
    rec_.set_step(step);
    ScopedSpan whole(&rec_, "step");
    StepSample s;
    s.step = step;
    s.lr = schedule_.at(step);
    for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(s.lr);
    double loss_sum = 0;
    const double scale = scaler_ ? scaler_->scale() : 1.0;
    for (int micro = 0; micro < o_.grad_accum; ++micro) {
      torch::Tensor x, y, loss;
      {
        ScopedSpan span(&rec_, "data");
        std::tie(x, y) = next_batch();
      }
      strategy_->before_forward();
      {
        ScopedSpan span(&rec_, "forward");
        if (replicas_) {
          loss = replicas_->forward(x, y);  // scatter, replicas in threads, weighted loss
        } else {
          AutocastScope autocast(amp_ == "o1", device_.type(), half_);
          loss = model_->loss(x, y);
        }
        if (fault_.kind == "nan" && fault_.step == step) loss = loss * std::numeric_limits<float>::quiet_NaN();
        wait_for_compute(compute_devices_);
      }
      loss_sum += loss.item<double>();
      trigger_fault(fault_, rank_, step);
      strategy_->before_backward(micro + 1 == o_.grad_accum);
      {
        ScopedSpan span(&rec_, "backward");
        if (replicas_) {
          replicas_->backward(scale / o_.grad_accum);
        } else {
          (loss * (scale / o_.grad_accum)).backward();
        }
        wait_for_compute(compute_devices_);
      }
    }
    s.loss = loss_sum / o_.grad_accum;
    strategy_->synchronize_gradients();
    if (strategy_->runs_optimizer()) optimizer_step(s);
    strategy_->after_optimizer();
    if (o_.double_step) {  // the paper's Horovod+Apex code calls optimizer.step() twice
      strategy_->resynchronize_gradients();
      if (strategy_->runs_optimizer()) optimizer_step(s);
      strategy_->after_optimizer();
    }
    strategy_->zero_grad();
    if (!std::isfinite(s.loss) && !scaler_)
      throw TrainingError(fmt::format("rank {}: non-finite loss {} at step {}; stopping{}", rank_, s.loss, step,
                                      o_.checkpoint_dir.empty() ? std::string()
                                                                : " (the last checkpoint in '" + o_.checkpoint_dir + "' is intact)"));
    return s;
  }

  void optimizer_step(StepSample& s) {
    ScopedSpan span(&rec_, "optimizer");
    if (master_) master_->copy_grads_from_model();
    std::vector<torch::Tensor> grads;
    for (auto& p : opt_params_) grads.push_back(p.grad());
    if (scaler_ && !scaler_->unscale_and_update(grads)) {
      s.skipped = true;
      return;
    }
    s.grad_norm = clip_grad_norm(grads, o_.clip);
    optimizer_->step();
    if (master_) master_->copy_params_to_model();
    wait_for_compute(compute_devices_);
  }


  int resume() {
    auto* opt = strategy_->runs_optimizer() ? optimizer_.get() : nullptr;
    auto meta = load_checkpoint(o_.checkpoint_dir, names_, opt_params_, opt, fingerprint(o_, world_));
    if (!meta) {
      if (rank_ == 0) std::fprintf(stderr, "dptwin-exec: no checkpoint in '%s'; starting from step 0\n", o_.checkpoint_dir.c_str());
      return 0;
    }
    if (master_) master_->copy_params_to_model();
    sampler_->set_position(meta->sampler);
    if (scaler_) scaler_->set_state(meta->scaler);
    if (rank_ == 0) std::fprintf(stderr, "dptwin-exec: resumed from '%s' at step %ld\n", checkpoint_path(o_.checkpoint_dir).c_str(), static_cast<long>(meta->next_step));
    return static_cast<int>(meta->next_step);
  }

  void checkpoint(int next_step) {
    ScopedSpan span(&rec_, "checkpoint");
    if (rank_ == 0) {
      CheckpointMeta meta;
      meta.next_step = next_step;
      meta.sampler = sampler_->position();
      if (scaler_) meta.scaler = scaler_->state();
      meta.fingerprint = fingerprint(o_, world_);
      std::function<void()> hook;
      if (fault_.kind == "ckptkill" && fault_.step == next_step - 1)
        hook = [] {
          std::fprintf(stderr, "dptwin-exec rank 0: injected fault: killed inside the checkpoint write\n");
          std::fflush(stderr);
          ::raise(SIGKILL);
        };
      save_checkpoint(o_.checkpoint_dir, names_, opt_params_, optimizer_.get(), meta, hook);
    }
    if (comm_) comm_->barrier()->wait(comm_->timeout());  // nobody moves on before it is complete
  }

  void finish() {
    torch::NoGradGuard no_grad;
    double sum = 0;
    for (const auto& p : params_) sum += p.to(torch::kDouble).abs().sum().item<double>();
    report_.param_checksum = sum;
    report_.rank = rank_;
    report_.pid = static_cast<int>(::getpid());
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    report_.host = host;
    report_.peak_rss_bytes = peak_rss_bytes();
    report_.device_peak_bytes = device_peak_bytes(compute_devices_);
    report_.spans = rec_.spans();
    if (rank_ == 0 && !o_.final_params.empty()) {
      torch::serialize::OutputArchive ar;
      for (size_t i = 0; i < params_.size(); ++i) ar.write(names_[i], opt_params_[i].detach().to(torch::kFloat32).cpu());
      ar.save_to(o_.final_params);
    }
  }

  RunInfo info() const {
    RunInfo i;
    i.config = config_json(o_, cfg_, world_);
    i.world = world_;
    i.warmup_steps = o_.warmup_steps;
    i.tokens_per_step = static_cast<int64_t>(world_) * o_.grad_accum * o_.micro_batch * cfg_.n_ctx;
    i.parameters = models::parameter_count(cfg_);
    i.corpus = corpus_.source;
    i.versions = fmt::format("dptwin-exec 0.1.0, LibTorch {}", TORCH_VERSION);
    i.clock = clock_;
    return i;
  }

  const ExecOptions& o_;
  Communicator* comm_;
  Recorder& rec_;
  std::string clock_ = "shared";  // RunInfo::clock
  models::Gpt2Config cfg_;
  Fault fault_;
  int rank_ = 0, world_ = 1;
  std::string amp_;
  torch::ScalarType half_ = torch::kBFloat16;
  torch::Device device_{torch::kCPU};
  TokenCorpus corpus_;
  std::unique_ptr<DistributedSampler> sampler_;
  Gpt2 model_{nullptr};
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_, opt_params_;
  std::unique_ptr<MasterWeights> master_;
  std::unique_ptr<LossScaler> scaler_;
  std::vector<torch::Device> replica_devices_;  // sps in one process (empty otherwise)
  std::vector<torch::Device> compute_devices_;  // the replicas', else device_: what a phase waits for
  std::unique_ptr<DataParallel> replicas_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<Strategy> strategy_;
  RankReport report_;
};

}  // namespace

TrainOutput train_rank(const ExecOptions& opts, Communicator* comm, Recorder& rec) {
  Trainer t(opts, comm, rec);
  return t.run();
}

std::vector<RankReport> gather_reports(Communicator* comm, const RankReport& mine) {
  if (!comm || comm->size() == 1) return {mine};
  const auto timeout = comm->timeout();
  // NCCL moves device memory only: stage the text through the GPU there.
  const auto device = comm->backend() == "nccl" ? local_gpu(comm) : torch::Device(torch::kCPU);
  if (comm->rank() != 0) {
    const std::string text = to_json(mine).dump();
    auto len = torch::tensor({static_cast<int64_t>(text.size())}, torch::kLong).to(device);
    auto bytes = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
    std::memcpy(bytes.data_ptr(), text.data(), text.size());
    bytes = bytes.to(device);
    comm->set_recording(false);
    comm->send(len, 0, 71)->wait(timeout);
    comm->send(bytes, 0, 72)->wait(timeout);
    comm->set_recording(true);
    return {};
  }
  std::vector<RankReport> all{mine};
  comm->set_recording(false);
  for (int r = 1; r < comm->size(); ++r) {
    auto len = torch::zeros({1}, torch::TensorOptions().dtype(torch::kLong).device(device));
    comm->recv(len, r, 71)->wait(timeout);
    auto bytes = torch::empty({len.item<int64_t>()}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
    comm->recv(bytes, r, 72)->wait(timeout);
    bytes = bytes.cpu();
    const std::string text(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
    all.push_back(rank_report_from_json(nlohmann::json::parse(text)));
  }
  comm->set_recording(true);
  return all;
}

}  // namespace dptwin::exec
