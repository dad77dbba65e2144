// Unit tests of sim/collectives: decomposition of collectives into phases and
// their pricing by max-min flows (Flow) and alpha-beta formulas (Analytic), on
// small hand-built topologies whose arithmetic is written beside each check.
#include "sim/collectives.hpp"

#include <doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <string>

#include "topology/cluster.hpp"

using namespace dptwin;
using namespace dptwin::sim;
using topology::LinkKind;
using topology::Topology;
using topology::Vertex;
using topology::VertexKind;

namespace {

topology::DeviceSpec test_spec() {
  topology::DeviceSpec spec;
  spec.name = "test-gpu";
  spec.fp32_peak = tflop_per_s(10);
  spec.fp16_peak = tflop_per_s(100);
  spec.memory_bandwidth = gbyte_per_s(1000);
  spec.memory = gib(16);
  return spec;
}

// `nodes` nodes of `per_node` devices. In each node the devices hang off one
// NVSwitch (one link each: `intra_bw` per direction, `intra_lat`). With more than
// one node each node switch has one uplink (`inter_bw`, `inter_lat`) to a
// top-level switch.
Topology make_switched(int nodes, int per_node, double intra_bw, Time intra_lat, double inter_bw = 0,
                       Time inter_lat = Time::zero(), double efficiency = 1.0) {
  Topology t;
  t.name = "hand-built";
  const int top = nodes > 1 ? t.add_vertex({"top", VertexKind::Switch, -1, -1}) : -1;
  int dev = 0;
  for (int h = 0; h < nodes; ++h) {
    const int sw = t.add_vertex({fmt::format("n{}.nvsw", h), VertexKind::NvSwitch, h, -1});
    for (int i = 0; i < per_node; ++i) {
      const int v = t.add_vertex({fmt::format("n{}.gpu{}", h, i), VertexKind::Device, h, dev});
      t.add_link(v, sw, LinkKind::NvLink, bytes_per_s(intra_bw), intra_lat, efficiency);
      t.set_device_spec(dev, test_spec());
      ++dev;
    }
    if (top >= 0) t.add_link(sw, top, LinkKind::InfiniBand, bytes_per_s(inter_bw), inter_lat);
  }
  t.finalize();
  return t;
}

// Two leaf switches joined by one spine link of `spine_bw`; two hosts of one
// device on each leaf, each host on its leaf by a 10 GB/s link.
Topology make_two_leaves(double spine_bw) {
  Topology t;
  const int leaf0 = t.add_vertex({"leaf0", VertexKind::Switch, -1, -1});
  const int leaf1 = t.add_vertex({"leaf1", VertexKind::Switch, -1, -1});
  t.add_link(leaf0, leaf1, LinkKind::Ethernet, bytes_per_s(spine_bw), Time::us(1));
  for (int d = 0; d < 4; ++d) {
    const int v = t.add_vertex({fmt::format("h{}", d), VertexKind::Device, d, d});
    t.add_link(v, d < 2 ? leaf0 : leaf1, LinkKind::Ethernet, gbyte_per_s(10), Time::us(1));
    t.set_device_spec(d, test_spec());
  }
  t.finalize();
  return t;
}

// `nodes` nodes of `per_node` devices on an NVSwitch (`nvlink` B/s); every device
// also has its own NIC (`nic` B/s) into one top-level switch (rails). No latency.
Topology make_rails(int nodes, int per_node, double nvlink, double nic) {
  Topology t;
  const int top = t.add_vertex({"top", VertexKind::Switch, -1, -1});
  int dev = 0;
  for (int h = 0; h < nodes; ++h) {
    const std::string p = fmt::format("n{}", h);
    const int sw = t.add_vertex({p + ".nvsw", VertexKind::NvSwitch, h, -1});
    for (int i = 0; i < per_node; ++i, ++dev) {
      const int v = t.add_vertex({fmt::format("{}.gpu{}", p, i), VertexKind::Device, h, dev});
      const int n = t.add_vertex({fmt::format("{}.nic{}", p, i), VertexKind::Nic, h, -1});
      t.add_link(v, sw, LinkKind::NvLink, bytes_per_s(nvlink), Time::zero());
      t.add_link(v, n, LinkKind::Pcie, bytes_per_s(nic), Time::zero());
      t.add_link(n, top, LinkKind::InfiniBand, bytes_per_s(nic), Time::zero());
      t.set_device_spec(dev, test_spec());
    }
  }
  t.finalize();
  return t;
}

CollectiveRequest request(CollectiveKind kind, Algorithm a, int n, Bytes b, int root = 0) {
  CollectiveRequest r;
  r.kind = kind;
  r.algorithm = a;
  for (int i = 0; i < n; ++i) r.ranks.push_back(i);
  r.bytes = b;
  r.root = root;
  return r;
}

NetworkModel flow_model(const Topology& t, Time overhead = Time::zero()) {
  NetworkOptions o;
  o.mode = NetworkMode::Flow;
  o.per_step_overhead = overhead;
  return NetworkModel(t, o);
}
NetworkModel analytic_model(const Topology& t, Time overhead = Time::zero()) {
  NetworkOptions o;
  o.mode = NetworkMode::Analytic;
  o.per_step_overhead = overhead;
  return NetworkModel(t, o);
}

double rel_diff(Time a, Time b) { return std::abs(a.seconds() - b.seconds()) / b.seconds(); }

}  // namespace

