// exec/microbench/microbench.cpp — `dptwin-microbench`: calibration microbenchmarks.
//
// Three modes, one JSON document each (schema "dptwin.microbench/1", read by
// validate/profile_fit.hpp):
//   --mode compute  one process: dense matmul by shape and precision (fp32,
//                   bf16), batched matmul (attention), elementwise / layernorm /
//                   softmax by size, fused GELU forward/backward, per-op dispatch
//                   cost (plain and with autograd), the autograd engine's fixed
//                   cost per backward, AdamW step by parameter and tensor count,
//                   an autocast Linear, memcpy; the speed probe before and after,
//                   and one class of it next to every case ("probe").
//   --mode speed    the short speed probe alone (matmul fp32/bf16, add, dispatch), which
//                   `dptwin validate` runs before every case.
//   --mode comm     one rank of N (RANK/WORLD_SIZE + DPTWIN_STORE for gloo,
//                   mpirun's environment for mpi): each collective of the exec
//                   comm interface (allreduce, broadcast, reduce, allgather) by
//                   message size; a parameter-server round (reduce to rank 0 +
//                   broadcast) by size; compute while all N ranks compute at once
//                   (core sharing); compute while an allreduce is in flight
//                   (overlap slowdown); compute while a Horovod-style background
//                   loop negotiates every 1 ms (loop slowdown); the step
//                   skeleton (SyncProbe: how ranks meet at collectives after
//                   compute). Every probe measures in --rounds interleaved
//                   rounds (default 3); a figure is the median over all of
//                   them. Rank 0 writes the document.
//   --mode sync     the step skeleton alone (one rank of a launched group).
// Every figure is the median of repetitions after a warm-up; the number of
// repetitions adapts to a time budget per case (the same on every rank).
// Threads per rank are pinned: OMP/OPENBLAS/MKL_NUM_THREADS and
// torch::set_num_threads(--threads) (the process re-executes itself once when
// the environment did not match, like dptwin-exec).
#include <CLI/CLI.hpp>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <numeric>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/host_load.hpp"
#include "models/workload.hpp"

#include "exec/amp.hpp"
#include "exec/comm.hpp"
#include "exec/process.hpp"
#include "exec/worker.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode = "compute";
  std::string backend = "gloo";
  int threads = 1;
  int gloo_loop_nice = dptwin::exec::kGlooLoopNiceAuto;
  double budget_s = 0.15;       // time budget per case (seconds of repetitions)
  int min_reps = 3, max_reps = 50;
  int rounds = 3;               // comm/sync mode: interleaved rounds of every probe
  double min_bytes = 4096, max_bytes = 256.0 * 1024 * 1024;
  std::string out;
  bool quick = false;           // fewer shapes (tests)
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of `fn` after two warm-up calls; repetitions fill `budget_s`.
json time_local(const Args& a, const std::function<void()>& fn, int inner = 1) {
  fn();
  auto t0 = Clock::now();
  fn();
  const double est = std::max(seconds_since(t0), 1e-7);
  const int reps = std::clamp(static_cast<int>(a.budget_s / est), a.min_reps, a.max_reps);
  std::vector<double> xs;
  xs.reserve(reps);
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    fn();
    xs.push_back(seconds_since(t) / inner);
  }
  return {{"seconds", median(xs)}, {"reps", reps}, {"min_s", *std::min_element(xs.begin(), xs.end())}};
}

torch::ScalarType dtype_of(const std::string& d) { return d == "bf16" ? torch::kBFloat16 : torch::kFloat32; }
int esize(const std::string& d) { return d == "bf16" ? 2 : 4; }

// Operands as a training step sees them: a pool of independent copies whose
// footprint exceeds the last-level cache (kPoolBytes), used round-robin, each
// with its own preallocated output (an out= variant), so every call reads cold
// operands and writes memory that is mapped but not in cache (a warm loop on
// one pair of tensors runs 2-3x faster than the same op inside a model).
// Outputs are not allocated per call: a training step's allocations reuse the
// heap (small single fp32 here: 8 minor page faults a step), while a ring of
// freshly allocated live outputs page-faulted on every call and read a GEMM
// 512x768x768 at 56 instead of 100 GFLOP/s on an AMD EPYC (Zen 5) VM, which
// put every prediction there 30-120% high (vd19).
constexpr double kPoolBytes = 64.0 * 1024 * 1024;
int pool_size(double bytes_per_call) { return std::clamp(static_cast<int>(kPoolBytes / std::max(bytes_per_call, 1.0)), 1, 64); }

// The machine's speed now, from a few timed loops: a 512x768x768 matmul in fp32
// and in bf16, a 1M-element add streaming over a pool larger than the cache,
// and a one-element in-place add (dispatch).
// Calibration records it around the compute suite; validation reruns it before
// every case (drift compensation). On a shared host these figures switch
// between states within seconds (this VM: bf16 matmul 2.5x, dispatch 2x, fp32
// matmul 1.25x slower for 1-40 s at a time), so the compute suite also reads
// one class of the probe just before and just after every case (`quick`): the
// fit rescales each case to the suite's typical speed by that reading.
class SpeedProbe {
 public:
  SpeedProbe()
      : A_(torch::randn({512, 768})),
        B_(torch::randn({768, 768})),
        Ah_(A_.to(torch::kBFloat16)),
        Bh_(B_.to(torch::kBFloat16)),
        C_(torch::zeros({512, 768})),
        Ch_(C_.to(torch::kBFloat16)),
        t1_(torch::zeros({1})) {
    for (int i = 0; i < kStreamSlots; ++i) {
      x_.push_back(torch::full({1 << 20}, 1.5f));
      y_.push_back(torch::full({1 << 20}, 0.5f));
      z_.push_back(torch::zeros({1 << 20}));
    }
  }

  // The elementwise class's form (the profile's speed_reference records it):
  // "streaming", each add on its own cold operands. The earlier form added two
  // 4 MiB tensors that stay in cache; the suite's cold adds followed a
  // streaming add (correlation of block medians 0.93-0.98 over three runs of
  // bench_probe_directions) more closely than the cached one (0.23-0.87).
  static constexpr const char* kElementwiseForm = "streaming";

  static constexpr const char* kClasses[] = {"matmul", "matmul_bf16", "elementwise", "dispatch"};

  // Median seconds of one call of class `cls` over `reps` timed calls (of
  // `inner` calls each) after a warm-up call.
  double read(const std::string& cls, int reps) {
    torch::NoGradGuard ng;
    std::function<void()> fn;
    int inner = 1;
    // Into preallocated outputs: a fresh 1.5-4 MiB output per call page-faults
    // in a new process (glibc maps such blocks until its threshold adapts), so
    // the probe run in a fresh process before a validation run read fp32
    // matmul 1.13x its reading inside the long-lived compute suite.
    if (cls == "matmul") fn = [&] { at::matmul_out(C_, A_, B_); };
    else if (cls == "matmul_bf16") fn = [&] { at::matmul_out(Ch_, Ah_, Bh_); };
    else if (cls == "elementwise") fn = [&] {
      at::add_out(z_[slot_], x_[slot_], y_[slot_]);
      slot_ = (slot_ + 1) % kStreamSlots;
    }, inner = 2;
    else fn = [&] { t1_.add_(1.0); }, inner = 200;
    fn();
    std::vector<double> xs;
    for (int r = 0; r < reps; ++r) {
      auto t = Clock::now();
      for (int i = 0; i < inner; ++i) fn();
      xs.push_back(seconds_since(t) / inner);
    }
    return median(xs);
  }
  // A short reading (3 calls) of one class, taken next to a measured case.
  double quick(const std::string& cls) { return read(cls, 3); }
  // Every class: the median of 7 quick readings taken round-robin, the same
  // statistic as the fit's reference (the median of the suite's quick readings).
  // `readings` (when given) gets every quick reading by class: samples of the
  // machine's speed states, as the compute suite's readings next to its cases.
  json full(json* readings = nullptr) {
    std::map<std::string, std::vector<double>> xs;
    for (int r = 0; r < 7; ++r)
      for (const char* c : kClasses) xs[c].push_back(quick(c));
    json j;
    for (auto& [c, v] : xs) {
      if (readings) (*readings)[c] = v;
      j[c + "_s"] = median(v);
    }
    j["elementwise_form"] = kElementwiseForm;
    return j;
  }

 private:
  // 24 slots of three 4 MiB tensors: 288 MiB, far beyond any last-level cache.
  static constexpr int kStreamSlots = 24;
  torch::Tensor A_, B_, Ah_, Bh_, C_, Ch_, t1_;
  std::vector<torch::Tensor> x_, y_, z_;
  int slot_ = 0;
};

