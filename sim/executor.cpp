#include "sim/executor.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dptwin::sim {

Executor::Executor(Simulation& sim, int devices, ExecutorOptions opts)
    : sim_(sim), devices_(devices), opts_(opts), streams_(static_cast<size_t>(devices) * 3), wait_(devices),
      compute_since_sync_(devices), compute_since_meeting_(devices) {
  if (!opts_.host_of_device.empty()) {
    DPTWIN_ASSERT(static_cast<int>(opts_.host_of_device.size()) == devices, "one host per device");
    computing_.resize(*std::max_element(opts_.host_of_device.begin(), opts_.host_of_device.end()) + 1);
  }
}

double Executor::slowdown(size_t k) const {
  const auto& f = opts_.sharing_slowdown;
  if (k < f.size()) return std::max(1.0, f[k]);
  if (f.size() < 2) return 1.0;
  return std::max(1.0, f.back() * static_cast<double>(k) / static_cast<double>(f.size() - 1));
}

void Executor::schedule_finish(TaskId id) {
  Task& t = tasks_[id];
  const uint32_t v = ++t.version;
  const double left = std::max(0.0, t.work_left) / t.rate;
  sim_.schedule_in(Time::ns(static_cast<int64_t>(std::ceil(left))), [this, id, v] {
    if (tasks_[id].version == v) finish(id);
  });
}

void Executor::rerate(int host) {
  const auto& running = computing_[host];
  const double rate = 1.0 / slowdown(running.size());
  for (TaskId id : running) {
    Task& t = tasks_[id];
    t.work_left -= static_cast<double>((sim_.now() - t.rated_at).count_ns()) * t.rate;
    t.rated_at = sim_.now();
    if (t.rate == rate) continue;
    t.rate = rate;
    schedule_finish(id);
  }
}

int32_t Executor::name_id(std::string_view name) {
  auto it = name_index_.find(std::string(name));
  if (it != name_index_.end()) return it->second;
  int32_t id = static_cast<int32_t>(names_.size());
  names_.emplace_back(name);
  name_index_.emplace(names_.back(), id);
  return id;
}

TaskId Executor::new_task(int device, StreamKind stream, Category cat, Time duration, int32_t name, double bytes) {
  DPTWIN_ASSERT(device >= 0 && device < devices_, "task on unknown device");
  Task t;
  t.device = device;
  t.name = name;
  t.stream = stream;
  t.category = cat;
  t.duration = duration;
  t.bytes = bytes;
  tasks_.push_back(t);
  return static_cast<TaskId>(tasks_.size() - 1);
}

void Executor::link(TaskId before, TaskId after) {
  if (before == kNoTask) return;
  DPTWIN_ASSERT(tasks_[after].state == State::Pending, "dependency added to a started task");
  if (tasks_[before].state == State::Done) return;
  edges_.push_back(Edge{after, tasks_[before].first_edge});
  tasks_[before].first_edge = static_cast<int32_t>(edges_.size() - 1);
  ++tasks_[after].deps_left;
}

TaskId Executor::add_task(int device, StreamKind stream, Category cat, Time duration, int32_t name,
                          std::initializer_list<TaskId> deps, double bytes) {
  TaskId id = new_task(device, stream, cat, duration, name, bytes);
  for (TaskId d : deps) link(d, id);
  stream_of(device, stream).queue.push_back(id);
  try_start_head(device, stream);
  return id;
}

TaskId Executor::add_task(int device, StreamKind stream, Category cat, Time duration, int32_t name,
                          const std::vector<TaskId>& deps, double bytes) {
  TaskId id = new_task(device, stream, cat, duration, name, bytes);
  for (TaskId d : deps) link(d, id);
  stream_of(device, stream).queue.push_back(id);
  try_start_head(device, stream);
  return id;
}

void Executor::add_dependency(TaskId task, TaskId before) { link(before, task); }