TEST_CASE("ring allreduce decomposes into one phase repeated 2(n-1) times") {
  const Topology t = make_switched(1, 4, 100e9, Time::us(1));
  const auto phases = decompose(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(400)), t);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].repeat == 6);
  REQUIRE(phases[0].flows.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(phases[0].flows[i].src == i);
    CHECK(phases[0].flows[i].dst == (i + 1) % 4);
    CHECK(phases[0].flows[i].bytes == doctest::Approx(100e6));
  }
}

TEST_CASE("ring allreduce arithmetic on a symmetric 4-device switch") {
  // 4 devices on one switch, 100 GB/s per direction per device link, 1 us per hop.
  // S = 400 MB. Each step every device sends S/4 = 100 MB to its successor over
  // its up-link and the successor's down-link; no two flows share a directed link,
  // so each runs at 100 GB/s: 100e6 / 100e9 = 1 ms. Step latency alpha = 2 hops
  // x 1 us + 3 us per-step overhead = 5 us. 2(n-1) = 6 steps:
  //   t = 6 x (1 ms + 5 us) = 6.030 ms; latency part = 30 us.
  // Bus bandwidth = S/t x 2(n-1)/n = 400e6 / 6.030e-3 x 1.5 = 99.50 GB/s.
  const Topology t = make_switched(1, 4, 100e9, Time::us(1));
  NetworkModel net = flow_model(t, Time::us(3));
  const auto req = request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(400));
  const CollectiveCost& c = net.cost(req);
  CHECK(c.duration.seconds() == doctest::Approx(6.030e-3).epsilon(1e-6).scale(0));
  CHECK(c.latency_part.microseconds() == doctest::Approx(30));
  CHECK(c.phases_solved == 1);
  CHECK(allreduce_bus_bandwidth(req.bytes, c.duration, 4) == doctest::Approx(99.50e9).epsilon(1e-3));
  // Every device up-link carries 6 steps x 100 MB = 600 MB = 2(n-1)/n x S.
  REQUIRE(c.link_bytes.size() == 8);
  for (const auto& [link, b] : c.link_bytes) CHECK(b == doctest::Approx(600e6));
  // The formula 2(n-1)·α + 2(n-1)/n·S/B with α = 5 us, B = 100 GB/s gives the same.
  CHECK(ring_allreduce_time({Time::us(5), 100e9}, mb(400), 4).seconds() == doctest::Approx(6.030e-3).scale(0));
  NetworkModel an = analytic_model(t, Time::us(3));
  CHECK(an.cost(req).duration.seconds() == doctest::Approx(6.030e-3).epsilon(1e-6).scale(0));
}

TEST_CASE("link efficiency scales the capacity used by the solver") {
  // Same ring at efficiency 0.8: 100 MB / 80 GB/s = 1.25 ms per step, 6 steps + 6 x 2 us.
  const Topology t = make_switched(1, 4, 100e9, Time::us(1), 0, Time::zero(), 0.8);
  NetworkModel net = flow_model(t);
  const auto& c = net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(400)));
  CHECK(c.duration.seconds() == doctest::Approx(6 * (1.25e-3 + 2e-6)).epsilon(1e-6).scale(0));
}

