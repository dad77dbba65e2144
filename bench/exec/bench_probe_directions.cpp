// bench/exec/bench_probe_directions.cpp — which speed probe follows which kind
// of op on this host (issue 4: calibration repeatability).
//
// The calibration rescales every compute case by one probe class read next to
// it (exec/microbench's SpeedProbe: a 512x768x768 GEMM in fp32 and bf16, a
// 1M-element add streaming over a pool larger than the cache (since
// 2026-12-06; before, on one cached set of operands), a one-element in-place
// add for the dispatch cost), and `dptwin validate --run-states` moves the profile
// by the same classes. That works as far as each kind of op moves with its
// class's probe when the host's state moves. This benchmark reads the probes
// and a few ops of a training step back to back for a while, each op on a
// pool of operands larger than the cache as the compute suite does, plus the
// former cached add probe and a candidate (a 4K-element add), and prints, for
// medians over blocks of consecutive
// iterations, each op's correlation and slope (log change against log change)
// against every probe: the probe an op follows has r near 1.
//
//   build/bench/exec/bench_probe_directions [--seconds 300] [--block 50]
//
// Threads are pinned to one (set OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1 too).
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "exec/result.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using dptwin::exec::compute_stats;

// Median seconds of `reps` calls after one warm-up call.
double timed(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> xs;
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    f();
    xs.push_back(std::chrono::duration<double>(Clock::now() - t).count());
  }
  return compute_stats(std::move(xs)).median;
}

std::vector<torch::Tensor> pool(std::vector<int64_t> shape, torch::ScalarType dt, int n) {
  std::vector<torch::Tensor> v;
  for (int i = 0; i < n; ++i) v.push_back(torch::randn(shape).to(dt));
  return v;
}

struct Series {
  std::string name;
  bool probe;
  std::function<double()> read;
  std::vector<double> xs;
};