std::vector<TaskId> Executor::add_collective(const std::vector<int>& devices, Category cat, int32_t name,
                                             const std::vector<std::vector<TaskId>>& deps, double bytes,
                                             std::function<Time()> price) {
  DPTWIN_ASSERT(deps.empty() || deps.size() == devices.size(), "one dependency list per member");
  int32_t cid = static_cast<int32_t>(collectives_.size());
  collectives_.push_back(Collective{{}, 0, std::move(price)});
  std::vector<TaskId> members;
  members.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    TaskId id = new_task(devices[i], StreamKind::Comm, cat, Time::zero(), name, bytes);
    tasks_[id].collective = cid;
    if (!deps.empty())
      for (TaskId d : deps[i]) link(d, id);
    members.push_back(id);
  }
  collectives_[cid].members = members;
  for (TaskId id : members) {
    stream_of(tasks_[id].device, StreamKind::Comm).queue.push_back(id);
  }
  for (TaskId id : members) try_start_head(tasks_[id].device, StreamKind::Comm);
  return members;
}

void Executor::on_finish(TaskId task, std::function<void()> fn) {
  DPTWIN_ASSERT(tasks_[task].callback < 0, "one callback per task");
  if (tasks_[task].state == State::Done) {
    fn();
    return;
  }
  callbacks_.push_back(std::move(fn));
  tasks_[task].callback = static_cast<int32_t>(callbacks_.size() - 1);
}

Executor::TaskView Executor::view(TaskId id) const {
  const Task& t = tasks_[id];
  return TaskView{t.device, t.stream, t.category, t.name, t.start, t.end, t.bytes};
}

void Executor::try_start_head(int device, StreamKind s) {
  StreamState& st = stream_of(device, s);
  if (st.busy || st.head >= st.queue.size()) return;
  TaskId t = st.queue[st.head];
  Task& task = tasks_[t];
  if (task.deps_left > 0 || task.state != State::Pending) return;
  task.state = State::Ready;
  task.ready_at = sim_.now();
  st.busy = true;  // the stream is held by its head (a collective member waits in place)
  if (task.collective >= 0) {
    member_ready(t);
  } else {
    start(t);
  }
}

void Executor::member_ready(TaskId t) {
  const int32_t cid = tasks_[t].collective;
  Collective& c = collectives_[cid];
  if (++c.ready < static_cast<int>(c.members.size())) return;
  if (opts_.comm_waits_for_compute && tasks_[t].category == Category::Communication && comm_held(cid)) {
    deferred_.push_back(cid);  // started by finish() once the compute that holds it has ended
    return;
  }
  meet(cid);
}

bool Executor::comm_held(int32_t cid) const {
  if (!opts_.comm_needs_free_core || computing_.empty()) return members_computing(cid);
  for (TaskId m : collectives_[cid].members) {
    const auto& running = computing_[opts_.host_of_device[tasks_[m].device]];
    if (!running.empty() && slowdown(running.size() + 1) > 1.0 + 1e-9) return true;
  }
  return false;
}

bool Executor::members_computing(int32_t cid) const {
  for (TaskId m : collectives_[cid].members)
    if (stream_of(tasks_[m].device, StreamKind::Compute).busy) return true;
  return false;
}

void Executor::meet(int32_t cid) {
  Collective& c = collectives_[cid];
  Time late = Time::zero(), extra = Time::zero();
  if (tasks_[c.members.front()].category == Category::Communication) {
    // Ranks meet (their training threads wait for each other) when no member
    // is computing; a collective that overlaps compute (a DDP bucket or a
    // Horovod allreduce during backward) realigns nobody. They drift apart
    // only while two or more of them compute: the walk runs over the
    // second-longest compute since the last meeting (a parameter server
    // stepping while its workers wait adds no lag).
    bool meeting = true;
    Time longest = Time::zero(), since_meeting = Time::zero(), since_collective = Time::zero();
    for (TaskId m : c.members) {
      const int d = tasks_[m].device;
      meeting = meeting && !stream_of(d, StreamKind::Compute).busy;
      const Time w = compute_since_meeting_[d];
      since_meeting = std::max(since_meeting, std::min(w, longest));
      longest = std::max(longest, w);
      since_collective = std::max(since_collective, compute_since_sync_[d]);
      compute_since_sync_[d] = Time::zero();
    }
    if (since_collective > Time::zero()) extra = opts_.sync_latency;
    if (meeting) {
      for (TaskId m : c.members) compute_since_meeting_[tasks_[m].device] = Time::zero();
      if (since_meeting > Time::zero())
        late = opts_.sync_lag.scaled(std::pow(since_meeting.seconds() / 0.1, opts_.sync_exponent)) +
               since_meeting.scaled(opts_.sync_skew);
    }
  }
  if (late > Time::zero()) {
    sim_.schedule_in(late, [this, cid, extra] { start_collective(cid, extra); });
  } else {
    start_collective(cid, extra);
  }
}