TEST_CASE("Flow and Analytic agree on uncontended symmetric cases") {
  SUBCASE("ring on a single switch") {
    const Topology t = make_switched(1, 8, 300e9, Time::us(0.7));
    for (double s : {1e3, 1e6, 1e9}) {
      const auto req = request(CollectiveKind::AllReduce, Algorithm::Ring, 8, bytes(s));
      NetworkModel f = flow_model(t, Time::us(2));
      NetworkModel a = analytic_model(t, Time::us(2));
      CHECK(rel_diff(f.cost(req).duration, a.cost(req).duration) < 0.01);
    }
  }
  SUBCASE("hierarchical across 2 nodes") {
    // 2 nodes x 4 devices: NVLink 100 GB/s, one 10 GB/s uplink per node.
    // Inter-node phase: 4 local-rank rings share each uplink direction -> 2.5 GB/s each.
    const Topology t = make_switched(2, 4, 100e9, Time::us(1), 10e9, Time::us(5));
    for (double s : {1e4, 1e8}) {
      const auto req = request(CollectiveKind::AllReduce, Algorithm::Hierarchical, 8, bytes(s));
      NetworkModel f = flow_model(t);
      NetworkModel a = analytic_model(t);
      CHECK(rel_diff(f.cost(req).duration, a.cost(req).duration) < 0.01);
    }
    // Hand arithmetic for S = 100 MB: intra reduce-scatter + all-gather: 2 x 3 steps
    // of S/4 = 25 MB at 100 GB/s = 0.25 ms + 2 us; inter allreduce: 2 x 1 steps of
    // S/8 = 12.5 MB at 2.5 GB/s = 5 ms + (1 + 5 + 5 + 1) us.
    // t = 6 x 0.252 ms + 2 x 5.012 ms = 11.536 ms.
    NetworkModel f = flow_model(t);
    CHECK(f.cost(request(CollectiveKind::AllReduce, Algorithm::Hierarchical, 8, mb(100))).duration.seconds() ==
          doctest::Approx(11.536e-3).epsilon(1e-6).scale(0));
  }
  SUBCASE("halving-doubling and direct on a single switch") {
    const Topology t = make_switched(1, 8, 100e9, Time::us(1));
    for (Algorithm alg : {Algorithm::HalvingDoubling, Algorithm::Direct, Algorithm::Tree, Algorithm::ParameterServer}) {
      const auto req = request(CollectiveKind::AllReduce, alg, 8, mb(64));
      NetworkModel f = flow_model(t);
      NetworkModel a = analytic_model(t);
      CHECK_MESSAGE(rel_diff(f.cost(req).duration, a.cost(req).duration) < 0.01, to_string(alg));
    }
  }
}

TEST_CASE("parameter server is bottlenecked by the root link") {
  // 4 devices on a switch, 10 GB/s links. Gather: 3 flows of S = 100 MB share the
  // root's down-link: 3 x 100 MB / 10 GB/s = 30 ms. Broadcast: 3 flows share the
  // root's up-link: 30 ms. Total 60 ms + 2 x 2 us = (n-1)·S/B per direction.
  const Topology t = make_switched(1, 4, 10e9, Time::us(1));
  NetworkModel net = flow_model(t);
  const auto req = request(CollectiveKind::AllReduce, Algorithm::ParameterServer, 4, mb(100), 2);
  const auto& c = net.cost(req);
  CHECK(c.duration.seconds() == doctest::Approx(60.004e-3).epsilon(1e-6).scale(0));
  const auto phases = decompose(req, t);
  REQUIRE(phases.size() == 2);
  for (const auto& f : phases[0].flows) CHECK(f.dst == 2);
  for (const auto& f : phases[1].flows) CHECK(f.src == 2);
  // Formula: gather (α + S/(B/3)) + broadcast (α + S/(B/3)).
  CHECK(parameter_server_time({Time::us(2), 10e9 / 3}, {Time::us(2), 10e9 / 3}, mb(100)).seconds() ==
        doctest::Approx(60.004e-3).epsilon(1e-6).scale(0));
  // PS moves 2(n-1)·S through the root's link, the ring 2(n-1)/n·S through each link:
  // n = 4x slower here.
  const auto ring = net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(100))).duration;
  CHECK(c.duration.seconds() / ring.seconds() == doctest::Approx(4.0).epsilon(0.01));
}

