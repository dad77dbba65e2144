// tests/exec/test_exec_strategy.cpp — strategies driven directly (no trainer):
// the DDP bucket rebuild in gradient-readiness order (ranks as threads on the
// fake backend), and the pieces of single-process data parallel (replica
// threads, replicate / scatter / reduce).
#include "torch_doctest.hpp"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "exec/comm.hpp"
#include "exec/data_parallel.hpp"
#include "exec/gpt2_model.hpp"
#include "exec/grad_hooks.hpp"
#include "exec/options.hpp"
#include "exec/strategy.hpp"
#include "models/gpt2.hpp"

using namespace dptwin::exec;

namespace {

// Runs body(rank) for every rank in its own thread; rethrows the first failure.
void on_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
}

std::vector<size_t> flatten(const std::vector<std::vector<size_t>>& buckets) {
  std::vector<size_t> out;
  for (const auto& b : buckets) out.insert(out.end(), b.begin(), b.end());
  return out;
}

int count_ops(const Recorder& rec, const std::string& name) {
  int n = 0;
  for (const auto& s : rec.spans()) n += s.name == name;
  return n;
}

ExecOptions dps_options(int world) {
  ExecOptions o;
  o.strategy = "dps";
  o.np = world;
  o.backend = "fake";
  return o;
}

// Five parameters of 100 floats (400 bytes); buckets: the first holds one, later ones two.
constexpr int kToyParams = 5;
ExecOptions toy_bucket_options(int world) {
  auto o = dps_options(world);
  o.first_bucket_mb = 400.0 / (1 << 20);
  o.bucket_cap_mb = 800.0 / (1 << 20);
  return o;
}

// One rank's toy model: loss = sum(x * p[a0] * p[a1] * ...), applied in `apply`
// order, so gradients become ready in the reverse of `apply`.
struct ToyRank {
  std::vector<torch::Tensor> params;
  std::unique_ptr<Strategy> strategy;

  ToyRank(const ExecOptions& o, Communicator* comm, Recorder* rec) {
    for (int i = 0; i < kToyParams; ++i)
      params.push_back((1 + 0.01 * (i + 1) * torch::linspace(-1, 1, 100)).requires_grad_(true));
    StrategyInputs in;
    in.options = &o;
    in.params = params;
    in.comm = comm;
    in.recorder = rec;
    strategy = make_strategy(StrategyKind::Dps, std::move(in));
    strategy->setup();
  }

  // One iteration; returns copies of the synchronized gradients.
  std::vector<torch::Tensor> iterate(const std::vector<int>& apply, const torch::Tensor& x) {
    strategy->before_forward();
    auto h = x;
    for (int i : apply) h = h * params[static_cast<size_t>(i)];
    auto loss = h.sum();
    strategy->before_backward(true);
    loss.backward();
    strategy->synchronize_gradients();
    std::vector<torch::Tensor> g;
    for (auto& p : params) g.push_back(p.grad().clone());
    strategy->zero_grad();
    return g;
  }
};

}  // namespace

