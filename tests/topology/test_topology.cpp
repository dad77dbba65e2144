// Tests of the cluster graph: construction, validation, routing rules, ECMP, threads.
#include <doctest.h>
#include <fmt/format.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "topology/topology.hpp"

using namespace dptwin;
using namespace dptwin::topology;

namespace {

DeviceSpec test_gpu() {
  DeviceSpec d;
  d.name = "test-gpu";
  d.fp32_peak = tflop_per_s(10);
  d.fp16_peak = tflop_per_s(100);
  d.memory_bandwidth = gbyte_per_s(1000);
  d.memory = gib(16);
  d.launch_overhead = Time::us(5);
  return d;
}

int add_device(Topology& t, const std::string& name, int host) {
  int v = t.add_vertex({name, VertexKind::Device, host, -1});
  t.set_device_spec(t.vertex(v).device, test_gpu());
  return v;
}

// Checks that a route is a contiguous walk from src's vertex to dst's vertex.
void check_walk(const Topology& t, int src, int dst) {
  const auto& r = t.route(src, dst);
  REQUIRE(!r.empty());
  CHECK(t.link(r.front()).from == t.device_vertex(src));
  CHECK(t.link(r.back()).to == t.device_vertex(dst));
  for (size_t i = 1; i < r.size(); ++i) CHECK(t.link(r[i - 1]).to == t.link(r[i]).from);
}

std::string finalize_error(Topology& t) {
  try {
    t.finalize();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Two hosts x 2 GPUs; GPUs of a host joined by NVLink and to their CPU by PCIe;
// one NIC per host on the CPU; one switch.
Topology two_hosts() {
  Topology t;
  t.name = "two-hosts";
  for (int h = 0; h < 2; ++h) {
    std::string p = fmt::format("n{}.", h);
    int g0 = add_device(t, p + "gpu0", h), g1 = add_device(t, p + "gpu1", h);
    int cpu = t.add_vertex({p + "cpu0", VertexKind::HostCpu, h, -1});
    int nic = t.add_vertex({p + "nic0", VertexKind::Nic, h, -1});
    t.add_link(g0, g1, LinkKind::NvLink, gbyte_per_s(50), Time::us(1), 0.8);
    t.add_link(g0, cpu, LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
    t.add_link(g1, cpu, LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
    t.add_link(cpu, nic, LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
  }
  int sw = t.add_vertex({"sw", VertexKind::Switch, -1, -1});
  t.add_link(t.find_vertex("n0.nic0"), sw, LinkKind::InfiniBand, gbit_per_s(100), Time::us(2), 0.9);
  t.add_link(t.find_vertex("n1.nic0"), sw, LinkKind::InfiniBand, gbit_per_s(100), Time::us(2), 0.9);
  t.finalize();
  return t;
}

}  // namespace

TEST_CASE("graph building: counts, hosts, link ids") {
  Topology t = two_hosts();
  CHECK(t.num_devices() == 4);
  CHECK(t.num_hosts() == 2);
  CHECK(t.num_vertices() == 9);
  CHECK(t.num_links() == 2 * 10);
  CHECK(t.devices_on_host(1) == std::vector<int>{2, 3});
  CHECK(t.host_of(3) == 1);
  CHECK(t.vertex(t.device_vertex(2)).name == "n1.gpu0");
  CHECK(t.device_spec(0).name == "test-gpu");
  // add_link returns the a->b id; b->a is id + 1.
  const Link& ab = t.link(0);
  const Link& ba = t.link(1);
  CHECK(ab.from == ba.to);
  CHECK(ab.to == ba.from);
  CHECK(ab.name == "n0.gpu0->n0.gpu1");
  CHECK(to_string(LinkKind::NvLink) == "nvlink");
  CHECK(t.find_vertex("nope") == -1);
}

TEST_CASE("routes: hops, latency, bandwidth, local copies") {
  Topology t = two_hosts();
  CHECK(t.route(0, 0).empty());
  CHECK(t.route_latency(0, 0) == Time::zero());
  CHECK(t.route_bandwidth(0, 0).value() == doctest::Approx(1000e9));  // device memory bandwidth
  // Inside a host: the direct NVLink (1 hop) beats gpu->cpu->gpu (2 hops).
  REQUIRE(t.route(0, 1).size() == 1);
  CHECK(t.link(t.route(0, 1)[0]).kind == LinkKind::NvLink);
  CHECK(t.route_bandwidth(0, 1).value() == doctest::Approx(40e9));  // 50 GB/s x 0.8
  // Across hosts: gpu -> cpu -> nic -> sw -> nic -> cpu -> gpu.
  CHECK(t.route(0, 3).size() == 6);
  check_walk(t, 0, 3);
  CHECK(t.route_latency(0, 3) == Time::us(1 + 1 + 2 + 2 + 1 + 1));
  CHECK(t.route_bandwidth(0, 3).value() == doctest::Approx(12.5e9 * 0.9));
  // Cached: the same object is returned.
  CHECK(&t.route(0, 3) == &t.route(0, 3));
}

TEST_CASE("routes prefer fewest hops, then lowest latency") {
  Topology t;
  int a = add_device(t, "a", 0), b = add_device(t, "b", 0);
  int slow = t.add_vertex({"slow", VertexKind::PcieSwitch, 0, -1});
  int fast = t.add_vertex({"fast", VertexKind::PcieSwitch, 0, -1});
  int x = t.add_vertex({"x", VertexKind::PcieSwitch, 0, -1});
  t.add_link(a, slow, LinkKind::Pcie, gbyte_per_s(10), Time::us(5));
  t.add_link(slow, b, LinkKind::Pcie, gbyte_per_s(10), Time::us(5));
  t.add_link(a, fast, LinkKind::Pcie, gbyte_per_s(10), Time::us(1));
  t.add_link(fast, x, LinkKind::Pcie, gbyte_per_s(10), Time::ns(1));
  t.add_link(x, b, LinkKind::Pcie, gbyte_per_s(10), Time::ns(1));
  int mid = t.add_vertex({"mid", VertexKind::PcieSwitch, 0, -1});
  t.add_link(a, mid, LinkKind::Pcie, gbyte_per_s(10), Time::us(2));
  t.add_link(mid, b, LinkKind::Pcie, gbyte_per_s(10), Time::us(2));
  t.finalize();
  // Two-hop paths: via slow (10 us) and via mid (4 us); the 3-hop path via fast is faster but longer.
  const auto& r = t.route(a, b);
  REQUIRE(r.size() == 2);
  CHECK(t.vertex(t.link(r[0]).to).name == "mid");
  CHECK(t.route_latency(0, 1) == Time::us(4));
}

TEST_CASE("validation errors") {
  SUBCASE("no devices") {
    Topology t;
    t.add_vertex({"sw", VertexKind::Switch, -1, -1});
    CHECK(finalize_error(t).find("no devices") != std::string::npos);
  }
  SUBCASE("disconnected devices") {
    Topology t;
    t.name = "broken";
    add_device(t, "g0", 0);
    add_device(t, "g1", 1);
    std::string e = finalize_error(t);
    CHECK(e.find("topology 'broken'") != std::string::npos);
    CHECK(e.find("'g0' cannot reach device 'g1'") != std::string::npos);
  }
  SUBCASE("devices do not forward traffic") {
    Topology t;
    int a = add_device(t, "a", 0), b = add_device(t, "b", 0), c = add_device(t, "c", 0);
    t.add_link(a, b, LinkKind::NvLink, gbyte_per_s(25), Time::us(1));
    t.add_link(b, c, LinkKind::NvLink, gbyte_per_s(25), Time::us(1));
    CHECK(finalize_error(t).find("'a' cannot reach device 'c'") != std::string::npos);
  }
  SUBCASE("third hosts do not forward traffic") {
    Topology t;
    std::vector<int> cpus;
    for (int h = 0; h < 3; ++h) {
      int d = add_device(t, fmt::format("g{}", h), h);
      cpus.push_back(t.add_vertex({fmt::format("cpu{}", h), VertexKind::HostCpu, h, -1}));
      t.add_link(d, cpus.back(), LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
    }
    t.add_link(cpus[0], cpus[1], LinkKind::Other, gbyte_per_s(16), Time::us(1));
    t.add_link(cpus[1], cpus[2], LinkKind::Other, gbyte_per_s(16), Time::us(1));
    CHECK(finalize_error(t).find("'g0' cannot reach device 'g2'") != std::string::npos);
  }
  SUBCASE("direct host-to-host link is fine") {
    Topology t;
    int c0 = t.add_vertex({"cpu0", VertexKind::HostCpu, 0, -1});
    int c1 = t.add_vertex({"cpu1", VertexKind::HostCpu, 1, -1});
    int d0 = add_device(t, "g0", 0), d1 = add_device(t, "g1", 1);
    t.add_link(d0, c0, LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
    t.add_link(d1, c1, LinkKind::Pcie, gbyte_per_s(16), Time::us(1));
    t.add_link(c0, c1, LinkKind::Ethernet, gbit_per_s(10), Time::us(10));
    CHECK(finalize_error(t).empty());
    CHECK(t.route(0, 1).size() == 3);
  }
  SUBCASE("non-positive bandwidth") {
    Topology t;
    int a = add_device(t, "a", 0), b = add_device(t, "b", 0);
    t.add_link(a, b, LinkKind::NvLink, gbyte_per_s(0), Time::us(1));
    CHECK(finalize_error(t).find("bandwidth must be > 0") != std::string::npos);
  }
  SUBCASE("efficiency out of range") {
    Topology t;
    int a = add_device(t, "a", 0), b = add_device(t, "b", 0);
    t.add_link(a, b, LinkKind::NvLink, gbyte_per_s(25), Time::us(1), 1.5);
    CHECK(finalize_error(t).find("efficiency must be in (0, 1]") != std::string::npos);
  }
  SUBCASE("non-positive device figure") {
    Topology t;
    int a = t.add_vertex({"a", VertexKind::Device, 0, -1});
    DeviceSpec s = test_gpu();
    s.memory = Bytes(0);
    t.set_device_spec(t.vertex(a).device, s);
    CHECK(finalize_error(t).find("memory must be > 0") != std::string::npos);
  }
  SUBCASE("device without spec") {
    Topology t;
    t.add_vertex({"a", VertexKind::Device, 0, -1});
    CHECK(finalize_error(t).find("has no device spec") != std::string::npos);
  }
  SUBCASE("duplicate names") {
    Topology t;
    add_device(t, "a", 0);
    t.add_vertex({"a", VertexKind::HostCpu, 0, -1});
    CHECK(finalize_error(t).find("'a' is used twice") != std::string::npos);
  }
  SUBCASE("devices out of host order") {
    Topology t;
    int a = add_device(t, "a", 1), b = add_device(t, "b", 0);
    t.add_link(a, b, LinkKind::Ethernet, gbit_per_s(10), Time::us(1));
    CHECK(finalize_error(t).find("host order") != std::string::npos);
  }
}

TEST_CASE("one-way links: shared segment crossed by every copy") {
  Topology t;
  int in = t.add_vertex({"shm.in", VertexKind::HostCpu, 0, -1});
  int out = t.add_vertex({"shm.out", VertexKind::HostCpu, 0, -1});
  int total = t.add_one_way_link(in, out, LinkKind::SharedMemory, gbyte_per_s(40), Time::zero());
  for (int r = 0; r < 4; ++r) {
    int d = add_device(t, fmt::format("rank{}", r), 0);
    t.add_one_way_link(d, in, LinkKind::SharedMemory, gbyte_per_s(10), Time::ns(500));
    t.add_one_way_link(out, d, LinkKind::SharedMemory, gbyte_per_s(10), Time::ns(500));
  }
  t.finalize();
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) {
      if (s == d) continue;
      const auto& r = t.route(s, d);
      REQUIRE(r.size() == 3);
      CHECK(r[1] == total);
      CHECK(t.route_latency(s, d) == Time::us(1));
    }
}

TEST_CASE("ECMP: equal-cost paths spread over spines, deterministically") {
  // 8 hosts x 1 device, 2 leaves, 8 spines.
  auto build = [] {
    Topology t;
    std::vector<int> leaves{t.add_vertex({"leaf0", VertexKind::Switch, -1, -1}),
                            t.add_vertex({"leaf1", VertexKind::Switch, -1, -1})};
    for (int h = 0; h < 8; ++h) {
      int d = add_device(t, fmt::format("g{}", h), h);
      t.add_link(d, leaves[h / 4], LinkKind::InfiniBand, gbit_per_s(100), Time::us(1));
    }
    for (int s = 0; s < 8; ++s) {
      int sp = t.add_vertex({fmt::format("spine{}", s), VertexKind::Switch, -1, -1});
      for (int l : leaves) t.add_link(l, sp, LinkKind::InfiniBand, gbit_per_s(100), Time::us(1));
    }
    t.finalize();
    return t;
  };
  Topology t = build(), u = build();
  std::set<std::string> spines;
  for (int s = 0; s < 4; ++s)
    for (int d = 4; d < 8; ++d) {
      const auto& r = t.route(s, d);
      REQUIRE(r.size() == 4);
      check_walk(t, s, d);
      spines.insert(t.vertex(t.link(r[1]).to).name);
      CHECK(r == u.route(s, d));  // deterministic across builds
    }
  CHECK(spines.size() >= 4);  // 16 pairs over 8 spines
  // Same leaf: no spine.
  CHECK(t.route(0, 1).size() == 2);
}

TEST_CASE("routes are thread-safe") {
  Topology t = two_hosts();
  std::vector<std::vector<int>> serial;
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) serial.push_back(Topology(two_hosts()).route(s, d));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 200; ++rep)
        for (int s = 0; s < 4; ++s)
          for (int d = 0; d < 4; ++d)
            if (t.route((s + k) % 4, d) != serial[((s + k) % 4) * 4 + d]) ++bad[k];
    });
  for (auto& th : threads) th.join();
  CHECK(bad == std::vector<int>(4, 0));
}