TEST_CASE("contention: flows crossing an oversubscribed link take longer") {
  // Hosts 0,1 on leaf0 and 2,3 on leaf1, 10 GB/s host links. Ring order 0,2,1,3:
  // every ring edge crosses the spine, two flows per spine direction.
  //   spine 10 GB/s (2:1 oversubscribed): each flow 5 GB/s.
  //   spine 20 GB/s (non-blocking):      each flow 10 GB/s (host-link bound).
  const Topology over = make_two_leaves(10e9);
  const Topology full = make_two_leaves(20e9);
  CollectiveRequest req = request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(400));
  req.ranks = {0, 2, 1, 3};
  NetworkModel a = flow_model(over), b = flow_model(full);
  const double t_over = a.cost(req).duration.seconds();
  const double t_full = b.cost(req).duration.seconds();
  // 6 steps of 100 MB: at 5 GB/s 20 ms, at 10 GB/s 10 ms (+ 3 hops x 1 us each step).
  CHECK(t_over == doctest::Approx(6 * (20e-3 + 3e-6)).epsilon(1e-6).scale(0));
  CHECK(t_full == doctest::Approx(6 * (10e-3 + 3e-6)).epsilon(1e-6).scale(0));
  // Host order keeps two of four ring edges inside a leaf: one flow per spine direction.
  NetworkModel c = flow_model(over);
  CHECK(c.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(400))).duration.seconds() <
        0.6 * t_over);
}

TEST_CASE("hierarchical beats a flat ring across nodes with slow inter-node links") {
  // 2 nodes x 4 devices, NVLink 100 GB/s, 1 GB/s uplink.
  // Flat ring: 14 steps of S/8, edges 3->4 and 7->0 cross the uplink at 1 GB/s:
  //   14 x 12.5 MB / 1 GB/s = 175 ms.  Hierarchical: 6 x 25 MB / 100 GB/s + 2 x 12.5 MB / 0.25 GB/s
  //   = 1.5 ms + 100 ms = 101.5 ms.
  const Topology t = make_switched(2, 4, 100e9, Time::us(1), 1e9, Time::us(5));
  NetworkModel net = flow_model(t);
  const double ring = net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 8, mb(100))).duration.seconds();
  const double hier = net.cost(request(CollectiveKind::AllReduce, Algorithm::Hierarchical, 8, mb(100))).duration.seconds();
  CHECK(ring == doctest::Approx(175e-3).epsilon(0.01).scale(0));
  CHECK(hier == doctest::Approx(101.5e-3).epsilon(0.01).scale(0));
  CHECK(hier < ring);
  // Auto picks Hierarchical here and Ring inside one node.
  CHECK(resolve_algorithm(request(CollectiveKind::AllReduce, Algorithm::Auto, 8, mb(1)), t) == Algorithm::Hierarchical);
  CHECK(resolve_algorithm(request(CollectiveKind::AllReduce, Algorithm::Auto, 4, mb(1)), t) == Algorithm::Ring);
}

TEST_CASE("hierarchical decomposition: intra RS, concurrent inter rings, intra AG") {
  const Topology t = make_switched(2, 4, 100e9, Time::us(1), 10e9, Time::us(5));
  const auto phases = decompose(request(CollectiveKind::AllReduce, Algorithm::Hierarchical, 8, mb(80)), t);
  REQUIRE(phases.size() == 3);
  CHECK(phases[0].repeat == 3);
  CHECK(phases[0].flows.size() == 8);          // two 4-rings
  CHECK(phases[0].flows[0].bytes == doctest::Approx(20e6));  // S/m
  CHECK(phases[1].repeat == 2);                // 2(G-1)
  CHECK(phases[1].flows.size() == 8);          // 4 local ranks x 2-ring (both directions)
  CHECK(phases[1].flows[0].bytes == doctest::Approx(10e6));  // S/(mG)
  for (const auto& f : phases[1].flows) CHECK(t.host_of(f.src) != t.host_of(f.dst));
  CHECK(phases[2].repeat == 3);
}

TEST_CASE("tree allreduce: latency-bound small, ~2S/B large") {
  // 8 devices on a switch, 100 GB/s, 1 us per hop: alpha = 2 us. Depth of NCCL's
  // double binary tree on 8 ranks is 3.
  const Topology t = make_switched(1, 8, 100e9, Time::us(1));
  CHECK(double_binary_tree_depth(8) == 3);
  CHECK(double_binary_tree_depth(2) == 1);
  NetworkModel net = flow_model(t);
  // Small: k = 1 chunk, 2 x (3 + 1 - 1) = 6 steps, ~6 x 2 us = 12 us = 2·log2(n) hop latencies.
  const double small = net.cost(request(CollectiveKind::AllReduce, Algorithm::Tree, 8, bytes(8))).duration.seconds();
  CHECK(small == doctest::Approx(12e-6).epsilon(0.01).scale(0));
  // Large (1 GiB): k = 64 chunks; each rank pushes two S/(2k) chunks per step on its link,
  // so each direction takes (d + k - 1)/k x S/B -> total 2 x 66/64 x S/B.
  const double s = gib(1).value();
  const double large = net.cost(request(CollectiveKind::AllReduce, Algorithm::Tree, 8, gib(1))).duration.seconds();
  CHECK(large == doctest::Approx(2.0 * 66 / 64 * s / 100e9 + 132 * 2e-6).epsilon(1e-3).scale(0));
  CHECK(tree_allreduce_time({Time::us(2), 50e9}, gib(1), 3, 64).seconds() == doctest::Approx(large).epsilon(1e-3));
}

