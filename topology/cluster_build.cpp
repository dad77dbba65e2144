// topology/cluster_build.cpp — ClusterModel -> Topology (node template
// expansion, fat-tree construction, explicit graphs).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "topology/cluster_model.hpp"

namespace dptwin::topology::detail {
namespace {

// NVLink brick counts of the DGX-1 (V100) hybrid cube-mesh, from `nvidia-smi
// topo -m` on a DGX-1V (NV1 / NV2 entries); each GPU has 6 bricks in total.
constexpr int kCubeMesh[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1}, {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};

struct NodeVertices {
  std::vector<int> devices, cpus, pcie, nics;
};

class Builder {
 public:
  Builder(const ClusterModel& m, const BuildOptions& opt) : m_(m), opt_(opt) {
    topo_.name = m.name;
    nic_ = m.node.nics;
    if (opt.inter_node_bandwidth) nic_.bandwidth = *opt.inter_node_bandwidth;
    if (opt.inter_node_latency) nic_.latency = opt.inter_node_latency->scaled(0.5);
  }

  Topology build_template() {
    const NodeSpec& ns = m_.node;
    std::vector<NodeVertices> nodes;
    for (int h = 0; h < opt_.nodes; ++h) {
      int count = ns.devices;
      if (ns.partial_node) count = std::min(ns.devices, opt_.devices - h * ns.devices);
      nodes.push_back(add_node(h, count));
    }
    add_network(nodes);
    topo_.finalize();
    return std::move(topo_);
  }

  Topology build_explicit() {
    // Devices are numbered in host order, then file order.
    std::vector<size_t> order(m_.vertices.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      bool da = m_.vertices[a].kind == VertexKind::Device, db = m_.vertices[b].kind == VertexKind::Device;
      if (da != db) return da;  // devices first
      return da && m_.vertices[a].host < m_.vertices[b].host;
    });
    std::unordered_map<std::string, int> ids;
    for (size_t i : order) {
      const auto& x = m_.vertices[i];
      Vertex v{x.name, x.kind, x.host, -1};
      int id = topo_.add_vertex(v);
      ids[x.name] = id;
      if (x.kind == VertexKind::Device)
        topo_.set_device_spec(topo_.vertex(id).device, opt_.device_override ? *opt_.device_override
                                                        : x.device            ? *x.device
                                                                              : m_.default_device);
    }
    for (const auto& l : m_.links) {
      const int a = ids.at(l.a), b = ids.at(l.b);
      const Bandwidth bw = l.link.total();
      if (l.one_way) {
        topo_.add_one_way_link(a, b, l.link.kind, bw, l.link.latency, l.link.efficiency);
      } else {
        const Bandwidth rev = l.reverse_bandwidth ? *l.reverse_bandwidth * l.link.links : bw;
        topo_.add_link(a, b, l.link.kind, bw, rev, l.link.latency, l.link.efficiency);
      }
    }
    topo_.finalize();
    return std::move(topo_);
  }

 private:
  int vertex(int host, const std::string& local, VertexKind kind) {
    return topo_.add_vertex(Vertex{fmt::format("n{}.{}", host, local), kind, host, -1});
  }
  void link(int a, int b, const LinkSpec& l) { topo_.add_link(a, b, l.kind, l.total(), l.latency, l.efficiency); }

  NodeVertices add_node(int h, int count) {
    const NodeSpec& ns = m_.node;
    const DeviceSpec& spec = opt_.device_override ? *opt_.device_override : ns.device;
    const char* prefix = spec.kind == DeviceKind::Cpu ? "rank" : "gpu";
    NodeVertices nv;
    for (int k = 0; k < count; ++k) {
      int v = vertex(h, fmt::format("{}{}", prefix, k), VertexKind::Device);
      topo_.set_device_spec(topo_.vertex(v).device, spec);
      nv.devices.push_back(v);
    }
    add_intra(h, nv.devices);
    add_host(h, nv);
    add_nics(h, nv);
    return nv;
  }

