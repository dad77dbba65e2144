// exec/worker.hpp — the `dptwin-exec` worker: one rank of a run.
//
// run_worker() parses the exec options, finds its rank (RANK/WORLD_SIZE from
// the built-in launcher or torchrun; OMPI_COMM_WORLD_*, PMI_* or SLURM_* under
// mpirun/srun; MPI itself for the mpi backend), pins its thread count (it
// re-executes itself once when OMP/OPENBLAS_NUM_THREADS differ from --threads,
// because those libraries read them at load time), connects the backend,
// trains, gathers every rank's report on rank 0, which writes the result JSON
// and the optional Chrome trace. Started with --np N > 1 and no rank
// environment, it launches the job itself (run_exec_command). With --backend
// fake the N ranks are threads of this process.
//
// Exit codes: 0 ok, 2 bad input, 1 runtime failure (the message names the
// rank; under MPI the whole job is aborted so no peer is left waiting).
#pragma once

namespace dptwin::exec {

int run_worker(int argc, char** argv);

// OpenBLAS and OpenMP read their thread counts when they are loaded: sets
// OMP/OPENBLAS/MKL_NUM_THREADS to `threads`, re-executes this process image once
// (argv) when they differed, and sets torch's intra-op threads. Used by every
// LibTorch process of dptwin (worker, microbenchmarks).
void pin_threads_or_reexec(int threads, char** argv);

}  // namespace dptwin::exec