TEST_CASE("halving-doubling: log2 n steps each way; non-powers of two fold") {
  const Topology t = make_switched(1, 8, 100e9, Time::us(1));
  auto phases = decompose(request(CollectiveKind::AllReduce, Algorithm::HalvingDoubling, 8, mb(64)), t);
  REQUIRE(phases.size() == 6);
  // Halving: S/2, S/4, S/8 at distances 1, 2, 4; doubling: the reverse.
  CHECK(phases[0].flows[0].bytes == doctest::Approx(32e6));
  CHECK(phases[0].flows[0].dst == 1);
  CHECK(phases[2].flows[0].bytes == doctest::Approx(8e6));
  CHECK(phases[2].flows[0].dst == 4);
  CHECK(phases[5].flows[0].bytes == doctest::Approx(32e6));
  // Bandwidth term equals the ring's 2(n-1)/n·S/B: 2 x 7/8 x 64 MB / 100 GB/s = 1.12 ms,
  // plus 6 steps x 2 us = 12 us.
  NetworkModel net = flow_model(t);
  CHECK(net.cost(request(CollectiveKind::AllReduce, Algorithm::HalvingDoubling, 8, mb(64))).duration.seconds() ==
        doctest::Approx(1.132e-3).epsilon(1e-6).scale(0));
  // n = 6: p = 4, r = 2: fold, 2 halving, 2 doubling, unfold.
  phases = decompose(request(CollectiveKind::AllReduce, Algorithm::HalvingDoubling, 6, mb(64)), t);
  REQUIRE(phases.size() == 6);
  CHECK(phases[0].flows.size() == 2);
  CHECK(phases[0].flows[0].src == 1);
  CHECK(phases[0].flows[0].dst == 0);
  CHECK(phases[1].flows.size() == 4);
  CHECK(phases[5].flows[0].src == 0);
  CHECK(phases[5].flows[0].dst == 1);
}

TEST_CASE("direct allreduce: all-to-all pieces of S/n") {
  // 4 devices, 10 GB/s: each rank sends 3 pieces of S/4 = 25 MB at once, sharing its
  // up-link (and each down-link receives 3): 75 MB / 10 GB/s = 7.5 ms per exchange, 2 exchanges.
  const Topology t = make_switched(1, 4, 10e9, Time::us(1));
  const auto phases = decompose(request(CollectiveKind::AllReduce, Algorithm::Direct, 4, mb(100)), t);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].flows.size() == 12);
  CHECK(phases[0].repeat == 2);
  NetworkModel net = flow_model(t);
  CHECK(net.cost(request(CollectiveKind::AllReduce, Algorithm::Direct, 4, mb(100))).duration.seconds() ==
        doctest::Approx(2 * (7.5e-3 + 2e-6)).epsilon(1e-6).scale(0));
}