  void add_intra(int h, const std::vector<int>& dev) {
    const IntraSpec& in = m_.node.intra;
    const int n = static_cast<int>(dev.size());
    const LinkSpec& l = in.link;
    switch (in.kind) {
      case IntraKind::None:
      case IntraKind::Pcie: return;
      case IntraKind::NvLink:
        for (int i = 0; i < n; ++i)
          for (int j = i + 1; j < n; ++j) {
            int mult = 0;
            switch (in.layout) {
              case IntraLayout::AllToAll: mult = 1; break;
              case IntraLayout::Ring: mult = (j == i + 1 || (i == 0 && j == n - 1)) ? 1 : 0; break;
              case IntraLayout::Pairs: mult = (i % 2 == 0 && j == i + 1) ? 1 : 0; break;
              case IntraLayout::HybridCubeMesh: mult = kCubeMesh[i][j]; break;
              case IntraLayout::Switch: break;
            }
            if (mult > 0)
              topo_.add_link(dev[i], dev[j], l.kind, l.total() * mult, l.latency, l.efficiency);
          }
        return;
      case IntraKind::NvSwitch: {
        int sw = vertex(h, "nvswitch", VertexKind::NvSwitch);
        for (int d : dev) link(d, sw, l);
        return;
      }
      case IntraKind::SharedMemory: {
        // Writer -> shared segment -> reader, one-way, so every copy crosses the
        // shared total; the latency is split over the two per-rank hops.
        int win = vertex(h, "shm.in", VertexKind::HostCpu);
        int wout = vertex(h, "shm.out", VertexKind::HostCpu);
        const Time half = l.latency.scaled(0.5);
        topo_.add_one_way_link(win, wout, l.kind, *in.total_bandwidth, Time::zero(), l.efficiency);
        for (int d : dev) {
          topo_.add_one_way_link(d, win, l.kind, l.total(), half, l.efficiency);
          topo_.add_one_way_link(wout, d, l.kind, l.total(), l.latency - half, l.efficiency);
        }
        return;
      }
    }
  }

  void add_host(int h, NodeVertices& nv) {
    const HostSpec& hs = m_.node.host;
    if (hs.cpus == 0) return;
    for (int c = 0; c < hs.cpus; ++c) nv.cpus.push_back(vertex(h, fmt::format("cpu{}", c), VertexKind::HostCpu));
    for (int a = 0; a < hs.cpus; ++a)
      for (int b = a + 1; b < hs.cpus; ++b) link(nv.cpus[a], nv.cpus[b], *hs.cpu_link);
    for (int k = 0; k < hs.pcie_switches; ++k) {
      nv.pcie.push_back(vertex(h, fmt::format("pcie{}", k), VertexKind::PcieSwitch));
      link(nv.pcie[k], nv.cpus[k * hs.cpus / hs.pcie_switches], *hs.switch_link);
    }
    const int per_node = m_.node.devices;  // spread by the full node, also for partial nodes
    for (size_t i = 0; i < nv.devices.size(); ++i) {
      int up = hs.pcie_switches > 0 ? nv.pcie[static_cast<int>(i) * hs.pcie_switches / per_node]
                                    : nv.cpus[static_cast<int>(i) * hs.cpus / per_node];
      link(nv.devices[i], up, *hs.device_link);
    }
  }

  int local_vertex(const NodeVertices& nv, const std::string& local) {
    auto index = [&](const char* prefix) { return std::stoi(local.substr(std::string(prefix).size())); };
    if (local.rfind("cpu", 0) == 0) return nv.cpus.at(index("cpu"));
    if (local.rfind("pcie", 0) == 0) return nv.pcie.at(index("pcie"));
    if (local.rfind("rank", 0) == 0) return nv.devices.at(index("rank"));
    return nv.devices.at(index("gpu"));
  }

