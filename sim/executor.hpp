// sim/executor.hpp — runs a step graph of tasks on per-device streams.
//
// Strategies describe a training step as tasks: work on one stream of one
// device (compute, comm or host), with dependencies, and collectives (one
// member task per participating device on its comm stream, starting together
// when every member is ready). The Executor runs them on a Simulation:
//   * each stream runs its tasks one at a time in the order they were added
//     (CUDA-stream semantics: a task blocked on a dependency blocks the stream);
//   * a task starts when it heads its stream and its dependencies are done;
//   * a collective starts when all its members are ready, and all members end
//     together; its duration is priced when it starts (cached by the network);
//   * a compute task that starts while its device's comm stream is busy is
//     slowed by `overlap_slowdown`, one that starts while it is idle by
//     `background_slowdown`; compute tasks get `jitter` noise;
//   * a data collective entered after compute lasts longer, and one where the
//     ranks meet (no member computing) starts late, by the options'
//     synchronisation costs (ranks time-sharing cores).
// Tasks may be added while the simulation runs (Horovod's background loop
// does), and callbacks run when a task finishes.
//
// Thread-safety: one Executor per Simulation, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/engine.hpp"
#include "sim/timeline.hpp"

namespace dptwin::sim {

using TaskId = int32_t;
inline constexpr TaskId kNoTask = -1;

struct ExecutorOptions {
  double overlap_slowdown = 0.0;  // compute slowdown while the device's comm stream is busy
  double jitter = 0.0;            // relative std-dev of compute task durations
  // Compute slowdown while the device's comm stream is idle (a framework
  // thread that ticks between collectives shares the cores: Horovod's loop;
  // while a collective runs, overlap_slowdown applies instead).
  double background_slowdown = 0.0;
  // Ranks meeting at a data collective (Category::Communication): one entered
  // while no member computes (the training threads wait for each other)
  // starts `sync_lag` x (W / 100 ms)^`sync_exponent` after its last member is
  // ready, W the most compute a member ran since its previous such meeting (the
  // slowest real rank's lag behind identical simulated ones; collectives that
  // overlap compute realign nobody); every data collective with compute since
  // the member's previous one lasts `sync_latency` longer than its price.
  // Negotiation collectives are exempt (control traffic of a background thread).
  Time sync_lag;
  double sync_exponent = 0.5;
  Time sync_latency;
  // Ranks with a core each whose cores run at different speeds: at a meeting
  // the last also arrives `sync_skew` x W after the mean one (W as for
  // sync_lag: a fixed speed difference grows in proportion to the compute).
  double sync_skew = 0;
  // Ranks sharing one host's cores (processor sharing): when k compute tasks
  // of devices on one host run at once, each progresses at 1 / slowdown[k]
  // of its speed (slowdown[k] for k past the end: the last entry x k / (size-1)),
  // re-rated whenever one of them starts or ends. host_of_device[d] names
  // device d's host; empty (the default) leaves every task at its own speed.
  std::vector<int> host_of_device;
  std::vector<double> sharing_slowdown;  // index: tasks computing at once (entry 0 unused)
  // A data collective (Category::Communication) whose members are all ready
  // starts only once none of them computes: its transfers make no progress
  // while a member's cores run compute (on CPU hosts whose communication
  // thread runs at a low priority beside the rank's compute: a DDP bucket or
  // a Horovod allreduce launched during backward completes after it).
  bool comm_waits_for_compute = false;
  // With comm_waits_for_compute and host_of_device set: a collective waits
  // only while one of its members' hosts has no core to spare, i.e. while one
  // more compute task there would slow the others (sharing_slowdown above 1).
  // Unbound ranks: a computing rank's communication thread runs on an idle core.
  bool comm_needs_free_core = false;
};

class Executor {
 public:
  Executor(Simulation& sim, int devices, ExecutorOptions opts);

  // Interns a task name (names repeat across devices and steps).
  int32_t name_id(std::string_view name);
  const std::string& name(int32_t id) const { return names_[id]; }

  // A task of `duration` on one device's stream. Dependencies may be finished already.
  TaskId add_task(int device, StreamKind stream, Category cat, Time duration, int32_t name,
                  std::initializer_list<TaskId> deps = {}, double bytes = 0);
  TaskId add_task(int device, StreamKind stream, Category cat, Time duration, int32_t name,
                  const std::vector<TaskId>& deps, double bytes = 0);
  // Adds a dependency to a task that has not started yet.
  void add_dependency(TaskId task, TaskId before);

