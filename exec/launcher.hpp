// exec/launcher.hpp — `dptwin exec`: start the ranks of a run and collect its result.
//
// Torch-free: the `dptwin` CLI links this (exec_launch_dep) without LibTorch.
// The ranks are `dptwin-exec` worker processes:
//  * backend gloo (and nccl): --np local processes, forked here, with RANK,
//    WORLD_SIZE, LOCAL_RANK, DPTWIN_STORE=file:<fresh temp dir>/store and the
//    thread variables (OMP/OPENBLAS/MKL_NUM_THREADS = --threads) set;
//  * backend mpi: one `mpirun -np N [--oversubscribe] [--allow-run-as-root]
//    --bind-to core|none -x ... dptwin-exec ...` (OpenMPI; core as --bind resolves);
//  * backend fake: one worker process whose ranks are threads.
// Every worker gets the same options as this command. A rank that dies or
// exits non-zero terminates the others (process.hpp); --launch-timeout-s
// bounds the whole job. When --out is given, a one-line summary of the result
// is printed.
//
// Thread-safety: call from one thread (it forks).
#pragma once

#include <string>
#include <vector>

#include "exec/options.hpp"
#include "exec/process.hpp"

namespace dptwin::exec {

// Entry point of `dptwin exec ARGS...` and of `dptwin-exec --np N` started
// without a rank environment. argv[0] is the program name; the rest are the
// options of exec_option_table(). Returns the exit code: 0 success, 2 bad
// input (message on stderr), 1 any rank failed or timed out.
int run_exec_command(int argc, char** argv);

// The dptwin-exec binary to start: --worker if given, else $DPTWIN_EXEC_WORKER,
// else next to the running executable or in ../exec/ (build tree), else the
// build-time path, else "dptwin-exec" from PATH.
std::string find_worker_binary(const std::string& hint);

// The processes run_exec_command would start (exposed for tests).
// `store_dir` is a fresh directory for the Gloo file store.
std::vector<ProcessSpec> plan_launch(const ExecOptions& o, const std::vector<std::string>& worker_args,
                                     const std::string& worker, const std::string& store_dir);

// Number of online CPU cores (for --oversubscribe decisions).
int online_cores();

}  // namespace dptwin::exec