  void add_nics(int h, NodeVertices& nv) {
    const NicSpec& ns = m_.node.nics;
    for (int i = 0; i < ns.count; ++i) {
      int nic = vertex(h, fmt::format("nic{}", i), VertexKind::Nic);
      nv.nics.push_back(nic);
      // Each device prefers the NIC nearest in local index (GPU g -> NIC g on DGX
      // A100; GPUs 2i and 2i+1 -> NIC i on DGX-1), as NCCL's topology search does.
      topo_.set_affinity(nic, i);
      for (size_t d = 0; d < nv.devices.size(); ++d)
        topo_.set_affinity(nv.devices[d], static_cast<int>(d) * ns.count / static_cast<int>(nv.devices.size()));
      int to = -1;
      switch (ns.attach) {
        case AttachKind::Cpu: to = nv.cpus[i * static_cast<int>(nv.cpus.size()) / ns.count]; break;
        case AttachKind::PcieSwitch: to = nv.pcie[i * static_cast<int>(nv.pcie.size()) / ns.count]; break;
        case AttachKind::Device: to = nv.devices[i * static_cast<int>(nv.devices.size()) / ns.count]; break;
        case AttachKind::List: to = local_vertex(nv, ns.attach_to[i]); break;
      }
      link(nic, to, *ns.attach_link);
    }
  }

  void add_network(const std::vector<NodeVertices>& nodes) {
    const NetworkSpec& net = m_.network;
    const LinkSpec nic_link{nic_.kind, nic_.bandwidth, 1, nic_.latency, nic_.efficiency};
    if (net.kind == NetworkKind::None) return;
    if (net.kind == NetworkKind::Switch) {
      int sw = topo_.add_vertex(Vertex{"switch0", VertexKind::Switch, -1, -1});
      for (const auto& n : nodes)
        for (int nic : n.nics) link(nic, sw, nic_link);
      return;
    }
    // Two-level fat-tree: nodes are grouped by `nodes_per_leaf`; a group has
    // one leaf (all NICs of a node on it) or, rail-optimised, one leaf per NIC
    // index. Every leaf connects to every spine when there is more than one leaf.
    const int nodes_n = static_cast<int>(nodes.size());
    const int groups = (nodes_n + net.nodes_per_leaf - 1) / net.nodes_per_leaf;
    const int rails = net.rail_optimized ? nic_.count : 1;
    std::vector<int> leaves;
    for (int k = 0; k < groups * rails; ++k)
      leaves.push_back(topo_.add_vertex(Vertex{fmt::format("leaf{}", k), VertexKind::Switch, -1, -1}));
    for (int h = 0; h < nodes_n; ++h)
      for (int i = 0; i < static_cast<int>(nodes[h].nics.size()); ++i)
        link(nodes[h].nics[i], leaves[(h / net.nodes_per_leaf) * rails + (net.rail_optimized ? i : 0)], nic_link);
    if (leaves.size() < 2) return;
    // Leaf downlink capacity / oversubscription, split over the spines; an
    // explicit uplink bandwidth scales with an inter-node bandwidth override.
    const double nic_ports = static_cast<double>(net.nodes_per_leaf) * (net.rail_optimized ? 1 : nic_.count);
    Bandwidth up = net.uplink_bandwidth ? *net.uplink_bandwidth * (nic_.bandwidth / m_.node.nics.bandwidth)
                                        : nic_.bandwidth * (nic_ports / (net.oversubscription * net.spines));
    const LinkSpec up_link{nic_.kind, up, 1, net.uplink_latency, net.uplink_efficiency.value_or(nic_.efficiency)};
    for (int s = 0; s < net.spines; ++s) {
      int spine = topo_.add_vertex(Vertex{fmt::format("spine{}", s), VertexKind::Switch, -1, -1});
      topo_.set_affinity(spine, s);  // destination-mod-k up-routing
      for (int leaf : leaves) link(leaf, spine, up_link);
    }
  }

  const ClusterModel& m_;
  const BuildOptions& opt_;
  NicSpec nic_;  // NIC figures after overrides
  Topology topo_;
};

}  // namespace

Topology build_from_model(const ClusterModel& m, const BuildOptions& opt) {
  Builder b(m, opt);
  return m.is_template ? b.build_template() : b.build_explicit();
}

}  // namespace dptwin::topology::detail