TEST_CASE("other collectives") {
  // 4 devices, 10 GB/s, 1 us per hop (alpha 2 us).
  const Topology t = make_switched(1, 4, 10e9, Time::us(1));
  NetworkModel net = flow_model(t);
  const Bytes s = mb(100);
  // Reduce-scatter / all-gather ring: 3 steps of 25 MB at 10 GB/s = 3 x (2.5 ms + 2 us).
  for (auto k : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
    CHECK(net.cost(request(k, Algorithm::Ring, 4, s)).duration.seconds() == doctest::Approx(3 * 2.502e-3).epsilon(1e-6).scale(0));
  CHECK(ring_reduce_scatter_time({Time::us(2), 10e9}, s, 4).seconds() == doctest::Approx(3 * 2.502e-3).scale(0));
  // Hierarchical reduce-scatter on one node falls back to the ring.
  CHECK(net.cost(request(CollectiveKind::ReduceScatter, Algorithm::Hierarchical, 4, s)).duration.seconds() ==
        doctest::Approx(3 * 2.502e-3).epsilon(1e-6).scale(0));
  // Broadcast, pipelined chain from root 1: 1 -> 2 -> 3 -> 0, k = ceil(100e6 / 2^20) = 96 -> 64 chunks;
  // (n - 1) + k - 1 = 66 steps of S/64 / 10 GB/s + 2 us.
  const double bcast = 66 * (100e6 / 64 / 10e9 + 2e-6);
  const auto bphases = decompose(request(CollectiveKind::Broadcast, Algorithm::Ring, 4, s, 1), t);
  REQUIRE(bphases.size() == 1);
  CHECK(bphases[0].flows[0].src == 1);
  CHECK(bphases[0].flows[2].dst == 0);
  CHECK(net.cost(request(CollectiveKind::Broadcast, Algorithm::Ring, 4, s, 1)).duration.seconds() ==
        doctest::Approx(bcast).epsilon(1e-6));
  // Reduce mirrors broadcast: same time on a symmetric topology, flows reversed.
  CHECK(net.cost(request(CollectiveKind::Reduce, Algorithm::Ring, 4, s, 1)).duration.seconds() ==
        doctest::Approx(bcast).epsilon(1e-6));
  CHECK(decompose(request(CollectiveKind::Reduce, Algorithm::Ring, 4, s, 1), t)[0].flows[0].dst == 1);
  // Direct broadcast: the root's up-link carries 3 x S: 30 ms.
  CHECK(net.cost(request(CollectiveKind::Broadcast, Algorithm::Direct, 4, s)).duration.seconds() ==
        doctest::Approx(30.002e-3).epsilon(1e-6).scale(0));
  // Binomial broadcast (HD): 2 steps of the whole message: 2 x (10 ms + 2 us).
  CHECK(net.cost(request(CollectiveKind::Broadcast, Algorithm::HalvingDoubling, 4, s)).duration.seconds() ==
        doctest::Approx(2 * 10.002e-3).epsilon(1e-6).scale(0));
  // Tree broadcast: btree over 4 ranks has depth 2; 64 chunks -> 65 steps, the root's link
  // carries a chunk to each of its children: NCCL's btree root has one child, rank 1 two.
  CHECK(net.cost(request(CollectiveKind::Broadcast, Algorithm::Tree, 4, s)).duration.seconds() > bcast * 0.9);
  // Gather / scatter of 100 MB pieces, direct: 3 pieces through the root's link: 30 ms.
  CHECK(net.cost(request(CollectiveKind::Gather, Algorithm::Auto, 4, s)).duration.seconds() ==
        doctest::Approx(30.002e-3).epsilon(1e-6).scale(0));
  CHECK(net.cost(request(CollectiveKind::Scatter, Algorithm::Auto, 4, s)).duration.seconds() ==
        doctest::Approx(30.002e-3).epsilon(1e-6).scale(0));
  // Binomial gather: step 1 moves one piece (10 ms), step 2 moves two pieces (20 ms).
  CHECK(net.cost(request(CollectiveKind::Gather, Algorithm::Tree, 4, s)).duration.seconds() ==
        doctest::Approx(30.004e-3).epsilon(1e-6).scale(0));
  // Send/recv: 100 MB / 10 GB/s + 2 us.
  CollectiveRequest sr = request(CollectiveKind::SendRecv, Algorithm::Auto, 2, s);
  sr.ranks = {3, 1};
  CHECK(net.cost(sr).duration.seconds() == doctest::Approx(10.002e-3).epsilon(1e-6).scale(0));
  // One rank: nothing to do.
  CHECK(net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 1, s)).duration == Time::zero());
}

TEST_CASE("cache: repeated requests hit; a new size reuses the solved phase pattern") {
  const Topology t = make_switched(1, 4, 10e9, Time::us(1));
  NetworkModel net = flow_model(t);
  const auto req = request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(100));
  const Time first = net.cost(req).duration;
  CHECK(net.cache_misses() == 1);
  CHECK(net.cache_hits() == 0);
  CHECK(net.cost(req).duration == first);
  CHECK(net.cache_hits() == 1);
  // Another size: a cache miss, but the ring phase is the same pattern scaled: no new solve.
  const auto& c2 = net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(200)));
  CHECK(net.cache_misses() == 2);
  CHECK(c2.phases_solved == 0);
  CHECK(net.phase_solves() == 1);
  CHECK(c2.duration.seconds() == doctest::Approx(6 * (5e-3 + 2e-6)).epsilon(1e-6).scale(0));
  // Other ranks (same count, same first and last rank) are a different key.
  CollectiveRequest other = req;
  other.ranks = {0, 2, 1, 3};
  net.cost(other);
  CHECK(net.cache_misses() == 3);
  // Another root is another key.
  CollectiveRequest rooted = request(CollectiveKind::Broadcast, Algorithm::Ring, 4, mb(100), 0);
  net.cost(rooted);
  rooted.root = 2;
  net.cost(rooted);
  CHECK(net.cache_misses() == 5);
}