json speed_probe(json* readings = nullptr) { return SpeedProbe().full(readings); }

// Cases that take less than this per call are priced by the dispatch probe
// (their time is the framework's per-op overhead, not arithmetic or memory),
// except the fused GELU, whose kernel follows its matmul class however short.
constexpr double kDispatchBoundS = 30e-6;

void bench_compute(const Args& a, json& doc) {
  SpeedProbe probe;
  doc["speed_reference"]["start"] = probe.full();
  json& rows = doc["compute"] = json::array();
  torch::NoGradGuard ng;
  auto add = [&](json row, const json& t) {
    row.update(t);
    rows.push_back(std::move(row));
  };
  // `measure` (a time_local result) between two quick probe readings: `cls`'s,
  // or the dispatch probe's when a call takes under kDispatchBoundS (unless
  // `keep_class`: a kernel that follows its class however short, the fused
  // GELU). Adds "probe": {"class", "s" (mean of before and after)}.
  auto probed = [&](const std::string& cls, const std::function<json()>& measure, bool keep_class = false) {
    const bool dispatch_class = cls == "dispatch";
    const double c0 = probe.quick(cls), d0 = dispatch_class ? c0 : probe.quick("dispatch");
    json t = measure();
    const double c1 = probe.quick(cls), d1 = dispatch_class ? c1 : probe.quick("dispatch");
    const bool by_dispatch = !keep_class && t.at("seconds").get<double>() < kDispatchBoundS;
    t["probe"] = {{"class", by_dispatch ? "dispatch" : cls}, {"s", by_dispatch ? 0.5 * (d0 + d1) : 0.5 * (c0 + c1)}};
    // Calls up to about 1 ms follow the dispatch speed in part (the fit
    // blends the two readings by the call's time: validate's dispatch_share).
    if (!by_dispatch) t["probe"]["dispatch_s"] = 0.5 * (d0 + d1);
    return t;
  };
  // Times fn(slot) writing into slot's preallocated output (an out= variant).
  auto pooled_out = [&](const std::string& cls, int k, const std::function<void(int)>& fn, bool keep_class = false) {
    return probed(
        cls,
        [&] {
          int i = 0;
          return time_local(a, [&] { fn(i++ % k); });
        },
        keep_class);
  };
  // Per-op dispatch: an in-place add on a one-element tensor (no autograd), and
  // an op recorded by autograd; the fixed cost of one backward call. Read three
  // times, at the suite's start, middle and end, each next to its own dispatch
  // probe reading (`dispatch_reads`, in time order): the dispatch speed switches
  // between modes for seconds at a time and one short read next to one probe
  // reading moved launch_overhead by 11% between two calibrations (rb22); the
  // fit takes the median of the reads, each rescaled by its own reading.
  // `dispatch` / `dispatch_probe` keep the middle read (older readers).
  int dispatch_reads = 0;
  auto dispatch_read = [&] {
    const bool middle = dispatch_reads++ == 1;
    auto dispatch_case = [&](const char* key, const std::function<json()>& measure) {
      const json t = probed("dispatch", measure);
      doc["dispatch_reads"][key].push_back({{"seconds", t.at("seconds")}, {"probe", t.at("probe")}});
      if (middle) {
        doc["dispatch"][key] = t.at("seconds");
        doc["dispatch_probe"][key] = t.at("probe");
      }
    };
    {
      auto t = torch::zeros({1});
      const int inner = 200;
      dispatch_case("plain_s", [&] { return time_local(a, [&] { for (int i = 0; i < inner; ++i) t.add_(1.0); }, inner); });
    }
    torch::AutoGradMode on(true);
    auto w = torch::ones({1}, torch::requires_grad());
    const int inner = 100;
    dispatch_case("autograd_s",
                  [&] { return time_local(a, [&] { auto y = w; for (int i = 0; i < inner; ++i) y = y * 1.0001; }, inner); });
    // backward through a chain of `inner` ops: per-node cost; through one op: fixed engine cost.
    dispatch_case("backward_chain_s", [&] {
      return time_local(a, [&] { auto y = w; for (int i = 0; i < inner; ++i) y = y * 1.0001; y.sum().backward(); }, inner);
    });
    dispatch_case("backward_fixed_s", [&] { return time_local(a, [&] { (w * 2.0).sum().backward(); }); });
  };
  dispatch_read();
  // Dense matmul: (m x k) @ (k x n), plus the transposed-operand forms of backward.
  std::vector<std::array<int64_t, 3>> mm;
  const std::vector<int64_t> ms = a.quick ? std::vector<int64_t>{64, 512} : std::vector<int64_t>{32, 128, 512, 2048, 8192};
  const std::vector<std::pair<int64_t, int64_t>> kn =
      a.quick ? std::vector<std::pair<int64_t, int64_t>>{{128, 384}}
              : std::vector<std::pair<int64_t, int64_t>>{{64, 192}, {128, 512}, {256, 256}, {768, 768}, {768, 3072}, {3072, 768}};
  for (int64_t m : ms)
    for (auto [k, n] : kn) mm.push_back({m, k, n});
  for (std::string dt : {"fp32", "bf16"}) {
    const std::string mm_class = dt == "bf16" ? "matmul_bf16" : "matmul";
    for (auto [m, k, n] : mm) {
      const double flops = 2.0 * m * k * n;
      if (flops > 4e10) continue;  // keep each case well under a second on one core
      const double bytes = static_cast<double>(m * k + k * n + m * n) * esize(dt);
      const int np = pool_size(bytes);
      std::vector<torch::Tensor> A, B, G, C, dA, dB;  // inputs A, B, G; outputs C (forward), dA, dB
      for (int i = 0; i < np; ++i) {
        A.push_back(torch::randn({m, k}).to(dtype_of(dt)));
        B.push_back(torch::randn({k, n}).to(dtype_of(dt)));
        G.push_back(torch::randn({m, n}).to(dtype_of(dt)));
        C.push_back(torch::zeros({m, n}).to(dtype_of(dt)));
        dA.push_back(torch::zeros({m, k}).to(dtype_of(dt)));
        dB.push_back(torch::zeros({k, n}).to(dtype_of(dt)));
      }
      add({{"op", "matmul"}, {"form", "nn"}, {"dtype", dt}, {"shape", {m, k, n}}, {"flops", flops}, {"bytes", bytes}},
          pooled_out(mm_class, np, [&](int i) { at::matmul_out(C[i], A[i], B[i]); }));
      // backward forms: dA = G B^T (m x n)(n x k), dB = A^T G (k x m)(m x n)
      add({{"op", "matmul"}, {"form", "nt"}, {"dtype", dt}, {"shape", {m, n, k}}, {"flops", flops}, {"bytes", bytes}},
          pooled_out(mm_class, np, [&](int i) { at::matmul_out(dA[i], G[i], B[i].t()); }));
      add({{"op", "matmul"}, {"form", "tn"}, {"dtype", dt}, {"shape", {k, m, n}}, {"flops", flops}, {"bytes", bytes}},
          pooled_out(mm_class, np, [&](int i) { at::matmul_out(dB[i], A[i].t(), G[i]); }));
    }
    // Attention as GPT-2 computes it: q, k, v are (B, T, H, D) views transposed
    // to (B, H, T, D); scores q @ k^T and outputs p @ v through torch::matmul on
    // the strided 4-D views (LibTorch's bmm path for such strides is much slower
    // than for contiguous 3-D operands).
    const std::vector<std::array<int64_t, 4>> att =
        a.quick ? std::vector<std::array<int64_t, 4>>{{2, 2, 32, 32}}
                : std::vector<std::array<int64_t, 4>>{{4, 2, 32, 32}, {8, 4, 64, 32}, {4, 12, 128, 64}, {2, 12, 512, 64}, {8, 12, 256, 64}};
    for (auto [b, h, t, d] : att) {
      const double flops = 2.0 * b * h * t * t * d;
      const double bytes = static_cast<double>(2 * b * h * t * d + b * h * t * t) * esize(dt);
      const int np = pool_size(bytes);
      std::vector<torch::Tensor> Q, K, P, V, S, O;
      for (int i = 0; i < np; ++i) {
        Q.push_back(torch::randn({b, t, h, d}).to(dtype_of(dt)).transpose(1, 2));
        K.push_back(torch::randn({b, t, h, d}).to(dtype_of(dt)).transpose(1, 2));
        V.push_back(torch::randn({b, t, h, d}).to(dtype_of(dt)).transpose(1, 2));
        P.push_back(torch::randn({b, h, t, t}).to(dtype_of(dt)));
        S.push_back(torch::zeros({b, h, t, t}).to(dtype_of(dt)));
        O.push_back(torch::zeros({b, h, t, d}).to(dtype_of(dt)));
      }
      add({{"op", "batched_matmul"}, {"form", "qk"}, {"dtype", dt}, {"shape", {b * h, t, d}}, {"flops", flops}, {"bytes", bytes}},
          pooled_out(mm_class, np, [&](int i) { at::matmul_out(S[i], Q[i], K[i].transpose(-2, -1)); }));
      add({{"op", "batched_matmul"}, {"form", "pv"}, {"dtype", dt}, {"shape", {b * h, t, d}}, {"flops", flops}, {"bytes", bytes}},
          pooled_out(mm_class, np, [&](int i) { at::matmul_out(O[i], P[i], V[i]); }));
    }
    // Memory-bound ops by size (elements); bytes = elements read + written.
    const std::vector<int64_t> sizes = a.quick ? std::vector<int64_t>{1 << 12, 1 << 18}
                                               : std::vector<int64_t>{1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22, 1 << 24};
    for (int64_t n : sizes) {
      const double e = esize(dt);
      const int np = pool_size(3.0 * n * e);
      const int64_t c = n >= 4096 ? 256 : 64;
      std::vector<torch::Tensor> X, Y, Out, Mean, Rstd;
      for (int i = 0; i < np; ++i) {
        X.push_back(torch::randn({n / c, c}).to(dtype_of(dt)));
        Y.push_back(torch::randn({n / c, c}).to(dtype_of(dt)));
        Out.push_back(torch::zeros({n / c, c}).to(dtype_of(dt)));
        Mean.push_back(torch::zeros({n / c, 1}).to(dtype_of(dt)));
        Rstd.push_back(torch::zeros({n / c, 1}).to(dtype_of(dt)));
      }
      add({{"op", "elementwise"}, {"form", "add"}, {"dtype", dt}, {"elements", n}, {"bytes", 3.0 * n * e}},
          pooled_out("elementwise", np, [&](int i) { at::add_out(Out[i], X[i], Y[i]); }));
      add({{"op", "elementwise"}, {"form", "mul_scalar"}, {"dtype", dt}, {"elements", n}, {"bytes", 2.0 * n * e}},
          pooled_out("elementwise", np, [&](int i) { at::mul_out(Out[i], X[i], 0.5); }));
      // The fused tanh-GELU forward and backward (compute bound: priced by FLOPs,
      // not bytes, and read next to the matmul probe of its dtype: over seven
      // pairs of calibrations its times moved with the cores' speed, not with
      // the add probe's (see sim::DeviceProfile::slow_down_by_class)); short
      // calls too, with the dispatch reading beside it for their dispatch part.
      add({{"op", "activation"}, {"form", "gelu_tanh"}, {"pass", "forward"}, {"dtype", dt}, {"elements", n},
           {"flops", dptwin::models::kGeluFlopsPerElementForward * n}},
          pooled_out(mm_class, np, [&](int i) { at::gelu_out(Out[i], X[i], "tanh"); }, true));
      add({{"op", "activation"}, {"form", "gelu_tanh"}, {"pass", "backward"}, {"dtype", dt}, {"elements", n},
           {"flops", dptwin::models::kGeluFlopsPerElementBackward * n}},
          pooled_out(mm_class, np, [&](int i) { at::gelu_backward_out(Out[i], Y[i], X[i], "tanh"); }, true));
      add({{"op", "layernorm"}, {"dtype", dt}, {"elements", n}, {"bytes", 2.0 * n * e}},
          pooled_out("elementwise", np, [&](int i) {
            at::native_layer_norm_out(Out[i], Mean[i], Rstd[i], X[i], {c}, {}, {}, 1e-5);
          }));
      add({{"op", "softmax"}, {"dtype", dt}, {"elements", n}, {"bytes", 2.0 * n * e}},
          pooled_out("elementwise", np, [&](int i) { at::_softmax_out(Out[i], X[i], -1, false); }));
    }
  }
  dispatch_read();  // the second of three reads (see dispatch_read)
  // AdamW (torch::optim, as the trainer) by parameter count and tensor count.
  json& opt = doc["optimizer"] = json::array();
  const std::vector<std::pair<int64_t, int>> pc =
      a.quick ? std::vector<std::pair<int64_t, int>>{{1 << 14, 4}}
              : std::vector<std::pair<int64_t, int>>{{1 << 12, 1}, {1 << 14, 16}, {1 << 16, 64}, {1 << 18, 16},
                                                     {1 << 20, 64}, {1 << 22, 16}, {1 << 24, 32}};
  for (auto [numel, tensors] : pc) {
    std::vector<torch::Tensor> ps;
    for (int i = 0; i < tensors; ++i) {
      auto p = torch::randn({numel / tensors}, torch::requires_grad());
      p.mutable_grad() = torch::randn({numel / tensors});
      ps.push_back(p);
    }
    torch::optim::AdamW adam(ps, torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
    json row = {{"params", numel}, {"tensors", tensors}};
    // Small parameter sets are per-tensor kernel launches; large ones stream memory.
    row.update(probed(numel <= (1 << 16) ? "dispatch" : "elementwise", [&] { return time_local(a, [&] { adam.step(); }); }));
    opt.push_back(row);
  }
  // A GPT-2 Conv1D (addmm) forward + backward in fp32 and under bf16 autocast
  // (O1 as the trainer runs it: one autocast region per forward, casts of the
  // fp32 weight and input, bf16 GEMMs, gradients cast back to fp32), by shape.
  json& o1 = doc["autocast_linear"] = json::array();
  const std::vector<std::array<int64_t, 3>> shapes =
      a.quick ? std::vector<std::array<int64_t, 3>>{{256, 64, 64}, {256, 64, 192}}
              : std::vector<std::array<int64_t, 3>>{{256, 64, 64},   {256, 64, 192},   {256, 64, 256},
                                                    {256, 256, 64},  {512, 128, 128},  {512, 128, 384},
                                                    {512, 128, 512}, {512, 512, 128},  {2048, 256, 1024},
                                                    {2048, 768, 768}, {2048, 768, 3072}, {4096, 768, 2304}};
  torch::AutoGradMode with_grad(true);
  for (auto [m, k, n] : shapes) {
    auto x = torch::randn({m, k}, torch::requires_grad());
    auto w = torch::randn({k, n}, torch::requires_grad());
    auto b = torch::zeros({n}, torch::requires_grad());
    auto g = torch::randn({m, n});
    auto pass = [&](bool autocast) {
      torch::Tensor y;
      {
        dptwin::exec::AutocastScope ac(autocast, torch::kCPU, torch::kBFloat16);
        y = torch::addmm(b, x, w);
      }
      y.backward(g.to(y.scalar_type()));
    };
    json row = {{"shape", {m, k, n}}, {"flops", 2.0 * m * k * n}};
    const json f = probed("matmul", [&] { return time_local(a, [&] { pass(false); }); });
    const json h = probed("matmul_bf16", [&] { return time_local(a, [&] { pass(true); }); });
    row["fp32_s"] = f.at("seconds");
    row["o1_s"] = h.at("seconds");
    row["fp32_probe"] = f.at("probe");
    row["o1_probe"] = h.at("probe");
    o1.push_back(row);
  }
  // The core-sharing probe of comm mode, alone (the reference of its factors).
  {
    auto A = torch::randn({512, 768}), B = torch::randn({768, 768});
    auto x = torch::randn({1 << 20}), y = torch::randn({1 << 20});
    auto t1 = torch::zeros({1});
    json& cc = doc["concurrency"];
    cc["ranks"] = 1;
    // The same loop form as comm mode's time_concurrent (total wall time / calls).
    auto loop = [](const std::function<void()>& fn, int reps) {
      fn();
      auto t = Clock::now();
      for (int r = 0; r < reps; ++r) fn();
      return seconds_since(t) / reps;
    };
    cc["matmul_s"] = loop([&] { auto z = torch::matmul(A, B); }, 20);
    cc["elementwise_s"] = loop([&] { auto z = x + y; }, 30);
    cc["dispatch_s"] = loop([&] { for (int i = 0; i < 200; ++i) t1.add_(1.0); }, 20) / 200;
  }
  // Host memcpy (fusion-buffer copies, flattening for collectives).
  json& cp = doc["memcpy"] = json::array();
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 23}) {
    auto src = torch::randn({n}), dst = torch::empty({n});
    json row = {{"bytes", 4.0 * n}};
    row.update(probed("elementwise", [&] { return time_local(a, [&] { dst.copy_(src); }); }));
    cp.push_back(row);
  }
  dispatch_read();
  doc["speed_reference"]["end"] = probe.full();
}