  // A collective over `devices`: one member task per device on its comm
  // stream, each waiting for deps[i] (kNoTask = none). `price` is called once,
  // when the collective starts, and returns its duration. Returns the member ids.
  std::vector<TaskId> add_collective(const std::vector<int>& devices, Category cat, int32_t name,
                                     const std::vector<std::vector<TaskId>>& deps, double bytes,
                                     std::function<Time()> price);

  // Runs `fn` when `task` finishes (after its dependents are released).
  void on_finish(TaskId task, std::function<void()> fn);

  bool finished(TaskId t) const { return tasks_[t].state == State::Done; }
  Time start_of(TaskId t) const { return tasks_[t].start; }
  Time end_of(TaskId t) const { return tasks_[t].end; }
  int device_of(TaskId t) const { return tasks_[t].device; }
  size_t task_count() const { return tasks_.size(); }
  int devices() const { return devices_; }

  struct TaskView {
    int device;
    StreamKind stream;
    Category category;
    int32_t name;
    Time start, end;
    double bytes;
  };
  TaskView view(TaskId t) const;

  // Sum over a device's tasks of the time spent waiting for a collective's
  // other members (member ready -> collective start).
  Time collective_wait(int device) const { return wait_[device]; }

 private:
  enum class State : uint8_t { Pending, Ready, Running, Done };
  struct Task {
    int32_t device;
    int32_t name;
    int32_t collective = -1;
    int32_t deps_left = 0;
    int32_t first_edge = -1;  // dependents list (edges_)
    int32_t callback = -1;
    StreamKind stream;
    Category category;
    State state = State::Pending;
    bool queued_head = false;
    bool sharing = false;  // running under processor sharing (below)
    Time duration;
    Time start, end, ready_at;
    double bytes = 0;
    // Processor sharing (compute tasks on a shared host): work left in
    // nanoseconds at full speed, as of `rated_at`, at `rate`; `version` tells
    // a finish event scheduled before the last re-rating to do nothing.
    double work_left = 0, rate = 1;
    Time rated_at;
    uint32_t version = 0;
  };
  struct Edge {
    TaskId target;
    int32_t next;
  };
  struct Collective {
    std::vector<TaskId> members;
    int ready = 0;
    std::function<Time()> price;
  };
  struct StreamState {
    std::vector<TaskId> queue;  // FIFO
    size_t head = 0;
    bool busy = false;
  };

  TaskId new_task(int device, StreamKind stream, Category cat, Time duration, int32_t name, double bytes);
  void link(TaskId before, TaskId after);
  StreamState& stream_of(int device, StreamKind s) { return streams_[device * 3 + static_cast<int>(s)]; }
  const StreamState& stream_of(int device, StreamKind s) const { return streams_[device * 3 + static_cast<int>(s)]; }
  void try_start_head(int device, StreamKind s);
  void start(TaskId t);
  void finish(TaskId t);
  void member_ready(TaskId t);
  bool comm_held(int32_t cid) const;  // comm_waits_for_compute: whether the collective must wait now
  void meet(int32_t collective);             // every member ready: start, after the ranks' lag
  bool members_computing(int32_t collective) const;
  void start_collective(int32_t collective, Time extra);
  bool shares_host(const Task& t) const { return t.stream == StreamKind::Compute && !opts_.host_of_device.empty(); }
  double slowdown(size_t computing) const;
  // Re-rates the running compute tasks of `host` (after one started or ended).
  void rerate(int host);
  void schedule_finish(TaskId t);

  Simulation& sim_;
  int devices_;
  ExecutorOptions opts_;
  std::vector<Task> tasks_;
  std::vector<Edge> edges_;
  std::vector<Collective> collectives_;
  std::vector<StreamState> streams_;
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int32_t> name_index_;
  std::vector<Time> wait_;
  std::vector<Time> compute_since_sync_;     // per device: compute finished since its last data collective
  std::vector<int32_t> deferred_;  // collectives ready but waiting for their members' compute (comm_waits_for_compute)
  std::vector<Time> compute_since_meeting_;  // ... since its last data collective entered with compute idle
  std::vector<std::pair<int, StreamKind>> scratch_;
  std::vector<std::vector<TaskId>> computing_;  // per host: its running compute tasks
};

}  // namespace dptwin::sim