// Pearson correlation and least-squares slope of y on x.
std::pair<double, double> fit(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 0 && syy > 0)) return {0.0, 0.0};
  return {sxy / std::sqrt(sxx * syy), sxy / sxx};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 300;
  int block = 50;
  CLI::App app{"which calibration speed probe each kind of op follows on this host"};
  app.add_option("--seconds", seconds, "how long to read")->check(CLI::PositiveNumber);
  app.add_option("--block", block, "iterations a block (its medians are correlated)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  torch::NoGradGuard no_grad;

  // The calibration's probes as SpeedProbe::quick reads them (3 timed calls).
  auto A = torch::randn({512, 768}), B = torch::randn({768, 768}), C = torch::zeros({512, 768});
  auto Ah = A.to(torch::kBFloat16), Bh = B.to(torch::kBFloat16), Ch = C.to(torch::kBFloat16);
  auto x = torch::randn({1 << 20}), y = torch::randn({1 << 20}), z = torch::empty({1 << 20});
  auto one = torch::zeros({1});
  // The add probe streaming over 24 x 12 MiB as SpeedProbe reads it; a 4K-element add (a candidate).
  constexpr int kStream = 24;
  auto SX = pool({1 << 20}, torch::kFloat, kStream), SY = pool({1 << 20}, torch::kFloat, kStream),
       SZ = pool({1 << 20}, torch::kFloat, kStream);
  int s = 0;
  auto a4 = torch::randn({4096}), b4 = torch::randn({4096}), c4 = torch::empty({4096});
  // Ops of a step, on pools of operands, in the compute suite's forms (tanh
  // GELU, layernorm without affine parameters into preallocated outputs).
  auto SM = pool({256, 1024}, torch::kFloat, 64), SMo = pool({256, 1024}, torch::kFloat, 64);
  auto SH = pool({256, 1024}, torch::kBFloat16, 64), SHo = pool({256, 1024}, torch::kBFloat16, 64);
  auto LN = pool({512, 768}, torch::kFloat, 48), LNo = pool({512, 768}, torch::kFloat, 48);
  auto LNm = pool({512, 1}, torch::kFloat, 48), LNr = pool({512, 1}, torch::kFloat, 48);
  auto GE = pool({512, 1024}, torch::kFloat, 48), GEo = pool({512, 1024}, torch::kFloat, 48);
  auto AD = pool({65536}, torch::kFloat, 64), ADo = pool({65536}, torch::kFloat, 64);
  auto MA = pool({32, 64}, torch::kFloat, 16), MB = pool({64, 192}, torch::kFloat, 16);
  auto GA = pool({256, 768}, torch::kFloat, 16), GB = pool({768, 768}, torch::kFloat, 16);
  size_t k = 0;
  auto next = [&k](std::vector<torch::Tensor>& v) -> torch::Tensor& { return v[k++ % v.size()]; };

  std::vector<Series> series = {
      {"gemm fp32 (probe)", true, [&] { return timed([&] { at::matmul_out(C, A, B); }, 3); }, {}},
      {"gemm bf16 (probe)", true, [&] { return timed([&] { at::matmul_out(Ch, Ah, Bh); }, 3); }, {}},
      {"add cached (former)", true, [&] { return timed([&] { at::add_out(z, x, y); at::add_out(z, x, y); }, 3) / 2; }, {}},
      {"dispatch (probe)", true, [&] { return timed([&] { for (int i = 0; i < 200; ++i) one.add_(1.0); }, 3) / 200; }, {}},
      {"add stream (probe)", true, [&] { return timed([&] { at::add_out(SZ[s], SX[s], SY[s]); s = (s + 1) % kStream; }, kStream); }, {}},
      {"add 4K", true, [&] { return timed([&] { at::add_out(c4, a4, b4); }, 50); }, {}},
      {"softmax fp32 256x1024", false, [&] { return timed([&] { auto& i = next(SM); at::_softmax_out(next(SMo), i, -1, false); }, 32); }, {}},
      {"softmax bf16 256x1024", false, [&] { return timed([&] { auto& i = next(SH); at::_softmax_out(next(SHo), i, -1, false); }, 32); }, {}},
      {"layernorm fp32 512x768", false, [&] { return timed([&] {
         const size_t j = k++ % LN.size();
         at::native_layer_norm_out(LNo[j], LNm[j], LNr[j], LN[j], {768}, {}, {}, 1e-5); }, 24); }, {}},
      {"gelu tanh fp32 512x1024", false, [&] { return timed([&] { auto& i = next(GE); at::gelu_out(next(GEo), i, "tanh"); }, 24); }, {}},
      {"add fp32 64K", false, [&] { return timed([&] { auto& i = next(AD); at::add_out(next(ADo), i, i); }, 50); }, {}},
      {"gemm fp32 32x64x192", false, [&] { return timed([&] { auto& a = next(MA); auto o = torch::matmul(a, next(MB)); }, 50); }, {}},
      {"gemm fp32 256x768x768", false, [&] { return timed([&] { auto& a = next(GA); auto o = torch::matmul(a, next(GB)); }, 8); }, {}},
  };
  const auto t0 = Clock::now();
  size_t iterations = 0;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    for (Series& x : series) x.xs.push_back(x.read());
    ++iterations;
  }
  const size_t blocks = iterations / static_cast<size_t>(block);
  std::printf("%zu iterations in %.0f s; medians over blocks of %d iterations (%zu blocks, %.1f s each)\n", iterations,
              seconds, block, blocks, seconds / static_cast<double>(std::max<size_t>(blocks, 1)));
  if (blocks < 3) {
    std::fprintf(stderr, "too few blocks: run longer or use a smaller --block\n");
    return 1;
  }
  for (Series& x : series) {
    std::vector<double> b;
    for (size_t i = 0; i < blocks; ++i)
      b.push_back(std::log(compute_stats({x.xs.begin() + static_cast<long>(i * block),
                                          x.xs.begin() + static_cast<long>((i + 1) * block)}).median));
    x.xs = std::move(b);
  }
  std::printf("%-24s %9s %6s", "op (median)", "seconds", "sd");
  for (const Series& p : series)
    if (p.probe) std::printf(" | %-19.19s", p.name.c_str());
  std::printf("\n%-24s %9s %6s", "", "", "");
  for (const Series& p : series)
    if (p.probe) std::printf(" | %8s %10s", "r", "slope");
  std::printf("\n");
  for (const Series& c : series) {
    const auto st = compute_stats(c.xs);
    std::printf("%-24s %9.3g %6.3f", c.name.c_str(), std::exp(st.median), st.stdev);
    for (const Series& p : series) {
      if (!p.probe) continue;
      const auto [r, slope] = fit(p.xs, c.xs);
      std::printf(" | %8.2f %10.2f", r, slope);
    }
    std::printf("\n");
  }
  return 0;
}