TEST_CASE("allreduce_bus_bandwidth is algbw x 2(n-1)/n") {
  // 1 GB in 10 ms on 8 ranks: algbw 100 GB/s, x 14/8 = 175 GB/s.
  CHECK(allreduce_bus_bandwidth(gb(1), Time::ms(10), 8) == doctest::Approx(175e9));
  CHECK(allreduce_bus_bandwidth(gb(1), Time::ms(10), 1) == 0);
}

TEST_CASE("algorithm names round-trip") {
  for (Algorithm a : {Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                      Algorithm::Hierarchical, Algorithm::Direct, Algorithm::ParameterServer}) {
    Algorithm back = Algorithm::Ring;
    CHECK(parse_algorithm(to_string(a), back));
    CHECK(back == a);
  }
  Algorithm x;
  CHECK_FALSE(parse_algorithm("mesh", x));
  CHECK(to_string(CollectiveKind::ReduceScatter) == "reduce_scatter");
}

TEST_CASE("collective kind names round-trip") {
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                           CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::Gather,
                           CollectiveKind::Scatter, CollectiveKind::SendRecv}) {
    CollectiveKind back = k == CollectiveKind::AllReduce ? CollectiveKind::SendRecv : CollectiveKind::AllReduce;
    CHECK(parse_collective_kind(to_string(k), back));
    CHECK(back == k);
  }
  CollectiveKind x;
  CHECK_FALSE(parse_collective_kind("ps_round", x));
  CHECK_FALSE(parse_collective_kind("", x));
}

TEST_CASE("8-GPU ring allreduce bus bandwidth on presets matches nccl-tests") {
  // nccl-tests references (DESIGN.md §6): 8xA100 SXM ~230 GB/s, 8xH100 ~370 GB/s (ring).
  for (const auto& [preset, reference] : {std::pair<const char*, double>{"dgx-a100", 230e9}, {"dgx-h100", 370e9}}) {
    const Topology t = topology::build_topology(topology::load_cluster_preset(preset), 8);
    NetworkModel net = flow_model(t);
    const auto req = request(CollectiveKind::AllReduce, Algorithm::Ring, 8, gib(1));
    const double busbw = allreduce_bus_bandwidth(req.bytes, net.cost(req).duration, 8);
    CHECK_MESSAGE(busbw == doctest::Approx(reference).epsilon(0.15), preset << " busbw " << busbw / 1e9 << " GB/s");
  }
}

TEST_CASE("ring channels spread node crossings over every NIC") {
  // 2 nodes x 4 devices, NVLink 100 GB/s, one 10 GB/s NIC per device, S = 100 MB.
  // One ring: edges 3->4 and 7->0 cross nodes through one NIC each:
  //   14 steps x S/8 / 10 GB/s = 14 x 1.25 ms = 17.5 ms.
  // 4 channels: channel c leaves each node from local rank c-1 and enters at local
  // rank c, so every NIC carries one crossing flow of S/32 per step:
  //   14 x 3.125 MB / 10 GB/s = 4.375 ms (the NVLink carries 3 x 3.125 MB at 100 GB/s, not the bottleneck).
  const Topology t = make_rails(2, 4, 100e9, 10e9);
  NetworkModel net = flow_model(t);
  auto req = request(CollectiveKind::AllReduce, Algorithm::Ring, 8, mb(100));
  CHECK(net.cost(req).duration.seconds() == doctest::Approx(17.5e-3).epsilon(1e-6).scale(0));
  req.channels = 4;
  const auto phases = decompose(req, t);
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].flows.size() == 32);
  int crossings_from[8] = {};
  for (const auto& f : phases[0].flows)
    if (t.host_of(f.src) != t.host_of(f.dst)) ++crossings_from[f.src];
  for (int d = 0; d < 8; ++d) CHECK(crossings_from[d] == 1);
  CHECK(net.cost(req).duration.seconds() == doctest::Approx(4.375e-3).epsilon(1e-6).scale(0));
  NetworkModel an = analytic_model(t);
  CHECK(an.cost(req).duration.seconds() == doctest::Approx(4.375e-3).epsilon(1e-6).scale(0));
  // Inside one node the rotated rings are the same cycle: channels change nothing.
  auto one = request(CollectiveKind::AllReduce, Algorithm::Ring, 4, mb(100));
  const Time t1 = net.cost(one).duration;
  one.channels = 4;
  CHECK(net.cost(one).duration == t1);
}

