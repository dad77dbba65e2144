// report/sweep.hpp — `dptwin sweep`: a scenario grid on every core, optionally over MPI ranks.
//
//   ProgressBar         a one-line progress bar for a terminal (stderr)
//   rank_share          the points rank r of K takes: i % K == r
//   MpiWorld            MPI when launched by mpirun and compiled in (DPTWIN_HAVE_MPI)
//   run_sweep           simulates this rank's share on a thread pool, gathers on rank 0
//
// MPI is optional twice over: the MPI code is compiled only when Meson found
// MPI (report/sweep_mpi.cpp, DPTWIN_HAVE_MPI), and MPI_Init is called only when
// the process was started by mpirun (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_RANK in the environment), so plain runs never touch MPI.
//
// Thread-safety: run_sweep uses a thread pool internally; ProgressBar::update
// may be called from several threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "sim/results.hpp"
#include "sim/scenario.hpp"

namespace dptwin::report {

class ProgressBar {
 public:
  // Draws nothing when `enabled` is false (e.g. stderr is not a terminal).
  ProgressBar(std::ostream& out, std::string label, bool enabled);
  void update(size_t done, size_t total);  // redraws at most every 50 ms (and at the end)
  void finish();                           // ends the line
  // The bar text for `done` of `total` after `seconds` (pure; unit-tested).
  static std::string render(const std::string& label, size_t done, size_t total, double seconds, int width = 30);

 private:
  std::ostream& out_;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_;
};

// Indices of the points rank `rank` of `ranks` simulates: i % ranks == rank.
std::vector<size_t> rank_share(size_t points, int rank, int ranks);

struct MpiWorld {
  int rank = 0;
  int size = 1;
  bool active = false;  // MPI_Init was called
};

bool mpi_compiled();
// True when the environment says mpirun started this process with more than one rank.
bool launched_by_mpirun();
// Initialises MPI when compiled in and launched by mpirun; otherwise a 1-rank world.
MpiWorld mpi_start(int* argc, char*** argv);
void mpi_stop(MpiWorld& world);

// Rank 0 receives every rank's results in point order (`total` points; each rank
// passes its share and the results for it); other ranks get an empty vector.
// Without an active world returns `mine` placed in order.
std::vector<sim::PointResult> mpi_gather(const MpiWorld& world, size_t total, const std::vector<size_t>& share,
                                         const std::vector<sim::PointResult>& mine);

struct SweepOptions {
  int threads = 0;             // per rank; 0 = all cores
  ProgressBar* progress = nullptr;
};

// Simulates the points this rank owns and gathers them on rank 0 (see mpi_gather).
std::vector<sim::PointResult> run_sweep(const std::vector<sim::PointSpec>& points, const MpiWorld& world,
                                        const SweepOptions& options);

}  // namespace dptwin::report
