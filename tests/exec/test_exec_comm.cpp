// tests/exec/test_exec_comm.cpp — every operation of the comm interface on the
// in-process backends: the fake, and Gloo (ranks as threads over a FileStore).
#include "torch_doctest.hpp"
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "exec/comm.hpp"

using namespace dptwin::exec;
using namespace std::chrono_literals;

namespace {

// Runs fn(rank, comm) on every rank in its own thread; rethrows the first failure.
void on_ranks(std::vector<std::unique_ptr<Communicator>>& comms, const std::function<void(int, Communicator&)>& fn) {
  std::vector<std::thread> ts;
  std::vector<std::string> errors(comms.size());
  for (size_t r = 0; r < comms.size(); ++r)
    ts.emplace_back([&, r] {
      try {
        fn(static_cast<int>(r), *comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (size_t r = 0; r < errors.size(); ++r) CHECK_MESSAGE(errors[r].empty(), "rank " << r << ": " << errors[r]);
}

// The niceness of every thread of this process named "gloo-loop".
std::vector<int> gloo_loop_nices() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != "gloo-loop") continue;
    std::string stat;
    std::getline(std::ifstream(task.path() / "stat"), stat);
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // fields 3.. (state, ppid, ...)
    std::string field;
    for (int i = 3; i <= 19 && rest >> field; ++i) {
    }
    out.push_back(std::stoi(field));  // field 19: nice
  }
  return out;
}

std::vector<std::unique_ptr<Communicator>> gloo_ranks(int n, int loop_nice = kGlooLoopNice) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dptwin-gloo-test-" + std::to_string(::getpid()) + "-" + std::to_string(n)))
                               .string();
  std::filesystem::remove(path);
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back(
        [&, r] { comms[static_cast<size_t>(r)] = make_gloo_communicator("file:" + path, r, n, 20s, loop_nice); });
  for (auto& t : ts) t.join();
  return comms;
}

void exercise_all_ops(std::vector<std::unique_ptr<Communicator>>& comms) {
  const int n = static_cast<int>(comms.size());
  on_ranks(comms, [n](int r, Communicator& c) {
    const auto to = 20s;
    CHECK(c.rank() == r);
    CHECK(c.size() == n);
    // allreduce sum / min / max, fp32 and bf16 and int32
    auto x = torch::full({5}, static_cast<float>(r + 1));
    c.allreduce(x)->wait(to);
    CHECK(x[0].item<float>() == n * (n + 1) / 2.0f);
    auto mn = torch::full({3}, static_cast<int>(r + 5), torch::kInt);
    c.allreduce(mn, ReduceOp::Min)->wait(to);
    CHECK(mn[2].item<int>() == 5);
    auto mx = torch::full({3}, static_cast<double>(r), torch::kDouble);
    c.allreduce(mx, ReduceOp::Max)->wait(to);
    CHECK(mx[1].item<double>() == n - 1);
    auto h = torch::full({7}, 0.5 * (r + 1), torch::kBFloat16);
    c.allreduce(h)->wait(to);
    CHECK((h.scalar_type() == torch::kBFloat16));
    CHECK(h[6].item<float>() == doctest::Approx(0.5 * n * (n + 1) / 2.0));
    // reduce to root 1 % n
    const int root = 1 % n;
    auto y = torch::full({4}, 2.0f);
    c.reduce(y, root)->wait(to);
    if (r == root) CHECK(y[3].item<float>() == 2.0f * n);
    // broadcast fp32, bf16 and bool
    auto b = torch::full({6}, r == root ? 9.0f : -1.0f);
    c.broadcast(b, root)->wait(to);
    CHECK(b[5].item<float>() == 9.0f);
    auto bb = torch::full({3}, r == 0 ? 1.5 : 0.0, torch::kBFloat16);
    c.broadcast(bb, 0)->wait(to);
    CHECK(bb[0].item<float>() == 1.5f);
    auto mask = r == 0 ? torch::ones({2, 2}, torch::kBool).tril() : torch::zeros({2, 2}, torch::kBool);
    c.broadcast(mask, 0)->wait(to);
    CHECK(mask.sum().item<int64_t>() == 3);
    // allgather: rank r's input lands in chunk r
    auto in = torch::full({2}, static_cast<float>(r));
    auto out = torch::empty({2 * n});
    c.allgather(in, out)->wait(to);
    for (int k = 0; k < n; ++k) CHECK(out[2 * k + 1].item<float>() == k);
    // reduce_scatter: rank r receives the sum of chunk r
    auto rs_in = torch::arange(3 * n, torch::kFloat);
    auto rs_out = torch::empty({3});
    c.reduce_scatter(rs_in, rs_out)->wait(to);
    CHECK(rs_out[0].item<float>() == static_cast<float>(n * 3 * r));
    // send/recv in a ring
    if (n > 1) {
      auto msg = torch::full({3}, static_cast<float>(r));
      auto got = torch::empty({3});
      auto s = c.send(msg, (r + 1) % n, 5);
      auto rv = c.recv(got, (r + n - 1) % n, 5);
      rv->wait(to);
      s->wait(to);
      CHECK(got[0].item<float>() == static_cast<float>((r + n - 1) % n));
    }
    c.barrier()->wait(to);
    // split: an independent channel
    auto sub = c.split("child");
    auto z = torch::ones({2});
    sub->allreduce(z)->wait(to);
    CHECK(z[0].item<float>() == n);
  });
}

}  // namespace

TEST_CASE("fake backend: every operation, 1 and 3 ranks") {
  for (int n : {1, 3}) {
    auto comms = make_fake_communicators(n);
    exercise_all_ops(comms);
  }
}

