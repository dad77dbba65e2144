// exec/comm.hpp — the narrow communication interface the strategies use.
//
// A Communicator connects the `size()` ranks of a job. Every operation is
// asynchronous and returns a Work handle; wait() blocks until it is done or
// the timeout expires. Collectives must be issued in the same order on every
// rank of a communicator; split() gives an independent channel (its own MPI
// communicator / Gloo process group / fake channel) for a thread that issues
// collectives concurrently with the main thread (the Horovod loop).
//
// Backends (make_* in their own files): MPI (comm_mpi.cpp), Gloo and NCCL
// through c10d (comm_c10d.cpp, comm_nccl.cpp), and an in-process fake
// (comm_fake.cpp) whose ranks are threads of one process, for unit tests.
//
// Tensors: contiguous, on the backend's device; fp32, fp64, bf16, fp16, int32,
// int64 and uint8 are supported by every backend (Gloo in LibTorch 1.13 has no
// bf16: that backend reduces bf16 in an fp32 copy); bool for non-reducing ops. The caller keeps every
// tensor alive and untouched until its Work completes.
//
// Failures: a failed op completes its Work with an error; wait() throws
// CommError naming the op and rank; a wait that outlives its timeout throws
// CommTimeout. After a CommError the communicator is unusable; the caller
// aborts the job (abort_job()).
//
// Thread-safety: a Communicator may be used from several threads, but the
// order of collectives must be the same on all ranks (use split()).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/comm_fwd.hpp"
#include "exec/measure.hpp"

namespace dptwin::exec {

enum class ReduceOp { Sum, Min, Max };

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class CommTimeout : public CommError {
 public:
  using CommError::CommError;
};

// Completion handle of one operation. Completed exactly once by its backend.
class Work {
 public:
  explicit Work(std::string what) : what_(std::move(what)) {}

  // Blocks until done; throws CommError (the op failed) or CommTimeout.
  void wait(std::chrono::duration<double> timeout);
  bool completed() const;

  // Backend side: execution began / finished (error = nullptr on success).
  void mark_started(int64_t ns);
  void finish(int64_t end_ns, std::exception_ptr error = nullptr);
  // Runs `fn` once the work completes (immediately if it already has), on the
  // completing thread, before wait() returns.
  void on_complete(std::function<void(const Work&)> fn);

  // Backend side: a counter of threads blocked in wait() on works of one
  // communicator, so a polling backend can tell "a caller is idle, waiting"
  // (poll hard) from "the caller is computing" (poll gently).
  void count_waiters_in(std::shared_ptr<std::atomic<int>> counter) { waiters_ = std::move(counter); }

  const std::string& what() const { return what_; }
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  bool failed() const { return error_ != nullptr; }

 private:
  std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool finishing_ = false;  // finish() began: the figures below are final, callbacks run
  bool done_ = false;       // finish() ended: waiters may return
  std::exception_ptr error_;
  int64_t start_ns_ = -1, end_ns_ = -1;
  std::vector<std::function<void(const Work&)>> callbacks_;
  std::shared_ptr<std::atomic<int>> waiters_;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "gloo", "nccl", "fake"

  // In place on every rank.
  WorkPtr allreduce(at::Tensor t, ReduceOp op = ReduceOp::Sum);
  // Result in place on `root`; other ranks' tensors are left unspecified.
  WorkPtr reduce(at::Tensor t, int root, ReduceOp op = ReduceOp::Sum);
  WorkPtr broadcast(at::Tensor t, int root);
  // out.numel() == size() * in.numel(); rank r's input lands in out's r-th chunk.
  WorkPtr allgather(at::Tensor in, at::Tensor out);
  // in.numel() == size() * out.numel(); rank r receives the reduction of chunk r.
  WorkPtr reduce_scatter(at::Tensor in, at::Tensor out, ReduceOp op = ReduceOp::Sum);
  WorkPtr send(at::Tensor t, int dst, int tag = 0);
  WorkPtr recv(at::Tensor t, int src, int tag = 0);
  WorkPtr barrier();

  // A new independent channel over the same ranks. Collective call.
  virtual std::unique_ptr<Communicator> split(const std::string& name) = 0;

  // Records one comm span per op into `rec` (nullptr: none).
  void set_recorder(Recorder* rec) { recorder_ = rec; }
  // Temporarily stop recording ops (the clock stays the recorder's). For the
  // one thread that issues this communicator's ops (e.g. Horovod idle ticks).
  void set_recording(bool on) { recording_ = on; }
  Recorder* recorder() const { return recorder_; }

  // Default timeout used by wait_all() and the strategies.
  std::chrono::duration<double> timeout() const { return timeout_; }
  void set_timeout(std::chrono::duration<double> t) { timeout_ = t; }

