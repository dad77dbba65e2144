// report/sweep.cpp — sweeps on a thread pool, the progress bar and rank shares (see sweep.hpp).
#include "report/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "sim/simulate.hpp"

namespace dptwin::report {

ProgressBar::ProgressBar(std::ostream& out, std::string label, bool enabled)
    : out_(out), label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()),
      last_(start_ - std::chrono::seconds(1)) {}

std::string ProgressBar::render(const std::string& label, size_t done, size_t total, double seconds, int width) {
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * width + 1e-9);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(width - filled), '.');
  std::string eta;
  if (done > 0 && done < total) eta = fmt::format(", ~{:.0f} s left", seconds / frac - seconds);
  return fmt::format("{} [{}] {}/{} ({:.0f}%) {:.1f} s{}", label, bar, done, total, frac * 100, seconds, eta);
}

void ProgressBar::update(size_t done, size_t total) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(50)) return;
  last_ = now;
  out_ << "\r" << render(label_, done, total, std::chrono::duration<double>(now - start_).count()) << "\x1b[K"
       << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  std::lock_guard lock(mu_);
  if (enabled_ && drawn_) out_ << "\n" << std::flush;
  drawn_ = false;
}

std::vector<size_t> rank_share(size_t points, int rank, int ranks) {
  std::vector<size_t> out;
  if (ranks < 1 || rank < 0 || rank >= ranks) return out;
  for (size_t i = static_cast<size_t>(rank); i < points; i += static_cast<size_t>(ranks)) out.push_back(i);
  return out;
}

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v) > 1;
  }
  return false;
}

std::vector<sim::PointResult> run_sweep(const std::vector<sim::PointSpec>& points, const MpiWorld& world,
                                        const SweepOptions& options) {
  const auto share = rank_share(points.size(), world.rank, world.size);
  std::vector<sim::PointSpec> mine;
  mine.reserve(share.size());
  for (size_t i : share) mine.push_back(points[i]);
  std::function<void(size_t, size_t)> progress;
  if (options.progress) progress = [bar = options.progress](size_t d, size_t t) { bar->update(d, t); };
  auto results = sim::simulate_all(mine, options.threads, progress);
  if (options.progress) options.progress->finish();
  return mpi_gather(world, points.size(), share, results);
}

}  // namespace dptwin::report
