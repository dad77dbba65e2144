// bench/exec/bench_exec_allreduce.cpp — allreduce bandwidth of dptwin's comm
// backends against plain MPI_Allreduce, 1 MB to 256 MB (fp32, sum).
//
//   mpirun -np 2 [--oversubscribe] bench_exec_allreduce [--min-mb 1] [--max-mb 256] [--json out.json]
//
// Runs as one rank of an MPI job; the Gloo group rendezvouses through a file
// store named after the MPI job. For each size and implementation: one warm-up,
// then `iters` timed operations (each after a barrier); the median time gives
// algbw = bytes / t and busbw = algbw · 2(n-1)/n (nccl-tests' convention).
// Implementations: "MPI_Allreduce" (direct call, the baseline), "dptwin mpi"
// (the MPI backend: op thread + Work handle), "dptwin gloo" (c10d Gloo).
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/comm.hpp"

using namespace dptwin::exec;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  double min_mb = 1, max_mb = 256;
  std::string json_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--min-mb") min_mb = std::atof(argv[i + 1]);
    else if (k == "--max-mb") max_mb = std::atof(argv[i + 1]);
    else if (k == "--json") json_out = argv[i + 1];
  }
  torch::set_num_threads(1);
  auto mpi = make_mpi_communicator();  // initializes MPI (THREAD_MULTIPLE)
  const int rank = mpi->rank(), size = mpi->size();
  std::unique_ptr<Communicator> gloo;
  if (gloo_available()) {
    std::string job = "local";
    for (const char* var : {"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
      if (const char* v = std::getenv(var)) job = v;
    long root_pid = static_cast<long>(::getpid());
    MPI_Bcast(&root_pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    const std::string store = "file:/tmp/dptwin-bench-allreduce-" + job + "-" + std::to_string(root_pid);
    gloo = make_gloo_communicator(store, rank, size, std::chrono::seconds(300));
  }
  const auto timeout = std::chrono::seconds(300);

  struct Impl {
    std::string name;
    std::function<void(torch::Tensor&)> run;
  };
  std::vector<Impl> impls;
  impls.push_back({"MPI_Allreduce", [](torch::Tensor& t) {
                     MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
                   }});
  impls.push_back({"dptwin mpi", [&](torch::Tensor& t) { mpi->allreduce(t)->wait(timeout); }});
  if (gloo) impls.push_back({"dptwin gloo", [&](torch::Tensor& t) { gloo->allreduce(t)->wait(timeout); }});

  nlohmann::json rows = nlohmann::json::array();
  if (rank == 0) {
    std::printf("allreduce (fp32 sum), %d ranks; busbw = algbw * 2(n-1)/n; median of timed iterations\n", size);
    std::printf("%10s", "size MB");
    for (const auto& im : impls) std::printf("  %22s", (im.name + " busbw GB/s").c_str());
    std::printf("  %s\n", "gloo / MPI_Allreduce");
  }
  for (double mb = min_mb; mb <= max_mb + 1e-9; mb *= 2) {
    const int64_t n = static_cast<int64_t>(mb * 1e6 / 4);
    auto t = torch::ones({n});
    const int iters = std::max(3, std::min(20, static_cast<int>(512.0 / mb)));
    nlohmann::json row = {{"bytes", n * 4}, {"ranks", size}};
    std::vector<double> busbw;
    for (auto& im : impls) {
      im.run(t);  // warm-up
      std::vector<double> times;
      for (int i = 0; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_s();
        im.run(t);
        double dt = now_s() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(dt);
      }
      const double med = median(times);
      const double algbw = static_cast<double>(n * 4) / med / 1e9;
      const double bus = algbw * 2.0 * (size - 1) / std::max(1, size);
      busbw.push_back(bus);
      row[im.name] = {{"time_s", med}, {"algbw_GBps", algbw}, {"busbw_GBps", bus}, {"iters", iters}};
    }
    if (rank == 0) {
      std::printf("%10.0f", mb);
      for (double b : busbw) std::printf("  %22.3f", b);
      if (busbw.size() > 2) std::printf("  %.2fx", busbw[2] / busbw[0]);
      std::printf("\n");
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  if (rank == 0 && !json_out.empty()) std::ofstream(json_out) << nlohmann::json{{"allreduce", rows}}.dump(1) << "\n";
  gloo.reset();
  mpi.reset();
  mpi_finalize();
  return 0;
}