// ---------------------------------------------------------------------------
// comm mode

struct RankCtx {
  std::unique_ptr<dptwin::exec::Communicator> comm;
  int rank = 0, size = 1;
};

std::chrono::duration<double> kTimeout{300.0};

// Max over ranks of a double.
double allmax(RankCtx& c, double v) {
  auto t = torch::full({1}, v, torch::kFloat64);
  c.comm->allreduce(t, dptwin::exec::ReduceOp::Max)->wait(kTimeout);
  return t.item<double>();
}

// Times a collective `fn` (returns its Work) on every rank: per repetition,
// barrier, issue, wait; the repetition's time is the slowest rank's.
// Repetitions fill `budget_s`; `warm` skips the warm-up call (a later round).
json time_collective(const Args& a, RankCtx& c, const std::function<dptwin::exec::WorkPtr()>& fn,
                     double budget_s, bool warm = false) {
  c.comm->barrier()->wait(kTimeout);
  if (!warm) fn()->wait(kTimeout);
  c.comm->barrier()->wait(kTimeout);
  auto t0 = Clock::now();
  fn()->wait(kTimeout);
  const double est = allmax(c, std::max(seconds_since(t0), 1e-6));
  const int reps = std::clamp(static_cast<int>(budget_s / est), a.min_reps, a.max_reps);
  auto xs = torch::zeros({reps}, torch::kFloat64);
  auto acc = xs.accessor<double, 1>();
  for (int r = 0; r < reps; ++r) {
    c.comm->barrier()->wait(kTimeout);
    auto t = Clock::now();
    fn()->wait(kTimeout);
    acc[r] = seconds_since(t);
  }
  c.comm->allreduce(xs, dptwin::exec::ReduceOp::Max)->wait(kTimeout);
  std::vector<double> v(xs.data_ptr<double>(), xs.data_ptr<double>() + reps);
  return {{"seconds", median(v)}, {"reps", reps}, {"min_s", *std::min_element(v.begin(), v.end())}};
}

