// report/sweep_mpi.cpp — the MPI part of sweeps (see sweep.hpp).
//
// Compiled with MPI only when Meson found it (DPTWIN_HAVE_MPI); otherwise every
// function degrades to a single-rank world. Results travel as the simulator's
// JSON text (sim::point_to_json; doubles round-trip exactly) and are read back
// with report::point_from_json on rank 0.
#include <fmt/format.h>

#include <iostream>
#include <limits>
#include <stdexcept>

#include "report/result_json.hpp"
#include "report/sweep.hpp"
#include "sim/output.hpp"

#ifdef DPTWIN_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace dptwin::report {
namespace {

std::vector<sim::PointResult> place(size_t total, const std::vector<size_t>& share,
                                    const std::vector<sim::PointResult>& mine) {
  std::vector<sim::PointResult> out(total);
  for (size_t k = 0; k < share.size() && k < mine.size(); ++k) out[share[k]] = mine[k];
  return out;
}

}  // namespace

bool mpi_compiled() {
#ifdef DPTWIN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

MpiWorld mpi_start([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
  MpiWorld w;
  if (!launched_by_mpirun()) return w;
#ifdef DPTWIN_HAVE_MPI
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.active = true;
#else
  std::cerr << "warning: started by mpirun, but this dptwin was built without MPI: every rank runs the whole "
               "sweep on its own\n";
#endif
  return w;
}

void mpi_stop([[maybe_unused]] MpiWorld& w) {
#ifdef DPTWIN_HAVE_MPI
  if (w.active) MPI_Finalize();
#endif
  w.active = false;
}

std::vector<sim::PointResult> mpi_gather(const MpiWorld& w, size_t total, const std::vector<size_t>& share,
                                         const std::vector<sim::PointResult>& mine) {
  if (!w.active || w.size <= 1) return place(total, share, mine);
#ifdef DPTWIN_HAVE_MPI
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (size_t k = 0; k < mine.size(); ++k) arr.push_back(sim::point_to_json(mine[k], share[k]));
  const std::string text = arr.dump();
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("sweep: one rank's results exceed 2 GiB of JSON; use more ranks");
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<size_t>(w.size)), displs(static_cast<size_t>(w.size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (w.rank == 0) {
    long long sum = 0;
    for (int r = 0; r < w.size; ++r) displs[r] = static_cast<int>(sum), sum += lens[r];
    if (sum > std::numeric_limits<int>::max())
      throw std::runtime_error("sweep: results exceed 2 GiB of JSON on rank 0");
    all.resize(static_cast<size_t>(sum));
  }
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w.rank != 0) return {};
  std::vector<sim::PointResult> out(total);
  std::vector<bool> seen(total, false);
  for (int r = 0; r < w.size; ++r) {
    const auto part = nlohmann::ordered_json::parse(all.substr(static_cast<size_t>(displs[r]),
                                                               static_cast<size_t>(lens[r])));
    for (const auto& p : part) {
      const size_t i = p.at("index").get<size_t>();
      if (i >= total || seen[i]) throw std::runtime_error(fmt::format("sweep: rank {} sent point {} twice", r, i));
      out[i] = point_from_json(p);
      seen[i] = true;
    }
  }
  for (size_t i = 0; i < total; ++i)
    if (!seen[i]) throw std::runtime_error(fmt::format("sweep: no rank returned point {}", i));
  return out;
#else
  return place(total, share, mine);
#endif
}

}  // namespace dptwin::report
