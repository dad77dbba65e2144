// Tests of the device catalog, the cluster YAML format, the presets and route speed.
#include <doctest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "topology/cluster.hpp"

using namespace dptwin;
using namespace dptwin::topology;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

ClusterSpec from_text(const std::string& text) { return parse_cluster(load_yaml_string(text, "c.yaml")); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Kinds of the vertices a route passes through, e.g. "nvswitch" for GPU->NVSwitch->GPU.
std::vector<VertexKind> interior(const Topology& t, int s, int d) {
  std::vector<VertexKind> out;
  const auto& r = t.route(s, d);
  for (size_t i = 0; i + 1 < r.size(); ++i) out.push_back(t.vertex(t.link(r[i]).to).kind);
  return out;
}

void check_walk(const Topology& t, int src, int dst) {
  const auto& r = t.route(src, dst);
  REQUIRE(!r.empty());
  REQUIRE(t.link(r.front()).from == t.device_vertex(src));
  REQUIRE(t.link(r.back()).to == t.device_vertex(dst));
  for (size_t i = 1; i < r.size(); ++i) REQUIRE(t.link(r[i - 1]).to == t.link(r[i]).from);
}

const char* kSmallTemplate = R"(name: small
node:
  device: v100-sxm2-16gb
  devices: 2
  intra:
    kind: nvlink
    layout: all-to-all
    bandwidth: 25 GB/s
    latency: 1 us
  host:
    cpus: 1
    device_link: {bandwidth: 16 GB/s, latency: 1 us}
  nics:
    count: 1
    kind: ethernet
    bandwidth: 10 Gb/s
    latency: 5 us
    attach: cpu
    attach_link: {bandwidth: 16 GB/s, latency: 1 us}
network:
  kind: switch
  max_nodes: 4
)";

}  // namespace

TEST_CASE("device catalog figures") {
  auto v100 = find_device_spec("v100-sxm2-16gb");
  REQUIRE(v100);
  CHECK(v100->fp16_peak.value() == doctest::Approx(125e12));
  CHECK(v100->fp32_peak.value() == doctest::Approx(15.7e12));
  CHECK(v100->bf16_peak.value() == 0);
  CHECK(v100->peak(DType::BF16).value() == doctest::Approx(15.7e12));  // falls back to fp32
  CHECK(v100->memory.value() == doctest::Approx(gib(16).value()));
  auto a100 = find_device_spec("a100-sxm4-80gb");
  REQUIRE(a100);
  CHECK(a100->memory_bandwidth.value() == doctest::Approx(2039e9));
  CHECK(a100->peak(DType::BF16).value() == doctest::Approx(312e12));
  CHECK(find_device_spec("a100-sxm4-40gb")->memory_bandwidth.value() == doctest::Approx(1555e9));
  CHECK(find_device_spec("h100-sxm5-80gb")->fp16_peak.value() == doctest::Approx(989e12));
  CHECK(find_device_spec("h200-sxm-141gb")->memory_bandwidth.value() == doctest::Approx(4800e9));
  CHECK(find_device_spec("l4")->fp32_peak.value() == doctest::Approx(30.3e12));
  CHECK(find_device_spec("a100-pcie-40gb"));
  auto cpu = find_device_spec("cpu-core");
  REQUIRE(cpu);
  CHECK(cpu->kind == DeviceKind::Cpu);
  CHECK(cpu->cores == 1);
  CHECK(cpu->launch_overhead == Time::us(20));
  for (const auto& d : device_catalog()) {
    CHECK(d.price_per_hour > 0);
    CHECK(d.fp32_peak.value() > 0);
    CHECK(d.launch_overhead > Time::zero());
  }
  CHECK(!find_device_spec("tpu"));
}