// Seconds per call of `fn` run on every rank at the same time (after a
// barrier): the whole loop's wall time over its calls, the slowest rank's. A
// loop, not per-call medians: with more ranks than cores the scheduler
// time-slices whole calls, which per-call medians would hide.
double time_concurrent(RankCtx& c, const std::function<void()>& fn, int reps) {
  fn();
  c.comm->barrier()->wait(kTimeout);
  auto t = Clock::now();
  for (int r = 0; r < reps; ++r) fn();
  return allmax(c, seconds_since(t) / reps);
}

// The comm run's probes measure in rounds (--rounds): every round runs each
// probe once with its share of the samples, and a figure is the median over
// the rounds, so that it samples the whole run rather than the few seconds one
// block of repetitions takes. On a shared host the speed switches between
// states within seconds: two calibrations in a row (0.2% steal) read a 2-rank
// 64 KiB allreduce at 0.30 and 2.4 ms and the 12-matmul arrival skew at 4.0
// and 7.8 ms, each from one block. The rounds also carry the host's steal:
// every rank reads /proc/stat around a round and the group takes the largest
// share; when some rounds stayed at or below kStealWarnPct, the figures come
// from those rounds alone (calibrate's run-level retry, at round granularity).
int share(int total, int rounds) { return std::max(1, (total + rounds - 1) / rounds); }

// One figure's samples, kept by round.
class RoundSamples {
 public:
  void add(int round, double v) {
    if (static_cast<int>(by_round_.size()) <= round) by_round_.resize(round + 1);
    by_round_[round].push_back(v);
  }
  // The samples of the rounds `use` selects, pooled.
  std::vector<double> pooled(const std::vector<bool>& use) const {
    std::vector<double> v;
    for (size_t r = 0; r < by_round_.size(); ++r)
      if (use.at(r)) v.insert(v.end(), by_round_[r].begin(), by_round_[r].end());
    return v;
  }
  double median_of(const std::vector<bool>& use) const { return median(pooled(use)); }
  // The mean of the pooled samples without the lowest and highest `trim` share
  // of them: the expected cost of a figure with a long tail, which a median
  // leaves out, without the rare outlier a plain mean would take in.
  double trimmed_mean_of(const std::vector<bool>& use, double trim) const {
    std::vector<double> v = pooled(use);
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const auto cut = static_cast<size_t>(trim * static_cast<double>(v.size()));
    double sum = 0;
    for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
    return sum / static_cast<double>(v.size() - 2 * cut);
  }
  const std::vector<std::vector<double>>& rounds() const { return by_round_; }

 private:
  std::vector<std::vector<double>> by_round_;
};

// The host's communication state: a 4 KiB allreduce among the group's ranks,
// read several times a round between the other probes (exec's
// probe_comm_state: 40 repetitions timed by the slowest rank, their median). On a
// shared host the collectives' small-message costs move by about 12% (standard
// deviation) from one calibration pass to the next, with the host's state,
// not with the calibration (validate/README gap 1); the run's median reading
// is the comm tables' reference state (profile `comm_reference`), as the
// speed probe is compute's, and `dptwin exec` reads the same probe in every
// multi-rank run (exec/worker.cpp), so that a validation can price a case's
// collectives at the state it ran in.
class CommStateProbe {
 public:
  void read(RankCtx& c, int r) { readings_.add(r, dptwin::exec::probe_comm_state(*c.comm)); }

  void write(RankCtx& c, json& doc, const std::vector<bool>& use) const {
    if (readings_.pooled(use).empty()) return;
    std::vector<double> per_round;
    for (const auto& rd : readings_.rounds()) per_round.push_back(median(rd));
    doc["comm_state"] = {{"kind", "allreduce"},
                         {"bytes", dptwin::exec::kCommStateBytes},
                         {"ranks", c.size},
                         {"seconds", readings_.median_of(use)},
                         {"rounds_s", per_round},
                         {"readings_s", readings_.pooled(std::vector<bool>(use.size(), true))}};
    if (c.rank == 0)
      std::cerr << fmt::format("  comm state (4 KiB allreduce, {} ranks): {:.1f} us ({} readings)\n", c.size,
                               readings_.median_of(use) * 1e6, readings_.pooled(use).size());
  }

 private:
  RoundSamples readings_;
};

// Every collective of the comm interface by message size, and the
// parameter-server round (reduce to rank 0 + broadcast). A figure is the
// median of its rounds' medians (`seconds`), and their mean (`mean_s`, what
// the fit prices: on shared cores a round lands in one of two modes). Sizes
// up to kSmallBytes are read again later in the round (`small_round`): a mode
// lasts seconds, so one read per round gave their mean three states to
// average, and two calibrations' small-message tables (Horovod's fusion
// buffers and negotiations, the tiny model's buckets) moved their
// predictions by 9-11% (rb18); the extra reads lengthen the comm probes of a
// calibration from about 102 s to 142 s (rb17 vs rb19, rb20).
class CollectiveSweep {
 public:
  static constexpr double kSmallBytes = 1 << 20;

  void round(const Args& a, RankCtx& c, int r) { sweep(a, c, r, a.max_bytes, r > 0); }
  void small_round(const Args& a, RankCtx& c, int r) { sweep(a, c, r, std::min(a.max_bytes, kSmallBytes), true); }

 private:
  void sweep(const Args& a, RankCtx& c, int r, double up_to, bool warm) {
    const int n = c.size;
    const double budget = a.budget_s / a.rounds;
    auto rec = [&](const char* kind, double bytes, const std::function<dptwin::exec::WorkPtr()>& fn) {
      auto it = std::find_if(cases_.begin(), cases_.end(), [&](const Case& k) { return k.kind == kind && k.bytes == bytes; });
      if (it == cases_.end()) it = cases_.insert(cases_.end(), Case{kind, bytes, {}, {}, 0});
      const json t = time_collective(a, c, fn, budget, warm);
      it->round_s.add(r, t["seconds"].get<double>());
      it->min_s.add(r, t["min_s"].get<double>());
      it->reps += t["reps"].get<int>();
    };
    for (double bytes = a.min_bytes; bytes <= up_to * 1.0001; bytes *= 4) {
      const int64_t numel = static_cast<int64_t>(bytes / 4);
      auto buf = torch::ones({numel});
      auto piece = torch::ones({std::max<int64_t>(numel / n, 1)});
      auto gathered = torch::empty({piece.numel() * n});
      rec("allreduce", bytes, [&] { return c.comm->allreduce(buf); });
      if (bytes > a.max_bytes / 4 + 1) continue;  // the rooted kinds up to max/4 keep calibration short
      rec("broadcast", bytes, [&] { return c.comm->broadcast(buf, 0); });
      rec("reduce", bytes, [&] { return c.comm->reduce(buf, 0); });
      rec("allgather", bytes, [&] { return c.comm->allgather(piece, gathered); });
      rec("ps_round", bytes, [&] {
        c.comm->reduce(buf, 0)->wait(kTimeout);
        return c.comm->broadcast(buf, 0);
      });
    }
  }