TEST_CASE("dps: buckets are rebuilt once, after the first iteration, in rank 0's gradient-readiness order") {
  const int world = 2;
  // Rank 0 applies the parameters as 2,0,4,1,3 (ready: 3,1,4,0,2); rank 1 as 0..4 (ready: 4,3,2,1,0).
  const std::vector<std::vector<int>> apply{{2, 0, 4, 1, 3}, {0, 1, 2, 3, 4}};
  const std::vector<size_t> rank0_ready{3, 1, 4, 0, 2};
  for (bool rebuild : {true, false}) {
    auto o = toy_bucket_options(world);
    o.rebuild_buckets = rebuild;
    std::vector<Recorder> recs(world);  // outlive the communicators that record into them
    auto comms = make_fake_communicators(world);
    std::vector<std::vector<std::vector<size_t>>> before(world), after(world), later(world);
    std::vector<std::vector<torch::Tensor>> g1(world), g2(world), g3(world);
    std::vector<int> order_ops(world);
    on_ranks(world, [&](int r) {
      auto& comm = *comms[static_cast<size_t>(r)];
      comm.set_timeout(std::chrono::seconds(30));
      comm.set_recorder(&recs[static_cast<size_t>(r)]);
      ToyRank rank(o, &comm, &recs[static_cast<size_t>(r)]);
      const auto x = torch::linspace(-1, 1, 100) + r;
      const auto& a = apply[static_cast<size_t>(r)];
      before[r] = rank.strategy->gradient_buckets();
      g1[r] = rank.iterate(a, x);
      g2[r] = rank.iterate(a, x);  // its before_forward rebuilds
      after[r] = rank.strategy->gradient_buckets();
      g3[r] = rank.iterate(a, x);  // no second rebuild
      later[r] = rank.strategy->gradient_buckets();
      order_ops[r] = count_ops(recs[static_cast<size_t>(r)], "broadcast.bucket_order");
    });
    for (int r = 0; r < world; ++r) {
      CAPTURE(r);
      CAPTURE(rebuild);
      // Initially: reverse registration order, first bucket 400 bytes, then 800.
      CHECK(before[r] == std::vector<std::vector<size_t>>{{4}, {3, 2}, {1, 0}});
      if (rebuild) {
        // Rank 0's readiness order, on every rank (rank 1's own order was 4,3,2,1,0), same caps.
        CHECK(flatten(after[r]) == rank0_ready);
        CHECK(after[r] == std::vector<std::vector<size_t>>{{3}, {1, 4}, {0, 2}});
        CHECK(order_ops[r] == 1);
      } else {
        CHECK(after[r] == before[r]);
        CHECK(order_ops[r] == 0);
      }
      CHECK(later[r] == after[r]);
      // Gradients are still the bucket views the allreduce averages: identical on
      // both ranks and unchanged by the rebuild (the parameters did not move).
      for (size_t i = 0; i < kToyParams; ++i) {
        CHECK(torch::equal(g2[r][i], g1[r][i]));
        CHECK(torch::equal(g3[r][i], g1[r][i]));
        CHECK(torch::equal(g2[r][i], g2[0][i]));
        CHECK(g2[r][i].abs().sum().item<double>() > 0);
      }
    }
  }
}

TEST_CASE("dps on GPT-2: the rebuilt buckets follow the order in which autograd made the gradients ready") {
  const int world = 2;
  auto cfg = *dptwin::models::find_gpt2_preset("tiny");
  auto o = dps_options(world);
  o.first_bucket_mb = 0.005;
  o.bucket_cap_mb = 0.02;
  std::vector<Recorder> recs(world);
  auto comms = make_fake_communicators(world);
  std::vector<std::vector<size_t>> observed(world);  // readiness order seen by our own hooks, first iteration
  std::vector<std::vector<std::vector<size_t>>> before(world), after(world);
  std::vector<double> loss_sum(world);
  on_ranks(world, [&](int r) {
    torch::set_num_threads(1);
    comms[static_cast<size_t>(r)]->set_timeout(std::chrono::seconds(60));
    Gpt2 model(cfg);
    model->init_weights(1234);
    auto params = ordered_parameters(*model);
    StrategyInputs in;
    in.options = &o;
    in.params = params;
    for (const auto& b : model->buffers()) in.buffers.push_back(b);
    in.comm = comms[static_cast<size_t>(r)].get();
    in.recorder = &recs[static_cast<size_t>(r)];
    auto strategy = make_strategy(StrategyKind::Dps, std::move(in));
    strategy->setup();
    // Independent observer: a post hook of our own on every AccumulateGrad node.
    std::vector<std::shared_ptr<torch::autograd::Node>> accs;
    std::vector<uintptr_t> keys;
    bool observing = true;
    for (size_t i = 0; i < params.size(); ++i) {
      accs.push_back(torch::autograd::impl::grad_accumulator(params[i]));
      keys.push_back(accs.back()->add_post_hook(std::make_unique<PostHook>([&, i] {
        if (observing) observed[r].push_back(i);
      })));
    }
    // Per-rank tokens without the shared global generator (ranks are threads).
    const auto x = (torch::arange(64, torch::kLong) * (7 + r)).remainder(cfg.vocab_size).view({2, 32});
    const auto y = (torch::arange(64, torch::kLong) * (11 + r) + 3).remainder(cfg.vocab_size).view({2, 32});
    before[r] = strategy->gradient_buckets();
    for (int it = 0; it < 3; ++it) {
      strategy->before_forward();
      if (it == 1) after[r] = strategy->gradient_buckets();
      auto loss = model->loss(x, y);
      strategy->before_backward(true);
      loss.backward();
      strategy->synchronize_gradients();
      observing = false;
      double s = 0;
      for (auto& p : params) s += p.grad().abs().sum().item<double>();
      loss_sum[r] = s;
      strategy->zero_grad();
    }
    for (size_t i = 0; i < accs.size(); ++i) accs[i]->del_post_hook(keys[i]);
  });
  const size_t n = dptwin::models::gpt2_tensors(cfg).size();
  std::vector<size_t> reverse(n);
  for (size_t i = 0; i < n; ++i) reverse[i] = n - 1 - i;
  CHECK(flatten(before[0]) == reverse);
  REQUIRE(observed[0].size() == n);
  CHECK(flatten(after[0]) == observed[0]);
  CHECK(after[1] == after[0]);
  CHECK(loss_sum[0] == doctest::Approx(loss_sum[1]).epsilon(1e-12));  // synchronized gradients agree
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) moved += observed[0][i] != reverse[i];
  MESSAGE("tiny GPT-2: " << moved << " of " << n << " positions of the readiness order differ from reverse "
                         << "registration order; " << before[0].size() << " buckets before, " << after[0].size()
                         << " after the rebuild");
}