TEST_CASE("parse_device_spec") {
  CHECK(parse_device_spec(load_yaml_string("l4", "d.yaml")).name == "l4");
  auto custom = parse_device_spec(load_yaml_string("{base: a100-sxm4-40gb, name: a100-slow, memory: 20 GiB}", "d.yaml"));
  CHECK(custom.name == "a100-slow");
  CHECK(custom.memory.value() == doctest::Approx(gib(20).value()));
  CHECK(custom.fp16_peak.value() == doctest::Approx(312e12));
  auto full = parse_device_spec(load_yaml_string(
      "{name: x, kind: cpu, fp32_peak: 1 TFLOP/s, fp16_peak: 2 TFLOP/s, bf16_peak: 0, memory_bandwidth: 50 GB/s, "
      "memory: 8 GiB, launch_overhead: 3 us, price_per_hour: 0.5}",
      "d.yaml"));
  CHECK(full.kind == DeviceKind::Cpu);
  CHECK(full.cores == 1);
  CHECK(full.bf16_peak.value() == 0);
  std::string e = error_of([] { parse_device_spec(load_yaml_string("v100-sxm2", "d.yaml")); });
  CHECK(contains(e, "unknown device 'v100-sxm2'"));
  CHECK(contains(e, "a100-sxm4-80gb"));  // lists the catalog
  e = error_of([] { parse_device_spec(load_yaml_string("{name: x, fp32_peak: 1 TFLOP/s}", "d.yaml")); });
  CHECK(contains(e, "fp16_peak"));
  CHECK(contains(e, "missing required key"));
  e = error_of([] { parse_device_spec(load_yaml_string("{base: l4, memroy: 1 GiB}", "d.yaml")); });
  CHECK(contains(e, "did you mean 'memory'"));
}

TEST_CASE("every preset parses and builds at 1 device, 1 node, 8 nodes and its maximum") {
  auto names = cluster_preset_names();
  CHECK(names.size() == 10);
  for (const auto& name : names) {
    CAPTURE(name);
    ClusterSpec spec = load_cluster_preset(name);
    CHECK(spec.name == name);
    CHECK(!cluster_preset_text(name).empty());
    REQUIRE(spec.max_nodes);
    for (int devices : {1, spec.devices_per_node, 8 * spec.devices_per_node, spec.max_devices()}) {
      if (devices > spec.max_devices()) continue;
      CAPTURE(devices);
      Topology t = build_topology(spec, devices);
      CHECK(t.num_devices() >= devices);
      CHECK(t.num_hosts() == spec.nodes_for(devices));
      if (devices > 1) {
        check_walk(t, 0, devices - 1);
        check_walk(t, devices - 1, 0);
      }
    }
    std::string e = error_of([&] { build_topology(spec, spec.max_devices() + 1); });
    CHECK(contains(e, "holds at most"));
  }
}

TEST_CASE("preset device counts and figures") {
  auto hal = load_cluster_preset("hal-v100");
  CHECK(hal.devices_per_node == 4);
  CHECK(hal.max_devices() == 64);
  CHECK(hal.device.name == "v100-sxm2-16gb");
  CHECK(load_cluster_preset("dgx-a100").max_devices() == 4096);
  CHECK(load_cluster_preset("dgx-h100").max_devices() == 4096);
  CHECK(load_cluster_preset("hgx-h200").device.name == "h200-sxm-141gb");
  CHECK(load_cluster_preset("dgx1-v100").devices_per_node == 8);
  CHECK(load_cluster_preset("pcie-8gpu").devices_per_node == 8);
  CHECK(load_cluster_preset("eth-25g").devices_per_node == 4);
  auto cpu = load_cluster_preset("localhost-cpu");
  CHECK(cpu.max_devices() == 64);
  Topology t = build_topology(cpu, 5);  // partial node: exactly the ranks asked for
  CHECK(t.num_devices() == 5);
  CHECK(t.device_spec(0).kind == DeviceKind::Cpu);
  const auto& r = t.route(0, 4);
  REQUIRE(r.size() == 3);  // rank -> shared segment -> rank, crossing the shared total
  CHECK(t.link(r[1]).bandwidth.value() == doctest::Approx(40e9));
  CHECK(t.route_latency(0, 4) == Time::us(1));
  CHECK(t.route_bandwidth(0, 4).value() == doctest::Approx(8e9));
}

TEST_CASE("hal-v100 routes: AC922 NVLink inside a node, EDR across nodes") {
  Topology t = build_topology(load_cluster_preset("hal-v100"), 8);
  CHECK(t.num_hosts() == 2);
  // GPU0-GPU1 share socket 0: one NVLink hop of 3 bricks (75 GB/s).
  REQUIRE(t.route(0, 1).size() == 1);
  CHECK(t.link(t.route(0, 1)[0]).bandwidth.value() == doctest::Approx(75e9));
  // GPU0-GPU2: GPU -> CPU0 -> X-bus -> CPU1 -> GPU.
  CHECK(interior(t, 0, 2) == std::vector<VertexKind>{VertexKind::HostCpu, VertexKind::HostCpu});
  // Across nodes: gpu0 -> cpu0 -> nic -> switch -> nic -> cpu0 -> gpu0.
  CHECK(t.route(0, 4).size() == 6);
  // gpu3 sits on socket 1; the NIC is on socket 0: one more hop.
  CHECK(t.route(3, 4).size() == 7);
  CHECK(t.route_bandwidth(0, 4).value() == doctest::Approx(12.5e9 * 0.92));
}