 public:
  // A round's figure is the mean of its reads (one, or three for small
  // messages); `rounds_s` lists them, `reads_s` every read in round order.
  void write(RankCtx& c, json& rows, const std::vector<bool>& use) const {
    for (const Case& k : cases_) {
      std::vector<double> per_round, used;
      for (size_t r = 0; r < k.round_s.rounds().size(); ++r) {
        const auto& reads = k.round_s.rounds()[r];
        per_round.push_back(std::accumulate(reads.begin(), reads.end(), 0.0) / static_cast<double>(reads.size()));
        if (use.at(r)) used.push_back(per_round.back());
      }
      const std::vector<double> mins = k.min_s.pooled(use);
      json row = {{"kind", k.kind},
                  {"backend", c.comm->backend()},
                  {"ranks", c.size},
                  {"bytes", k.bytes},
                  {"seconds", median(used)},
                  {"mean_s", std::accumulate(used.begin(), used.end(), 0.0) / static_cast<double>(used.size())},
                  {"rounds_s", per_round},
                  {"reads_s", k.round_s.pooled(std::vector<bool>(use.size(), true))},
                  {"reps", k.reps},
                  {"min_s", *std::min_element(mins.begin(), mins.end())}};
      if (c.rank == 0)
        std::cerr << fmt::format("  {} {} ranks {} {:>10.0f} B: {:.6f} s (rounds {:.6f}..{:.6f})\n", k.kind,
                                 c.comm->backend(), c.size, k.bytes, row["seconds"].get<double>(),
                                 *std::min_element(per_round.begin(), per_round.end()),
                                 *std::max_element(per_round.begin(), per_round.end()));
      rows.push_back(row);
    }
  }

 private:
  struct Case {
    std::string kind;
    double bytes;
    RoundSamples round_s, min_s;  // per round: its median, its fastest repetition
    int reps;
  };
  std::vector<Case> cases_;
};

// The compute mix of the core-sharing and Horovod-loop probes: a 512x768x768
// matmul, a 1M-element add and 200 dispatches.
struct ComputeMix {
  torch::Tensor A = torch::randn({512, 768}), B = torch::randn({768, 768}), x = torch::randn({1 << 20}),
                y = torch::randn({1 << 20}), t1 = torch::zeros({1});
  void operator()() {
    torch::NoGradGuard ng;
    auto z = torch::matmul(A, B);
    auto w = x + y;
    for (int i = 0; i < 200; ++i) t1.add_(1.0);
  }
};

// Core sharing: the same compute on every rank at once, and the sharing factor
// measured back to back: rank 0 alone (the others wait at a barrier), then
// every rank at once; the median ratio of such pairs (7 over all rounds at
// least), so that slow drifts of other load on the machine cancel out.
class SharingProbe {
 public:
  void round(const Args& a, RankCtx& c, int r) {
    torch::NoGradGuard ng;
    matmul_.add(r, time_concurrent(c, [&] { auto z = torch::matmul(mix_.A, mix_.B); }, 20));
    elementwise_.add(r, time_concurrent(c, [&] { auto z = mix_.x + mix_.y; }, 30));
    dispatch_.add(r, time_concurrent(c, [&] { for (int i = 0; i < 200; ++i) mix_.t1.add_(1.0); }, 20) / 200);
    mix_();
    for (int rep = 0; rep < share(7, a.rounds); ++rep) {
      c.comm->barrier()->wait(kTimeout);
      double alone = 0;
      if (c.rank == 0) {
        auto t = Clock::now();
        for (int i = 0; i < 8; ++i) mix_();
        alone = seconds_since(t);
      }
      alone = allmax(c, alone);
      c.comm->barrier()->wait(kTimeout);
      auto t = Clock::now();
      for (int i = 0; i < 8; ++i) mix_();
      ratios_.add(r, allmax(c, seconds_since(t)) / alone);
    }
  }

  void write(RankCtx& c, json& doc, const std::vector<bool>& use) const {
    doc["concurrency"] = {{"ranks", c.size},
                          {"matmul_s", matmul_.median_of(use)},
                          {"matmul_flops", 2.0 * 512 * 768 * 768},
                          {"elementwise_s", elementwise_.median_of(use)},
                          {"elementwise_bytes", 3.0 * 4 * (1 << 20)},
                          {"dispatch_s", dispatch_.median_of(use)},
                          {"sharing_factor", ratios_.median_of(use)},
                          {"pairs", ratios_.pooled(use).size()}};
  }

 private:
  ComputeMix mix_;
  RoundSamples matmul_, elementwise_, dispatch_, ratios_;
};

// Overlap: matmuls while a 16 MiB allreduce is in flight vs alone, back-to-back
// pairs (11 over all rounds at least); the slowdown is the median of the
// pairs' ratios (drifts of the machine's speed slower than a pair cancel), the
// worst rank's.
//
// Stall: a 1 MiB allreduce (a DDP bucket's size) alone, then issued beside
// about 4x its time of matmuls, 11 pairs over all rounds at least. Its time in
// flight (issue to completion, as the backend reports it) less its time
// alone, over the compute's time less its time alone: 0 when it ran beside the
// compute as fast as alone, 1 when it completed only as the compute ended (a
// communication thread that gets no CPU while its rank computes). The median,
// the worst rank's. `stall_one`: the same with only rank 0 computing, the
// other ranks idle (0 where rank 0's communication thread runs on an idle core).
class OverlapProbe {
 public:
  OverlapProbe()
      : A_(torch::randn({256, 768})),
        B_(torch::randn({768, 768})),
        buf_(torch::ones({int64_t{16} << 20 >> 2})),
        bucket_(torch::ones({int64_t{1} << 20 >> 2})) {}

  void round(const Args& a, RankCtx& c, int r) {
    torch::NoGradGuard ng;
    auto one = [&] { auto z = torch::matmul(A_, B_); };
    if (k_ == 0) {  // the number of matmuls that fills 80% of one allreduce, read once
      one();
      auto t0 = Clock::now();
      for (int i = 0; i < 5; ++i) one();
      per_ = allmax(c, seconds_since(t0) / 5);
      c.comm->barrier()->wait(kTimeout);
      t0 = Clock::now();
      c.comm->allreduce(buf_)->wait(kTimeout);
      comm_s_ = allmax(c, seconds_since(t0));
      k_ = std::clamp(static_cast<int>(0.8 * comm_s_ / per_), 2, 400);
    }
    for (int rep = 0; rep < share(11, a.rounds); ++rep) {
      c.comm->barrier()->wait(kTimeout);
      auto t0 = Clock::now();
      for (int i = 0; i < k_; ++i) one();
      const double alone = seconds_since(t0);
      c.comm->barrier()->wait(kTimeout);
      auto w = c.comm->allreduce(buf_);
      t0 = Clock::now();
      for (int i = 0; i < k_; ++i) one();
      const double with = seconds_since(t0);
      w->wait(kTimeout);
      alone_.add(r, alone);
      with_.add(r, with);
      ratios_.add(r, with / alone);
    }
    for (int rep = 0; rep < share(11, a.rounds); ++rep) {
      c.comm->barrier()->wait(kTimeout);
      auto t0 = Clock::now();
      c.comm->allreduce(bucket_)->wait(kTimeout);
      const double comm = allmax(c, seconds_since(t0));
      const int k = std::clamp(static_cast<int>(std::ceil(4.0 * comm / per_)), 2, 400);
      c.comm->barrier()->wait(kTimeout);
      auto w = c.comm->allreduce(bucket_);
      t0 = Clock::now();
      for (int i = 0; i < k; ++i) one();
      const double compute = seconds_since(t0);
      w->wait(kTimeout);  // done: Work::finish set both ends
      const double in_flight = static_cast<double>(w->end_ns() - w->start_ns()) * 1e-9;
      bucket_alone_.add(r, comm);
      bucket_in_flight_.add(r, in_flight);
      stalls_.add(r, std::clamp((in_flight - comm) / std::max(compute - comm, 1e-6), 0.0, 1.0));
      // The same with rank 0 computing and the others idle: whether a rank's
      // compute holds the transfer up even while the machine has cores to spare.
      c.comm->barrier()->wait(kTimeout);
      auto w1 = c.comm->allreduce(bucket_);
      t0 = Clock::now();
      if (c.rank == 0)
        for (int i = 0; i < k; ++i) one();
      const double compute0 = seconds_since(t0);
      w1->wait(kTimeout);
      const double in_flight0 = static_cast<double>(w1->end_ns() - w1->start_ns()) * 1e-9;
      stalls_one_.add(r, c.rank == 0 ? std::clamp((in_flight0 - comm) / std::max(compute0 - comm, 1e-6), 0.0, 1.0) : 0.0);
    }
  }