void Executor::start_collective(int32_t cid, Time extra) {
  Collective& c = collectives_[cid];
  Time duration = (c.price ? c.price() : Time::zero()) + extra;
  for (TaskId m : c.members) {
    tasks_[m].duration = duration;
    wait_[tasks_[m].device] += sim_.now() - tasks_[m].ready_at;
    start(m);
  }
}

void Executor::start(TaskId id) {
  Task& t = tasks_[id];
  t.state = State::Running;
  t.start = sim_.now();
  Time d = t.duration;
  if (t.stream == StreamKind::Compute && d > Time::zero()) {
    double factor = sim_.jitter_factor(opts_.jitter);
    // The comm stream's head may only be waiting for peers; slow only when it runs.
    const StreamState& cs = stream_of(t.device, StreamKind::Comm);
    const bool comm_running = cs.busy && cs.head < cs.queue.size() && tasks_[cs.queue[cs.head]].state == State::Running;
    // A background thread that runs the collectives (Horovod's loop) does not
    // tick while one runs: then only the collective's own slowdown applies.
    factor *= 1.0 + (comm_running ? opts_.overlap_slowdown : opts_.background_slowdown);
    if (factor != 1.0) d = d.scaled(factor);
  }
  t.duration = d;
  if (shares_host(t) && d > Time::zero()) {
    const int host = opts_.host_of_device[t.device];
    t.work_left = static_cast<double>(d.count_ns());
    t.rated_at = sim_.now();
    t.rate = 0;  // rated (and its finish scheduled) by rerate
    t.sharing = true;
    computing_[host].push_back(id);
    rerate(host);
    return;
  }
  sim_.schedule_in(d, [this, id] { finish(id); });
}

void Executor::finish(TaskId id) {
  Task& t = tasks_[id];
  t.state = State::Done;
  t.end = sim_.now();
  if (t.sharing) {
    t.sharing = false;
    const int host = opts_.host_of_device[t.device];
    auto& running = computing_[host];
    running.erase(std::find(running.begin(), running.end(), id));
    t.duration = t.end - t.start;
    rerate(host);
  }
  if (t.stream == StreamKind::Compute) {
    compute_since_sync_[t.device] += t.end - t.start;
    compute_since_meeting_[t.device] += t.end - t.start;
  }
  StreamState& st = stream_of(t.device, t.stream);
  st.busy = false;
  ++st.head;
  int device = t.device;
  StreamKind stream = t.stream;
  // Release dependents.
  auto& touched = scratch_;
  touched.clear();
  for (int32_t e = t.first_edge; e >= 0; e = edges_[e].next) {
    Task& d = tasks_[edges_[e].target];
    if (--d.deps_left == 0) touched.emplace_back(d.device, d.stream);
  }
  try_start_head(device, stream);
  for (size_t i = 0; i < touched.size(); ++i) try_start_head(touched[i].first, touched[i].second);
  if (stream == StreamKind::Compute && !deferred_.empty() &&
      (opts_.comm_needs_free_core || !stream_of(device, StreamKind::Compute).busy)) {
    // Compute ended (and a core may be free): start the deferred collectives nothing holds now.
    std::vector<int32_t> waiting;
    waiting.swap(deferred_);
    for (int32_t cid : waiting) {
      if (comm_held(cid)) {
        deferred_.push_back(cid);
      } else {
        meet(cid);
      }
    }
  }
  if (tasks_[id].callback >= 0) {
    auto fn = std::move(callbacks_[tasks_[id].callback]);
    fn();
  }
}

}  // namespace dptwin::sim