TEST_CASE("replica threads: all run at once, each on its own thread; the first error propagates") {
  ReplicaThreads threads(2, 1);
  std::atomic<int> started{0};
  std::vector<std::thread::id> ids(3);
  // One element per thread, not std::vector<bool>: its bits share a word, and
  // three threads setting theirs at once lost one now and then (a data race).
  std::vector<char> met(3, 0);
  threads.run(3, [&](int k) {
    ids[static_cast<size_t>(k)] = std::this_thread::get_id();
    ++started;
    // Only returns true if all three are inside run() together.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    met[static_cast<size_t>(k)] = started.load() == 3;
  });
  CHECK(met == std::vector<char>{1, 1, 1});
  CHECK(ids[0] == std::this_thread::get_id());
  CHECK(std::set<std::thread::id>(ids.begin(), ids.end()).size() == 3);
  int ran = 0;
  threads.run(2, [&](int k) { ran += k == 0; });  // fewer jobs than threads
  CHECK(ran == 1);
  CHECK_THROWS_WITH(threads.run(3, [](int k) { if (k == 2) throw std::runtime_error("replica 2 failed"); }),
                    doctest::Contains("replica 2 failed"));
  threads.run(3, [](int) {});  // still usable
}

TEST_CASE("data parallel on 3 CPU replicas: scatter, weighted loss, gradients reduced onto replica 0") {
  torch::set_num_threads(1);
  auto cfg = *dptwin::models::find_gpt2_preset("tiny");
  std::vector<Gpt2> replicas;
  for (int k = 0; k < 3; ++k) {
    replicas.emplace_back(cfg);
    replicas.back()->init_weights(static_cast<uint64_t>(k + 1));  // differ until replicate()
  }
  Gpt2 reference(cfg);
  reference->init_weights(1);  // == replica 0
  Recorder rec;
  rec.set_step(0);
  DataParallel dp(replicas, std::vector<torch::Device>(3, torch::kCPU), 1, 10 << 20, &rec,
                  [](Gpt2Impl& m, const torch::Tensor& x, const torch::Tensor& y) { return m.loss(x, y); });
  dp.copy_buffers();
  dp.replicate();
  for (size_t i = 0; i < ordered_parameters(*replicas[0]).size(); ++i)
    CHECK(torch::equal(ordered_parameters(*replicas[2])[i], ordered_parameters(*replicas[0])[i]));
  torch::manual_seed(3);
  const auto x = torch::randint(cfg.vocab_size, {5, 16}, torch::kLong);  // chunks of 2, 2, 1
  const auto y = torch::randint(cfg.vocab_size, {5, 16}, torch::kLong);
  const auto loss = dp.forward(x, y);
  dp.backward(0.5);
  dp.reduce_gradients();
  const auto ref_loss = reference->loss(x, y);
  (ref_loss * 0.5).backward();
  CHECK(loss.item<double>() == doctest::Approx(ref_loss.item<double>()).epsilon(1e-6));
  double num = 0, den = 0;
  const auto got = ordered_parameters(*replicas[0]), want = ordered_parameters(*reference);
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i].grad() - want[i].grad()).pow(2).sum().item<double>();
    den += want[i].grad().pow(2).sum().item<double>();
  }
  MESSAGE("relative gradient error, 3 replicas vs one model: " << std::sqrt(num / den));
  CHECK(std::sqrt(num / den) < 1e-5);
  for (const auto& p : ordered_parameters(*replicas[1])) CHECK(p.grad().abs().max().item<double>() == 0);
  CHECK(count_ops(rec, "broadcast.param0") == 1);
  CHECK(count_ops(rec, "reduce.grad0") == 1);
  CHECK(count_ops(rec, "broadcast.buffers0") == 1);
}