TEST_CASE("gloo backend: every operation, 2 ranks in threads over a file store") {
  if (!gloo_available()) return;
  auto comms = gloo_ranks(2);
  exercise_all_ops(comms);
}

TEST_CASE("gloo backend: each rank's event-loop thread is named gloo-loop and niced (comm.hpp, loop_nice)") {
  REQUIRE(gloo_loop_nices().empty());  // earlier cases' communicators are gone, and their loops with them
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  REQUIRE(own < 19);
  {
    auto comms = gloo_ranks(2);
    CHECK(gloo_loop_nices() == std::vector<int>(2, std::min(19, own + kGlooLoopNice)));
    CHECK(kGlooLoopNice == 19);
    exercise_all_ops(comms);  // still correct with the loop niced
  }
  CHECK(gloo_loop_nices().empty());
  {
    auto plain = gloo_ranks(3, 0);
    CHECK(gloo_loop_nices() == std::vector<int>(3, own));  // named, left at the rank's niceness
  }
  // Relative to the creating thread: a rank at nice 4 gets its loop at 4 + 6.
  std::thread([&] {
    ::setpriority(PRIO_PROCESS, 0, own + 4);  // this thread only (Linux)
    auto comms = gloo_ranks(2, 6);
    CHECK(gloo_loop_nices() == std::vector<int>(2, std::min(19, own + 10)));
  }).join();
}

TEST_CASE("ring allreduce over send/recv equals the backend's allreduce (fake 1-4 ranks, gloo 2 ranks)") {
  auto check = [](std::vector<std::unique_ptr<Communicator>>& comms) {
    const int n = static_cast<int>(comms.size());
    on_ranks(comms, [n](int r, Communicator& c) {
      // 1001 elements: chunks of unequal size; values differ per rank and element.
      auto t = torch::arange(1001, torch::kFloat) * (r + 1);
      auto expected = torch::arange(1001, torch::kFloat) * (n * (n + 1) / 2);
      ring_allreduce(c, t);
      CHECK(torch::allclose(t, expected));
      auto big = torch::full({3 << 20}, 1.0f);  // 12 MB: MPI/Gloo rendezvous-size messages
      ring_allreduce(c, big, 2000);
      CHECK(big[12345].item<float>() == n);
    });
  };
  for (int n : {1, 2, 3, 4}) {
    auto comms = make_fake_communicators(n);
    check(comms);
  }
  if (gloo_available()) {
    auto comms = gloo_ranks(2);
    check(comms);
  }
}

TEST_CASE("probe_comm_state: one positive reading, the same on every rank (fake 2 and 4 ranks, gloo 2)") {
  auto check = [](std::vector<std::unique_ptr<Communicator>>& comms) {
    std::vector<double> got(comms.size(), -1);
    Recorder rec;
    comms[0]->set_recorder(&rec);
    on_ranks(comms, [&](int r, Communicator& c) { got[static_cast<size_t>(r)] = probe_comm_state(c, 5); });
    CHECK(got[0] > 0);
    CHECK(got[0] < 1.0);
    for (double g : got) CHECK(g == got[0]);  // the slowest rank's times, reduced on every rank
    CHECK(rec.spans().size() == 5 + 1 + 1 + 5 + 1);  // recorded like any op: the caller turns recording off
  };
  for (int n : {2, 4}) {
    auto comms = make_fake_communicators(n);
    check(comms);
  }
  if (gloo_available()) {
    auto comms = gloo_ranks(2);
    check(comms);
  }
}

TEST_CASE("recorder: one comm span per op with bytes and ordered timestamps") {
  auto comms = make_fake_communicators(2);
  Recorder recs[2];
  on_ranks(comms, [&](int r, Communicator& c) {
    c.set_recorder(&recs[r]);
    recs[r].set_step(4);
    auto t = torch::zeros({256});
    c.label_next("allreduce.bucket0");
    c.allreduce(t)->wait(10s);
    c.set_recording(false);
    c.barrier()->wait(10s);
  });
  for (auto& rec : recs) {
    const auto spans = rec.spans();
    REQUIRE(spans.size() == 1);
    CHECK(spans[0].name == "allreduce.bucket0");
    CHECK(spans[0].stream == "comm");
    CHECK(spans[0].step == 4);
    CHECK(spans[0].bytes == 1024);
    CHECK(spans[0].launch_ns <= spans[0].start_ns);
    CHECK(spans[0].start_ns <= spans[0].end_ns);
  }
}

TEST_CASE("fake backend: a missing peer times out, mismatched collectives fail") {
  auto comms = make_fake_communicators(2);
  comms[0]->set_timeout(0.3s);
  auto t = torch::ones({2});
  const auto t0 = std::chrono::steady_clock::now();
  auto w = comms[0]->allreduce(t);
  CHECK_THROWS_AS(w->wait(5s), CommError);  // the op itself times out inside the backend
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  auto w2 = std::make_shared<Work>("never completes");
  CHECK_THROWS_AS(w2->wait(0.05s), CommTimeout);

  auto more = make_fake_communicators(2);
  std::string e0, e1;
  std::thread a([&] {
    try {
      auto x = torch::ones({2});
      more[0]->allreduce(x)->wait(5s);
    } catch (const CommError& e) {
      e0 = e.what();
    }
  });
  std::thread b([&] {
    try {
      auto x = torch::ones({2});
      more[1]->broadcast(x, 0)->wait(5s);
    } catch (const CommError& e) {
      e1 = e.what();
    }
  });
  a.join();
  b.join();
  CHECK(e0.find("mismatched") != std::string::npos);
  CHECK(e1.find("mismatched") != std::string::npos);
}