TEST_CASE("dgx-a100 routes: NVSwitch, rails, fat-tree spines and ECMP") {
  ClusterSpec spec = load_cluster_preset("dgx-a100");
  Topology t = build_topology(spec, 8 * 64);
  CHECK(t.num_hosts() == 64);
  // Inside a node: GPU -> NVSwitch -> GPU, at 300 GB/s x 0.8 = 240 GB/s (nccl-tests ~230).
  CHECK(interior(t, 0, 5) == std::vector<VertexKind>{VertexKind::NvSwitch});
  CHECK(t.route_bandwidth(0, 1).value() == doctest::Approx(240e9));
  CHECK(std::abs(t.route_bandwidth(0, 1).value() / 230e9 - 1) < 0.15);
  // Same scalable unit, same rail: gpu -> pcie -> nic -> leaf -> nic -> pcie -> gpu.
  CHECK(t.route(0, 8).size() == 6);
  // Another scalable unit (nodes 0 and 20): up through a spine.
  auto path = interior(t, 0, 8 * 20);
  REQUIRE(path.size() == 7);
  CHECK(path[3] == VertexKind::Switch);
  std::set<std::string> spines;
  for (int node = 0; node < 20; ++node) {
    const auto& r = t.route(8 * node, 8 * (node + 20));
    REQUIRE(r.size() == 8);
    spines.insert(t.vertex(t.link(r[3]).to).name);
  }
  CHECK(spines.size() >= 8);  // 20 pairs spread over the 20 spines
  for (const auto& s : spines) CHECK(s.rfind("spine", 0) == 0);
  // H100: 450 GB/s x 0.8 = 360 GB/s (nccl-tests ~370).
  Topology h = build_topology(load_cluster_preset("dgx-h100"), 8);
  CHECK(std::abs(h.route_bandwidth(0, 1).value() / 370e9 - 1) < 0.15);
}

TEST_CASE("dgx1-v100: hybrid cube-mesh bricks") {
  Topology t = build_topology(load_cluster_preset("dgx1-v100"), 8);
  // GPU0-GPU3: 2 bricks (50 GB/s); GPU0-GPU1: 1 brick; GPU0-GPU5: no NVLink (PCIe/QPI path).
  CHECK(t.route(0, 3).size() == 1);
  CHECK(t.link(t.route(0, 3)[0]).bandwidth.value() == doctest::Approx(50e9));
  CHECK(t.link(t.route(0, 1)[0]).bandwidth.value() == doctest::Approx(25e9));
  CHECK(t.route(0, 5).size() > 1);
  int bricks = 0;
  for (int l : t.out_links(t.device_vertex(0)))
    if (t.link(l).kind == LinkKind::NvLink) bricks += static_cast<int>(t.link(l).bandwidth.value() / 25e9 + 0.5);
  CHECK(bricks == 6);
}

TEST_CASE("unknown preset lists names") {
  std::string e = error_of([] { load_cluster_preset("dgx-a10"); });
  CHECK(contains(e, "unknown cluster preset 'dgx-a10'"));
  CHECK(contains(e, "did you mean 'dgx-a100'"));
  CHECK(contains(e, "hal-v100"));
  CHECK(contains(e, "localhost-cpu"));
  e = error_of([] { load_cluster("no-such-cluster.yaml"); });
  CHECK(contains(e, "neither a preset"));
}