  void write(RankCtx& c, json& doc, const std::vector<bool>& use) const {
    doc["overlap"] = {{"compute_alone_s", allmax(c, alone_.median_of(use))},
                      {"compute_with_comm_s", allmax(c, with_.median_of(use))},
                      {"slowdown", allmax(c, ratios_.median_of(use)) - 1.0},
                      {"comm_alone_s", comm_s_},
                      {"matmuls", k_},
                      {"pairs", ratios_.pooled(use).size()},
                      {"stall", allmax(c, stalls_.median_of(use))},
                      {"stall_one", allmax(c, stalls_one_.median_of(use))},  // rank 0's
                      {"stall_bucket_alone_s", allmax(c, bucket_alone_.median_of(use))},
                      {"stall_bucket_in_flight_s", allmax(c, bucket_in_flight_.median_of(use))}};
  }

 private:
  torch::Tensor A_, B_, buf_, bucket_;
  int k_ = 0;
  double per_ = 0, comm_s_ = 0;
  RoundSamples alone_, with_, ratios_, stalls_, stalls_one_, bucket_alone_, bucket_in_flight_;
};

// Horovod's background loop: a thread that wakes every cycle (1 ms) and
// negotiates with a small allreduce of request flags on its own channel, even
// while nothing is ready. It takes CPU from the training thread; this measures
// how much: the same compute mix alone and with the loop ticking (median ratio
// of back-to-back pairs, 15 over all rounds: with 7, two calibrations in a row
// read +34% and +46% at 2 ranks), and one negotiation's latency.
class HorovodLoopProbe {
 public:
  static constexpr double kCycleMs = 1.0;
  static constexpr int64_t kFlags = 150;  // about GPT-2's parameter-tensor count

  explicit HorovodLoopProbe(RankCtx& c)
      : loop_comm_(c.comm->split("hvd-probe")) {}

  void round(const Args& a, RankCtx& c, int r) {
    auto flags = torch::ones({kFlags + 1}, torch::kInt);
    neg_.add(r, time_collective(a, c, [&] { return c.comm->allreduce(flags, dptwin::exec::ReduceOp::Min); },
                                a.budget_s / a.rounds, r > 0)["seconds"]
                    .get<double>());
    mix_();
    // 45 pairs a run: the median of 15 read 0.05-0.19 at 4 ranks from one
    // pass to the next within a calibration (a pair's ratio spreads widely
    // with four ranks time-sliced on two cores), and two calibrations in a
    // row fitted 0.159 and 0.086 (rb33: small horovod x4 4.7% apart).
    for (int rep = 0; rep < share(45, a.rounds); ++rep) {
      c.comm->barrier()->wait(kTimeout);
      auto t = Clock::now();
      for (int i = 0; i < 8; ++i) mix_();
      const double alone = allmax(c, seconds_since(t));
      // The loop stops by agreement (a flag in the allreduce), like Horovod's.
      std::atomic<bool> stop{false};
      std::vector<double> busy;  // the loop's allreduces that ended while this rank computed
      std::thread loop([&] {
        auto f = torch::zeros({kFlags + 1}, torch::kInt);
        auto next = Clock::now();
        for (;;) {
          next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(kCycleMs));
          std::this_thread::sleep_until(std::max(next, Clock::now()));
          f.zero_();
          f[kFlags] = stop.load() ? 1 : 0;
          const auto t0 = Clock::now();
          loop_comm_->allreduce(f, dptwin::exec::ReduceOp::Max)->wait(kTimeout);
          if (!stop.load()) busy.push_back(seconds_since(t0));
          ++ticks_;
          if (f[kFlags].item<int>() == 1) return;
        }
      });
      c.comm->barrier()->wait(kTimeout);
      t = Clock::now();
      for (int i = 0; i < 8; ++i) mix_();
      const double with = allmax(c, seconds_since(t));
      stop.store(true);
      loop.join();
      for (double x : busy) neg_busy_.add(r, x);
      alone_.add(r, alone);
      with_.add(r, with);
      ratios_.add(r, with / alone);
    }
  }

  void write(RankCtx& c, json& doc, const std::vector<bool>& use) const {
    const double ratio = ratios_.median_of(use), neg = neg_.median_of(use);
    // The negotiation while the ranks compute: mostly as fast as alone, but a
    // loop thread that wakes on a core busy with compute can wait for the
    // computing thread's time slice (up to a scheduler tick: 4 ms at HZ=250),
    // so its mean is 2-3x its median on 2 cores (a diagnostic of the fit:
    // validate/README, known gap 6). 0 when no allreduce ended during compute.
    const double busy_median = allmax(c, neg_busy_.median_of(use)),
                 busy_mean = allmax(c, neg_busy_.trimmed_mean_of(use, kTrim));
    doc["horovod_loop"] = {{"cycle_ms", kCycleMs},
                           {"flags", kFlags + 1},
                           {"negotiation_s", neg},
                           {"negotiation_busy_s", busy_median},
                           {"negotiation_busy_mean_s", busy_mean},
                           {"negotiations_busy", neg_busy_.pooled(use).size()},
                           {"compute_alone_s", alone_.median_of(use)},
                           {"compute_with_loop_s", with_.median_of(use)},
                           {"slowdown", ratio - 1.0},
                           {"ticks", ticks_},
                           {"pairs", ratios_.pooled(use).size()}};
    if (c.rank == 0)
      std::cerr << fmt::format(
          "  horovod loop ({} ms cycle): compute x{:.3f}, negotiation {:.1f} us alone, {:.1f} us (mean {:.1f} us) "
          "while computing\n",
          kCycleMs, ratio, neg * 1e6, busy_median * 1e6, busy_mean * 1e6);
  }

 private:
  std::unique_ptr<dptwin::exec::Communicator> loop_comm_;
  ComputeMix mix_;
  static constexpr double kTrim = 0.1;  // share left out at each end of the trimmed mean
  RoundSamples neg_, neg_busy_, alone_, with_, ratios_;
  int ticks_ = 0;
};

// One training step's synchronisation skeleton without a model, as the
// data-parallel strategies meet it every step: two buffer broadcasts from rank 0
// (8 KiB, then 8 bytes: DDP's mask and scalar buffers before every forward), a
// compute burst (the forward/backward stand-in), the gradient allreduce
// entered straight from it (no barrier: each rank arrives when its burst ends),
// then a short elementwise phase (the optimizer stand-in). Per iteration and
// rank it records when each collective was entered and left; rank 0 reports
// how late the last rank reaches the allreduce after the mean one (the arrival
// skew) and how long each collective lasts after its last member entered it,
// next to the same three collectives timed alone in the same iteration (after
// a barrier, so that drifts of the machine's speed cancel out), and how much
// of that extra time is not the late start of the last rank's burst (which
// comes back as arrival skew; `extra_less_spread_s`). Two burst
// lengths (3 and 12 matmuls), so that the fit sees how the skew grows with the
// compute between two meetings. Every round runs both skeletons' full
// iterations; the figures are medians over all rounds' iterations. Ranks on
// one host share steady_clock.
//
// With more ranks than cores (`per_core` ranks fit one per core), the longest
// skeleton also runs in pairs of iterations within one round: every rank
// bursting, then only the first `per_core` ranks (the others go straight to
// the allreduce), in alternating order; the pair's ratio of mean bursts is
// the core sharing of a step-like pattern, read at one speed of the machine
// (`core_sharing` in the document).
class SyncProbe {
 public:
  // Iterations a round: 80 and 48 with a core per rank (short cycles), 40 and
  // 48 beyond (a 4-rank long cycle takes 85 ms here). The skew is
  // heavy-tailed (a burst now and then held for a scheduler slice); with 20
  // and 24 the fitted 2-rank lag read 1.0 vs 1.8 ms in two calibrations
  // minutes apart (rb32: tiny dps x2 5.6% apart), with 80 and 48 1.7 vs 1.4
  // (rb33: 1.5%). The short burst's mean still moves from pass to pass
  // (0.33-0.75 ms over 240 iterations each): the host's state, not sampling.
  SyncProbe(int per_core, int ranks)
      : per_core_(std::max(1, per_core)),
        skeletons_(ranks <= per_core_ ? std::vector<Skeleton>{Skeleton(3, 80), Skeleton(12, 48)}
                                      : std::vector<Skeleton>{Skeleton(3, 40), Skeleton(12, 48)}),
        A_(torch::randn({256, 768})), B_(torch::randn({768, 768})),
        x_(torch::randn({1 << 19})), y_(torch::randn({1 << 19})), t1_(torch::zeros({1})),
        mask_(torch::ones({2048})), scalar_(torch::ones({2})), grad_(torch::ones({1 << 17})) {}

