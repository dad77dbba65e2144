// exec/worker.cpp — see worker.hpp.
#include "exec/worker.hpp"

#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <thread>

#include "core/error.hpp"
#include "exec/atomic_file.hpp"
#include "exec/comm.hpp"
#include "exec/launcher.hpp"
#include "exec/process.hpp"
#include "exec/trainer.hpp"

namespace dptwin::exec {
namespace {

struct RankEnv {
  bool present = false;
  int rank = 0, world = 1;
  std::string source;
};

RankEnv detect_rank_env() {
  static const char* const kPairs[][3] = {{"RANK", "WORLD_SIZE", "launcher"},
                                          {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
                                          {"PMI_RANK", "PMI_SIZE", "PMI"},
                                          {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"}};
  for (const auto& p : kPairs) {
    const char* r = std::getenv(p[0]);
    const char* w = std::getenv(p[1]);
    if (r && w) return {true, std::atoi(r), std::atoi(w), p[2]};
  }
  return {};
}

// Ranks on this host: torchrun's and the launcher's LOCAL_WORLD_SIZE, mpirun's
// local size, else all of them (the netns validation's "nodes" share this
// host's cores).
int host_ranks(int world) {
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (const char* v = std::getenv(var); v && std::atoi(v) > 0) return std::atoi(v);
  return world;
}

std::string gloo_store(const ExecOptions& o, const RankEnv& env) {
  if (!o.store.empty()) return o.store;
  if (const char* s = std::getenv("DPTWIN_STORE"); s && *s) return s;
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr && port) return fmt::format("tcp:{}:{}", addr, port);
  for (const char* var : {"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "SLURM_JOB_ID"})
    if (const char* id = std::getenv(var); id && *id) return fmt::format("file:/tmp/dptwin-gloo-{}", id);
  if (env.world == 1) return fmt::format("file:/tmp/dptwin-gloo-single-{}", ::getpid());
  throw InputError(SourceLocation{"command line", 0, 0}, "--store",
                   "gloo needs a rendezvous: --store file:PATH|tcp:HOST:PORT, DPTWIN_STORE, or MASTER_ADDR/MASTER_PORT");
}

void write_outputs(const ExecOptions& o, const TrainOutput& mine, const std::vector<RankReport>& all) {
  if (!o.out.empty()) write_file_atomically(o.out, make_result(mine.info, all).dump(1));
  if (!o.trace.empty()) write_file_atomically(o.trace, make_chrome_trace(all).dump());
}

// One rank: train, gather, write (rank 0). `rec` outlives `comm` (late
// completions of failed operations still record into it).
// A multi-rank CPU run reads the host's communication state before and after
// training (unrecorded), so that a validation can price its collectives at
// the state it ran in (validate/README "The host's communication state").
void run_rank(const ExecOptions& o, Communicator* comm, Recorder& rec) {
  const bool probe = comm && comm->size() > 1 && comm->backend() != "nccl";
  std::vector<double> state;
  if (probe) state.push_back(probe_comm_state(*comm));
  if (comm) comm->set_recorder(&rec);
  auto out = train_rank(o, comm, rec);
  if (comm) comm->set_recorder(nullptr);
  if (probe) {
    state.push_back(probe_comm_state(*comm));
    out.info.comm_state_s = state;
    out.info.comm_state_bytes = kCommStateBytes;
  }
  const auto all = gather_reports(comm, out.report);
  if (!comm || comm->rank() == 0) write_outputs(o, out, all);
  if (comm) comm->barrier()->wait(comm->timeout());
}

int run_fake(const ExecOptions& o) {
  auto comms = make_fake_communicators(o.np);
  std::vector<std::string> errors(static_cast<size_t>(o.np));
  std::vector<Recorder> recs(static_cast<size_t>(o.np));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.np; ++r) {
    comms[static_cast<size_t>(r)]->set_timeout(std::chrono::duration<double>(o.comm_timeout_s));
    threads.emplace_back([&, r] {
      try {
        run_rank(o, comms[static_cast<size_t>(r)].get(), recs[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  int rc = 0;
  for (int r = 0; r < o.np; ++r)
    if (!errors[static_cast<size_t>(r)].empty()) {
      std::fprintf(stderr, "dptwin-exec rank %d: error: %s\n", r, errors[static_cast<size_t>(r)].c_str());
      rc = kExitRuntimeError;
    }
  return rc;
}

}  // namespace

void pin_threads_or_reexec(int threads, char** argv) {
  const std::string t = std::to_string(threads);
  bool mismatch = false;
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
    const char* cur = std::getenv(var);
    if (!cur || t != cur) {
      mismatch = true;
      ::setenv(var, t.c_str(), 1);
    }
  }
  if (mismatch && !std::getenv("DPTWIN_REEXEC")) {
    ::setenv("DPTWIN_REEXEC", "1", 1);
    ::execv("/proc/self/exe", argv);  // on failure, carry on with what we have
  }
  torch::set_num_threads(threads);
}

int run_worker(int argc, char** argv) {
  ExecOptions o;
  if (auto code = parse_exec_options_or_exit(argc, argv, "dptwin-exec", o)) return *code;
  const RankEnv env = detect_rank_env();
  if (!env.present && o.np > 1 && o.backend != "fake" && !std::getenv("DPTWIN_LAUNCHED"))
    return run_exec_command(argc, argv);  // launch the job ourselves
  pin_threads_or_reexec(o.threads, argv);

  const bool is_mpi = o.backend == "mpi";
  int rank = env.rank;
  // Declared outside the try: on failure nothing is destroyed — peers may still
  // be blocked in a collective with us and a backend's destructor would wait
  // for them; the process exits at once instead (MPI: the job is aborted).
  Recorder rec;
  std::unique_ptr<Communicator> comm;
  auto fail = [&](int code, const char* what) {
    std::fprintf(stderr, "dptwin-exec rank %d: error: %s\n", rank, what);
    std::fflush(stderr);
    (void)comm.release();
    if (is_mpi) mpi_abort(code);
    std::_Exit(code);
  };
  try {
    if (o.backend == "fake") return run_fake(o);
    const bool in_process = o.strategy == "single" || o.devices_per_process > 1;  // no peers to talk to
    const bool needs_comm = !in_process || env.world > 1 || is_mpi;
    if (needs_comm) {
      const auto timeout = std::chrono::duration<double>(o.comm_timeout_s);
      if (is_mpi) {
        comm = make_mpi_communicator();
      } else if (o.backend == "nccl") {
        comm = make_nccl_communicator(gloo_store(o, env), env.rank, env.world, timeout);
      } else {
        comm = make_gloo_communicator(
            gloo_store(o, env), env.rank, env.world, timeout,
            resolve_gloo_loop_nice(o.gloo_loop_nice, host_ranks(env.world), o.threads, usable_cores()));
      }
      comm->set_timeout(timeout);
      rank = comm->rank();
      if (o.np != 1 && o.np != comm->size())
        throw InputError(SourceLocation{"command line", 0, 0}, "--np",
                         fmt::format("--np {} but the job has {} ranks", o.np, comm->size()));
      o.np = comm->size();
      if (o.strategy == "single" && o.np > 1)
        throw InputError(SourceLocation{"command line", 0, 0}, "--strategy", "single runs on exactly 1 rank");
      if (o.devices_per_process > 1 && o.np > 1)
        throw InputError(SourceLocation{"command line", 0, 0}, "--devices-per-process",
                         "sps with replicas in one process runs on exactly 1 rank");
    }
    run_rank(o, comm.get(), rec);
    comm.reset();
    if (is_mpi) mpi_finalize();
    return 0;
  } catch (const InputError& e) {
    fail(kExitInputError, e.what());
  } catch (const std::exception& e) {
    fail(kExitRuntimeError, e.what());
  }
  return kExitRuntimeError;
}

}  // namespace dptwin::exec