TEST_CASE("strict keys: errors name file, line and key path") {
  std::string text = kSmallTemplate;
  text.replace(text.find("    bandwidth: 25 GB/s"), 22, "    bandwith: 25 GB/s");
  std::string e = error_of([&] { from_text(text); });
  CHECK(contains(e, "c.yaml:8:5"));
  CHECK(contains(e, "node.intra.bandwith"));
  CHECK(contains(e, "did you mean 'bandwidth'"));

  text = kSmallTemplate;
  text.replace(text.find("bandwidth: 10 Gb/s"), 18, "bandwidth: 0 Gb/s");
  e = error_of([&] { from_text(text); });
  CHECK(contains(e, "c.yaml:16"));
  CHECK(contains(e, "node.nics.bandwidth"));
  CHECK(contains(e, "must be > 0"));

  text = kSmallTemplate;
  text.replace(text.find("  max_nodes: 4"), 13, "  max_nodes: -1");
  CHECK(contains(error_of([&] { from_text(text); }), "network.max_nodes"));

  text = kSmallTemplate;
  text.replace(text.find("    layout: all-to-all"), 22, "    layout: mesh");
  e = error_of([&] { from_text(text); });
  CHECK(contains(e, "unknown layout 'mesh'"));
  CHECK(contains(e, "hybrid-cube-mesh"));

  text = kSmallTemplate;
  text.replace(text.find("    latency: 5 us\n"), 18, "");
  e = error_of([&] { from_text(text); });
  CHECK(contains(e, "node.nics.latency"));
  CHECK(contains(e, "missing required key"));

  text = std::string(kSmallTemplate) + "colour: blue\n";
  CHECK(contains(error_of([&] { from_text(text); }), "unknown key 'colour'"));

  CHECK(contains(error_of([] { from_text("name: x\n"); }), "needs either 'node'"));
  e = error_of([] { from_text("name: x\nnode: {device: v100-sxm2-16gb, devices: 2}\nnetwork: {kind: none}\n"); });
  CHECK(contains(e, "not connected"));
}

TEST_CASE("template build and overrides") {
  ClusterSpec spec = from_text(kSmallTemplate);
  CHECK(spec.file == "c.yaml");
  CHECK(spec.nodes_for(3) == 2);
  Topology t = build_topology(spec, 3);
  CHECK(t.num_devices() == 4);  // whole nodes
  CHECK(t.route(0, 2).size() == 6);
  CHECK(t.route_bandwidth(0, 2).value() == doctest::Approx(1.25e9));  // 10 Gb/s, efficiency 1
  CHECK(t.route_latency(0, 2) == Time::us(1 + 1 + 5 + 5 + 1 + 1));
  CHECK(contains(error_of([&] { build_topology(spec, 9); }), "holds at most 4 nodes"));
  CHECK(contains(error_of([&] { build_topology(spec, 0); }), "at least 1 device"));

  spec.inter_node_bandwidth = gbit_per_s(100);
  spec.inter_node_latency = Time::us(2);
  spec.device_override = *find_device_spec("a100-sxm4-40gb");
  Topology o = build_topology(spec, 4);
  CHECK(o.route_bandwidth(0, 2).value() == doctest::Approx(12.5e9));
  CHECK(o.route_latency(0, 2) == Time::us(1 + 1 + 1 + 1 + 1 + 1));
  CHECK(o.device_spec(3).name == "a100-sxm4-40gb");
  ClusterSpec assigned = from_text(kSmallTemplate);
  assigned.device = *find_device_spec("l4");  // templates: assigning `device` replaces it too
  CHECK(build_topology(assigned, 2).device_spec(1).name == "l4");

  // Fat-tree uplinks scale with the inter-node bandwidth override.
  ClusterSpec eth = load_cluster_preset("eth-100g");
  Topology base = build_topology(eth, 4 * 64);
  eth.inter_node_bandwidth = gbit_per_s(200);
  Topology fast = build_topology(eth, 4 * 64);
  const auto& r = base.route(0, 4 * 40);  // nodes 0 and 40 hang off different leaves
  REQUIRE(r.size() == 8);                  // gpu cpu nic leaf spine leaf nic cpu gpu
  const auto& rf = fast.route(0, 4 * 40);
  REQUIRE(rf.size() == 8);
  CHECK(base.vertex(base.link(r[3]).to).kind == VertexKind::Switch);
  CHECK(fast.link(rf[3]).bandwidth.value() == doctest::Approx(2 * base.link(r[3]).bandwidth.value()));
  CHECK(fast.link(rf[2]).bandwidth.value() == doctest::Approx(25e9));
}