TEST_CASE("a calibrated table prices the gap between two regimes' measured sizes by interpolation") {
  // 4 devices, 100 GB/s links, 1 us hops; a ring allreduce table of two
  // regimes: up to 512 KiB 400 us per step at 10000 x the bandwidth (flat:
  // latency-bound), beyond 300 us per step at 0.1 x. Regime 1 saw 4 KiB-256
  // KiB, regime 2 1 MiB-256 MiB. A 482 KB buffer lies in regime 1 by up_to but
  // beyond its last measured size: its price is the line between the table's
  // prices at 256 KiB (regime 1) and 1 MiB (regime 2).
  const Topology t = make_switched(1, 4, 100e9, Time::us(1));
  CommCalibration table;
  table.collective = "allreduce";
  table.ranks = 4;
  table.algorithm = Algorithm::Ring;
  table.regimes = {{512.0 * 1024, Time::us(400), 1e4, 4096, 256.0 * 1024},
                   {0, Time::us(300), 0.1, 1024.0 * 1024, 256.0 * 1024 * 1024}};
  NetworkOptions o;
  o.mode = NetworkMode::Flow;
  o.calibration = {table};
  NetworkModel net(t, o);
  auto price = [&](double bytes) {
    return net.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, Bytes(bytes))).duration.seconds();
  };
  const double lo = price(256.0 * 1024), hi = price(1024.0 * 1024);
  // (Time counts whole nanoseconds: 1e-6 relative.) At the edges: each regime's own line. 256 KiB: 6 steps of 2 us + 400 us +
  // 64 KiB / 1e15 B/s; 1 MiB: 6 x (2 us + 300 us + 256 KiB / 10 GB/s).
  CHECK(lo == doctest::Approx(6 * (2e-6 + 400e-6 + 65536 / 1e15)).epsilon(1e-6));
  CHECK(hi == doctest::Approx(6 * (2e-6 + 300e-6 + 262144 / 1e10)).epsilon(1e-6));
  const double s = 482e3, w = (s - 256.0 * 1024) / (768.0 * 1024);
  CHECK(price(s) == doctest::Approx(lo + w * (hi - lo)).epsilon(1e-6));
  // In regime 2's part of the gap (above up_to) the same line.
  const double s2 = 800e3, w2 = (s2 - 256.0 * 1024) / (768.0 * 1024);
  CHECK(price(s2) == doctest::Approx(lo + w2 * (hi - lo)).epsilon(1e-6));
  // Inside a regime's measured sizes its own line, unchanged.
  CHECK(price(64.0 * 1024) == doctest::Approx(6 * (2e-6 + 400e-6 + 16384 / 1e15)).epsilon(1e-6));
  CHECK(price(4.0 * 1024 * 1024) == doctest::Approx(6 * (2e-6 + 300e-6 + 1048576 / 1e10)).epsilon(1e-6));
  // Analytic pricing (Horovod's control messages) interpolates the same way,
  // and a repeated request (cached) prices the same.
  o.mode = NetworkMode::Analytic;
  NetworkModel analytic(t, o);
  auto analytic_price = [&](double bytes) {
    return analytic.analytic_time(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, Bytes(bytes))).seconds();
  };
  const double alo = analytic_price(256.0 * 1024), ahi = analytic_price(1024.0 * 1024);
  CHECK(alo == doctest::Approx(lo).epsilon(1e-6));
  CHECK(ahi == doctest::Approx(hi).epsilon(1e-6));
  CHECK(analytic_price(s) == doctest::Approx(alo + w * (ahi - alo)).epsilon(1e-6));
  CHECK(price(s) == doctest::Approx(lo + w * (hi - lo)).epsilon(1e-6));
  o.mode = NetworkMode::Flow;
  // Without measured sizes (hand-written tables, older profiles) regime 1's
  // line prices 482 KB: 6 x (2 us + 400 us + tiny).
  table.regimes[0].measured_from = table.regimes[0].measured_to = 0;
  o.calibration = {table};
  NetworkModel old(t, o);
  const double extrapolated =
      old.cost(request(CollectiveKind::AllReduce, Algorithm::Ring, 4, Bytes(s))).duration.seconds();
  CHECK(extrapolated == doctest::Approx(6 * (2e-6 + 400e-6 + s / 4 / 1e15)).epsilon(1e-6));
  CHECK(comm_regime_gap(table, s) == std::nullopt);
}