  // Whether a thread blocked in wait() on this communicator's works leaves its
  // process idle (default true: the training thread waiting for its gradients).
  // Polling backends then poll hard. Set false for a helper thread (Horovod's
  // loop) that waits while the training thread computes.
  void set_waiters_idle(bool idle) { waiters_idle_ = idle; }
  bool waiters_idle() const { return waiters_idle_; }

  // Records the next op issued by the calling thread under `label` instead of
  // its kind (e.g. "allreduce.bucket3"). Only for the thread issuing that op.
  void label_next(std::string label) { next_label_ = std::move(label); }

 protected:
  virtual WorkPtr do_allreduce(at::Tensor& t, ReduceOp op) = 0;
  virtual WorkPtr do_reduce(at::Tensor& t, int root, ReduceOp op) = 0;
  virtual WorkPtr do_broadcast(at::Tensor& t, int root) = 0;
  virtual WorkPtr do_allgather(at::Tensor& in, at::Tensor& out) = 0;
  virtual WorkPtr do_reduce_scatter(at::Tensor& in, at::Tensor& out, ReduceOp op) = 0;
  virtual WorkPtr do_send(at::Tensor& t, int dst, int tag) = 0;
  virtual WorkPtr do_recv(at::Tensor& t, int src, int tag) = 0;
  virtual WorkPtr do_barrier() = 0;

  // Clock shared with the recorder (ns since its epoch), or a process-local one.
  int64_t now_ns() const;

 private:
  WorkPtr record(const char* kind, int64_t bytes, WorkPtr w, int64_t launch_ns);
  Recorder* recorder_ = nullptr;
  bool recording_ = true;
  bool waiters_idle_ = true;
  std::chrono::duration<double> timeout_{120.0};
  std::string next_label_;
};

// Ring allreduce (sum, in place) built only from send/recv: a reduce-scatter
// then an allgather over size() chunks, 2(n-1) steps in which every rank sends
// one chunk to its right neighbour and receives one from its left (each rank
// moves 2(n-1)/n of the buffer). Blocking, each step bounded by the timeout.
// Tags tag_base .. tag_base + 2n are used. REQUIRES contiguous t.
void ring_allreduce(Communicator& comm, at::Tensor t, int tag_base = 1000);

// Waits for all, in order, each with the communicator's timeout.
void wait_all(const std::vector<WorkPtr>& works, std::chrono::duration<double> timeout);

const char* to_string(ReduceOp op);

// The host's communication state (calibration's comm-state probe, read by
// `dptwin-microbench --mode comm` and by every multi-rank `dptwin-exec` run):
// the median seconds of `reps` allreduces of kCommStateBytes (fp32, on the
// CPU), each after a barrier and timed by the slowest rank, after one
// warm-up. Collective call; the same value on every rank. Not for NCCL
// (its tensors live on a GPU).
inline constexpr int64_t kCommStateBytes = 4096;
inline constexpr int kCommStateReps = 40;
double probe_comm_state(Communicator& comm, int reps = kCommStateReps);

// --- factories (each backend in its own translation unit) -------------------

// In-process fake: `size` communicators whose ranks are threads of this process.
std::vector<std::unique_ptr<Communicator>> make_fake_communicators(int size);

// MPI world (MPI_Init_thread(MPI_THREAD_MULTIPLE) on first use). Available when
// built with MPI (mpi_available()).
bool mpi_available();
std::unique_ptr<Communicator> make_mpi_communicator();
void mpi_finalize();            // at clean exit, after every MPI communicator is gone
[[noreturn]] void mpi_abort(int code);

// Gloo through c10d::ProcessGroupGloo. `store` is "file:PATH" or "tcp:HOST:PORT"
// (rank 0 serves the TCP store). Available when built with Gloo headers.
//
// `loop_nice`: how much nicer than the calling thread Gloo's TCP event-loop
// thread runs (named "gloo-loop"; capped at 19; 0 leaves it as Gloo starts it;
// relative, so that under `--nice -20` the loop keeps the same share). That thread takes a pair's lock
// with try_lock and, while a worker thread holds it (sending), goes back to a
// level-triggered epoll_wait that fires again at once: it spins until the
// worker lets go. Woken by incoming data on the core a worker shares with it
// (a rank bound to one core), it preempts that worker and spins out its time
// slice, 2-4 ms per collective; unbound, it spins on the other core, in the
// other rank's compute. Niced, it no longer preempts a worker of its core
// (exec/README "Gloo's event loop"). The options' default picks it by
// resolve_gloo_loop_nice (comm_fwd.hpp).
bool gloo_available();
std::unique_ptr<Communicator> make_gloo_communicator(const std::string& store, int rank, int size,
                                                     std::chrono::duration<double> timeout,
                                                     int loop_nice = kGlooLoopNice);

// NCCL through c10d::ProcessGroupNCCL (CUDA builds with -Dnccl=enabled only).
bool nccl_available();
std::unique_ptr<Communicator> make_nccl_communicator(const std::string& store, int rank, int size,
                                                     std::chrono::duration<double> timeout);

}  // namespace dptwin::exec