TEST_CASE("build_topology: concurrent builds of one spec; spec without a parsed model") {
  ClusterSpec spec = load_cluster_preset("dgx-a100");
  std::vector<int> links(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] { links[k] = build_topology(spec, 8 * (k + 1)).num_links(); });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) CHECK(links[k] == build_topology(spec, 8 * (k + 1)).num_links());
  spec.model = nullptr;  // falls back to the YAML source
  CHECK(build_topology(spec, 16).num_devices() == 16);
}

TEST_CASE("explicit graph form") {
  const char* text = R"(name: explicit
device: v100-sxm2-16gb
vertices:
  - {name: b.gpu, kind: device, host: 1}
  - {name: a.gpu0, kind: device, host: 0}
  - {name: a.gpu1, kind: device, host: 0, device: l4}
  - {name: a.cpu, kind: cpu, host: 0}
  - {name: sw, kind: switch}
links:
  - {between: [a.gpu0, a.gpu1], kind: nvlink, bandwidth: 25 GB/s, links: 2, latency: 1 us, efficiency: 0.8}
  - {between: [a.gpu0, a.cpu], kind: pcie, bandwidth: 16 GB/s, latency: 1 us}
  - {between: [a.gpu1, a.cpu], kind: pcie, bandwidth: 16 GB/s, latency: 1 us}
  - {between: [a.cpu, sw], kind: ethernet, bandwidth: 10 Gb/s, reverse_bandwidth: 5 Gb/s, latency: 5 us}
  - {between: [b.gpu, sw], kind: ethernet, bandwidth: 10 Gb/s, latency: 5 us}
)";
  ClusterSpec spec = from_text(text);
  CHECK(spec.max_nodes == 2);
  CHECK(spec.explicit_devices == 3);
  Topology t = build_topology(spec, 2);
  CHECK(t.num_devices() == 3);
  CHECK(t.vertex(t.device_vertex(0)).name == "a.gpu0");  // host order
  CHECK(t.vertex(t.device_vertex(2)).name == "b.gpu");
  CHECK(t.device_spec(1).name == "l4");
  CHECK(t.route_bandwidth(0, 1).value() == doctest::Approx(40e9));
  CHECK(t.route(0, 2).size() == 3);
  CHECK(t.route_bandwidth(2, 0).value() == doctest::Approx(0.625e9));  // reverse direction: 5 Gb/s
  CHECK(contains(error_of([&] { build_topology(spec, 4); }), "has 3 devices"));

  std::string bad = text;
  bad.replace(bad.find("[b.gpu, sw]"), 11, "[b.gpu, sx]");
  std::string e = error_of([&] { from_text(bad); });
  CHECK(contains(e, "unknown vertex 'sx'"));
  CHECK(contains(e, "c.yaml:14"));
  bad = text;
  bad.replace(bad.find("  - {between: [b.gpu, sw]"), 200, "");
  CHECK(contains(error_of([&] { from_text(bad); }), "cannot reach"));
}

TEST_CASE("route performance smoke: 4,096-GPU dgx-a100, ring neighbours") {
  using Clock = std::chrono::steady_clock;
  ClusterSpec spec = load_cluster_preset("dgx-a100");
  auto t0 = Clock::now();
  Topology t = build_topology(spec, 4096);
  auto t1 = Clock::now();
  REQUIRE(t.num_devices() == 4096);
  size_t hops = 0;
  for (int r = 0; r < 4096; ++r) {
    int next = (r + 1) % 4096;
    const auto& route = t.route(r, next);
    hops += route.size();
    REQUIRE(!route.empty());
    REQUIRE(t.link(route.front()).from == t.device_vertex(r));
    REQUIRE(t.link(route.back()).to == t.device_vertex(next));
  }
  auto t2 = Clock::now();
  // Reverse neighbours too (ring in the other direction): ~8,000 distinct pairs in all.
  for (int r = 0; r < 4096; ++r) hops += t.route((r + 1) % 4096, r).size();
  auto t3 = Clock::now();
  for (int r = 0; r < 4096; ++r) hops += t.route(r, (r + 1) % 4096).size();  // cached
  auto t4 = Clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("[route perf] dgx-a100 4096 GPUs: %d vertices, %d links; build %.1f ms; 4096 ring routes %.1f ms; "
              "4096 reverse routes %.1f ms; 4096 cached lookups %.2f ms (total hops %zu)\n",
              t.num_vertices(), t.num_links(), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4), hops);
  CHECK(hops > 0);
}