  void round(RankCtx& c, int r) {
    torch::NoGradGuard ng;
    const int n = c.size;
    auto now = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
    auto optimizer = [&] { x_.add_(y_, 1e-3); };
    constexpr int kCols = 11;
    for (Skeleton& sk : skeletons_) {
      const int iters = sk.iterations_per_round;
      auto burst = [&, matmuls = sk.matmuls] {
        for (int i = 0; i < matmuls; ++i) auto z = torch::matmul(A_, B_);
        for (int i = 0; i < 200; ++i) t1_.add_(1.0);
      };
      constexpr int kWarm = 3;
      auto rec = torch::zeros({iters, kCols}, torch::kFloat64);
      auto acc = rec.accessor<double, 2>();
      burst();
      c.comm->barrier()->wait(kTimeout);
      for (int it = 0; it < kWarm + iters; ++it) {
        std::array<double, kCols> t{};
        t[0] = now();
        c.comm->broadcast(mask_, 0)->wait(kTimeout);
        t[1] = now();
        c.comm->broadcast(scalar_, 0)->wait(kTimeout);
        t[2] = now();
        burst();
        t[3] = now();
        c.comm->allreduce(grad_)->wait(kTimeout);
        t[4] = now();
        optimizer();
        t[5] = now();
        // The same collectives alone: ranks enter each together, none computing.
        c.comm->barrier()->wait(kTimeout);
        t[6] = now();
        c.comm->broadcast(mask_, 0)->wait(kTimeout);
        t[7] = now();
        c.comm->broadcast(scalar_, 0)->wait(kTimeout);
        t[8] = now();
        c.comm->barrier()->wait(kTimeout);
        t[9] = now();
        c.comm->allreduce(grad_)->wait(kTimeout);
        t[10] = now();
        if (it >= kWarm)
          for (int k = 0; k < kCols; ++k) acc[it - kWarm][k] = t[k];
      }
      auto all = torch::empty({n * iters * kCols}, torch::kFloat64);
      c.comm->allgather(rec.reshape({-1}), all)->wait(kTimeout);
      auto gathered = all.reshape({n, iters, kCols});
      auto ga = gathered.accessor<double, 3>();
      auto last = [&](int i, int k) {
        double m = ga[0][i][k];
        for (int q = 1; q < n; ++q) m = std::max(m, ga[q][i][k]);
        return m;
      };
      for (int i = 0; i < iters; ++i) {
        double mean_arrival = 0, mean_burst = 0, mean_start = 0;
        for (int q = 0; q < n; ++q) {
          mean_arrival += ga[q][i][3] / n;
          mean_burst += (ga[q][i][3] - ga[q][i][2]) / n;
          mean_start += ga[q][i][2] / n;
        }
        const double mask_after = last(i, 1) - last(i, 0), scalar_after = last(i, 2) - last(i, 1),
                     grad_after = last(i, 4) - last(i, 3), mask_alone = last(i, 7) - last(i, 6),
                     scalar_alone = last(i, 8) - last(i, 7), grad_alone = last(i, 10) - last(i, 9);
        sk.mask_after.add(r, mask_after);
        sk.scalar_after.add(r, scalar_after);
        sk.grad_after.add(r, grad_after);
        sk.mask_alone.add(r, mask_alone);
        sk.scalar_alone.add(r, scalar_alone);
        sk.grad_alone.add(r, grad_alone);
        const double extra = mask_after + scalar_after + grad_after - mask_alone - scalar_alone - grad_alone;
        sk.extra.add(r, extra);
        // A rank that leaves the scalar broadcast late starts its burst late and
        // arrives late at the allreduce: that much of `extra` reappears in the
        // arrival skew.
        sk.start_spread.add(r, last(i, 2) - mean_start);
        sk.extra_net.add(r, extra - (last(i, 2) - mean_start));
        sk.skew.add(r, last(i, 3) - mean_arrival);
        sk.burst_s.add(r, mean_burst);
        sk.cycle.add(r, last(i, 5) - last(i, 0));
      }
    }
  }

  // Pairs of the longest skeleton's iteration with every rank bursting and
  // with the first per_core_ ranks only (see the class comment).
  void sharing_round(RankCtx& c, int r) {
    const int n = c.size;
    if (n <= per_core_) return;
    torch::NoGradGuard ng;
    const Skeleton& sk = skeletons_.back();
    auto burst = [&] {
      for (int i = 0; i < sk.matmuls; ++i) auto z = torch::matmul(A_, B_);
      for (int i = 0; i < 200; ++i) t1_.add_(1.0);
    };
    constexpr int kPairs = 16;
    auto rec = torch::zeros({kPairs, 2}, torch::kFloat64);
    auto acc = rec.accessor<double, 2>();
    c.comm->barrier()->wait(kTimeout);
    for (int it = 0; it < kPairs; ++it)
      for (int k = 0; k < 2; ++k) {
        const bool all = (k == 0) == (it % 2 == 0);
        c.comm->broadcast(mask_, 0)->wait(kTimeout);
        c.comm->broadcast(scalar_, 0)->wait(kTimeout);
        const auto t = Clock::now();
        if (all || c.rank < per_core_) burst();
        acc[it][all ? 0 : 1] = seconds_since(t);
        c.comm->allreduce(grad_)->wait(kTimeout);
      }
    auto gathered = torch::empty({n * kPairs * 2}, torch::kFloat64);
    c.comm->allgather(rec.reshape({-1}), gathered)->wait(kTimeout);
    const auto shaped = gathered.reshape({n, kPairs, 2});
    auto g = shaped.accessor<double, 3>();
    for (int it = 0; it < kPairs; ++it) {
      double every = 0, first = 0;
      for (int q = 0; q < n; ++q) every += g[q][it][0] / n;
      for (int q = 0; q < per_core_; ++q) first += g[q][it][1] / per_core_;
      sharing_every_.add(r, every);
      sharing_first_.add(r, first);
      if (first > 0) sharing_ratio_.add(r, every / first);
    }
  }

  void write(RankCtx& c, json& doc, const std::vector<bool>& use) const {
    json& s = doc["sync"];
    s = {{"ranks", c.size}, {"mask_bytes", 8192}, {"scalar_bytes", 8}, {"grad_bytes", 512 * 1024}};
    if (!sharing_ratio_.pooled(use).empty()) {
      const double ratio = sharing_ratio_.median_of(use);
      s["core_sharing"] = {{"matmuls", skeletons_.back().matmuls},
                           {"ranks_bursting", per_core_},
                           {"burst_every_rank_s", sharing_every_.median_of(use)},
                           {"burst_one_per_core_s", sharing_first_.median_of(use)},
                           {"ratio", ratio},
                           {"ratio_trimmed_mean", sharing_ratio_.trimmed_mean_of(use, kTrim)},
                           {"ratios", sharing_ratio_.pooled(use)},
                           {"pairs", sharing_ratio_.pooled(use).size()}};
      if (c.rank == 0)
        std::cerr << fmt::format("  core sharing (skeleton, {} of {} ranks bursting vs all): x{:.3f}\n", per_core_,
                                 c.size, ratio);
    }
    for (const Skeleton& sk : skeletons_) {
      const size_t iterations = sk.skew.pooled(use).size();
      const auto used_rounds = std::count(use.begin(), use.end(), true);
      const double skew = sk.skew.median_of(use), skew_mean = sk.skew.trimmed_mean_of(use, kTrim),
                   burst = sk.burst_s.median_of(use),
                   mask_after = sk.mask_after.median_of(use), mask_alone = sk.mask_alone.median_of(use),
                   scalar_after = sk.scalar_after.median_of(use), scalar_alone = sk.scalar_alone.median_of(use),
                   grad_after = sk.grad_after.median_of(use), grad_alone = sk.grad_alone.median_of(use),
                   extra = sk.extra.median_of(use), start_spread = sk.start_spread.median_of(use),
                   cycle = sk.cycle.median_of(use), extra_net = sk.extra_net.median_of(use);
      s["skeletons"].push_back({{"matmuls", sk.matmuls},
                                {"iterations", iterations},
                                {"rounds", used_rounds},
                                {"burst_s", burst},
                                {"arrival_skew_s", skew},
                                {"arrival_skew_mean_s", skew_mean},
                                {"mask_broadcast_after_s", mask_after},
                                {"scalar_broadcast_after_s", scalar_after},
                                {"grad_allreduce_after_s", grad_after},
                                {"mask_broadcast_alone_s", mask_alone},
                                {"scalar_broadcast_alone_s", scalar_alone},
                                {"grad_allreduce_alone_s", grad_alone},
                                {"extra_s", extra},
                                {"burst_start_spread_s", start_spread},
                                {"extra_less_spread_s", extra_net},
                                {"cycle_s", cycle}});
      if (c.rank == 0)
        std::cerr << fmt::format(
            "  sync skeleton ({} ranks, {} matmuls, {} iterations): burst {:.2f} ms, arrival skew {:.2f} ms (mean "
            "{:.2f} ms); after "
            "the last arrival (alone): mask bcast {:.2f} ({:.2f}), scalar bcast {:.2f} ({:.2f}), allreduce {:.2f} "
            "({:.2f}) ms; extra {:.2f} ms, {:.2f} ms beyond the bursts' start spread ({:.2f} ms, last - mean); cycle "
            "{:.2f} ms\n",
            c.size, sk.matmuls, iterations, burst * 1e3, skew * 1e3, skew_mean * 1e3, mask_after * 1e3, mask_alone * 1e3,
            scalar_after * 1e3, scalar_alone * 1e3, grad_after * 1e3, grad_alone * 1e3, extra * 1e3,
            extra_net * 1e3, start_spread * 1e3, cycle * 1e3);
    }
  }

 private:
  struct Skeleton {
    Skeleton(int m, int it) : matmuls(m), iterations_per_round(it) {}
    int matmuls, iterations_per_round;
    RoundSamples mask_after, scalar_after, grad_after, mask_alone, scalar_alone, grad_alone, extra, skew, burst_s,
        start_spread, extra_net, cycle;
  };
  int per_core_;
  std::vector<Skeleton> skeletons_;  // by burst length, shortest first
  torch::Tensor A_, B_, x_, y_, t1_, mask_, scalar_, grad_;
  static constexpr double kTrim = 0.1;  // share left out at each end of a trimmed mean
  RoundSamples sharing_every_, sharing_first_, sharing_ratio_;
};

void bench_comm(const Args& a, RankCtx& c, json& doc) {
  doc["collectives"] = json::array();
  doc["rounds"] = a.rounds;
  const bool sync_only = a.mode == "sync", multi = c.size > 1;
  SyncProbe sync(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)) / std::max(1, a.threads), c.size);
  CollectiveSweep sweep;
  SharingProbe sharing;
  OverlapProbe overlap;
  std::unique_ptr<HorovodLoopProbe> loop;
  if (multi && !sync_only) loop = std::make_unique<HorovodLoopProbe>(c);
  CommStateProbe state;
  auto read_state = [&](int r) {
    if (multi) state.read(c, r);
  };
  std::vector<double> steal;
  for (int r = 0; r < a.rounds; ++r) {
    if (c.rank == 0 && a.rounds > 1) std::cerr << fmt::format("  round {}/{}\n", r + 1, a.rounds);
    const dptwin::CpuTimes before = dptwin::read_cpu_times();
    read_state(r);
    if (!sync_only) {
      sweep.round(a, c, r);
      read_state(r);
      sharing.round(a, c, r);
      sweep.small_round(a, c, r);  // small messages: two more reads, seconds apart
      read_state(r);
    }
    if (multi && !sync_only) {
      overlap.round(a, c, r);
      loop->round(a, c, r);
      read_state(r);
    }
    if (multi) {
      sync.round(c, r);
      sync.sharing_round(c, r);
      read_state(r);
    }
    if (!sync_only) {
      sweep.small_round(a, c, r);
      read_state(r);
    }
    steal.push_back(allmax(c, dptwin::steal_pct(before, dptwin::read_cpu_times())));
  }
  const std::vector<bool> use = dptwin::calm_rounds(steal);
  doc["rounds_steal_pct"] = steal;
  doc["rounds_used"] = use;
  if (c.rank == 0 && a.rounds > 1)
    std::cerr << fmt::format("  host steal per round (%): {:.1f}; figures from {} of {} rounds\n",
                             fmt::join(steal, ", "), std::count(use.begin(), use.end(), true), a.rounds);
  if (!sync_only) {
    sweep.write(c, doc["collectives"], use);
    sharing.write(c, doc, use);
  }
  if (multi && !sync_only) {
    overlap.write(c, doc, use);
    loop->write(c, doc, use);
  }
  if (multi) {
    sync.write(c, doc, use);
    state.write(c, doc, use);
  }
}

int env_int(const char* a, const char* b, int dflt) {
  if (const char* v = std::getenv(a)) return std::atoi(v);
  if (const char* v = std::getenv(b)) return std::atoi(v);
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"dptwin-microbench: calibration microbenchmarks (one JSON document)"};
  app.add_option("--mode", a.mode,
                 "compute: one process; comm: one rank of a launched group; speed: the speed probe only; sync: the comm group's step-skeleton probe only")
      ->check(CLI::IsMember({"compute", "comm", "speed", "sync"}));
  app.add_option("--backend", a.backend, "comm backend (comm mode)")->check(CLI::IsMember({"gloo", "mpi"}));
  app.add_option("--threads", a.threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--gloo-loop-nice", a.gloo_loop_nice,
                 "comm mode, gloo: Gloo's event-loop thread this much nicer than the rank (-1: by the ranks x threads "
                 "that share the cores, as dptwin exec)")
      ->check(CLI::Range(-1, 19));
  app.add_option("--budget-s", a.budget_s, "seconds of repetitions per case")->check(CLI::PositiveNumber);
  app.add_option("--min-bytes", a.min_bytes, "smallest collective message (x4 steps)")->check(CLI::Range(4.0, 1e12));
  app.add_option("--max-bytes", a.max_bytes, "largest collective message")->check(CLI::Range(4.0, 1e12));
  app.add_option("--rounds", a.rounds, "comm/sync mode: rounds over all probes (a figure is the median over them)")
      ->check(CLI::Range(1, 20));
  app.add_flag("--quick", a.quick, "a few shapes only (tests)");
  app.add_option("--out", a.out, "output JSON (default stdout)");
  try {
    app.parse(argc, argv);
    if (a.max_bytes < a.min_bytes) throw CLI::ValidationError("--max-bytes", "must be >= --min-bytes");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  dptwin::exec::pin_threads_or_reexec(a.threads, argv);
  torch::set_num_interop_threads(1);
  json doc = {{"schema", "dptwin.microbench/1"}, {"mode", a.mode}, {"threads", a.threads}};
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  doc["host"] = host;
  doc["cores"] = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  try {
    bool write = true;
    if (a.mode == "compute") {
      doc["ranks"] = 1;
      bench_compute(a, doc);
    } else if (a.mode == "speed") {
      json readings;
      doc["speed"] = speed_probe(&readings);
      doc["speed_readings"] = readings;
    } else {  // comm, sync
      RankCtx c;
      if (a.backend == "mpi") {
        if (!dptwin::exec::mpi_available()) throw std::runtime_error("this build has no MPI");
        c.comm = dptwin::exec::make_mpi_communicator();
      } else {
        const char* store = std::getenv("DPTWIN_STORE");
        if (!store) throw std::runtime_error("gloo: set DPTWIN_STORE=file:PATH (and RANK, WORLD_SIZE)");
        const int world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1);
        c.comm = dptwin::exec::make_gloo_communicator(
            store, env_int("RANK", "OMPI_COMM_WORLD_RANK", 0), world, kTimeout,
            dptwin::exec::resolve_gloo_loop_nice(a.gloo_loop_nice, world, a.threads, dptwin::exec::usable_cores()));
      }
      c.rank = c.comm->rank();
      c.size = c.comm->size();
      doc["ranks"] = c.size;
      doc["backend"] = a.backend;
      bench_comm(a, c, doc);
      c.comm->barrier()->wait(kTimeout);
      write = c.rank == 0;
      c.comm.reset();
      if (a.backend == "mpi") dptwin::exec::mpi_finalize();
    }
    if (write) {
      if (a.out.empty()) {
        std::cout << doc.dump(1) << "\n";
      } else {
        std::ofstream f(a.out + ".tmp");
        f << doc.dump(1) << "\n";
        f.close();
        std::rename((a.out + ".tmp").c_str(), a.out.c_str());
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "dptwin-microbench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
