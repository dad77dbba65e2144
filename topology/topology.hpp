// topology/topology.hpp — the cluster as a graph.
//
// Vertices are compute devices (GPUs or CPU ranks), host CPUs, PCIe switches,
// NVSwitches, NICs and network switches. A physical link is two directed edges
// (one per direction), each with its own bandwidth and latency, stored in a
// Boost.Graph adjacency_list. Routes between devices come from graph search
// (fewest hops, then lowest latency; equal-cost paths are spread
// deterministically by a hash of the endpoints, like ECMP) and are cached.
//
// Routing rules: a route never passes *through* a device (GPUs and CPU ranks do
// not forward traffic), and never through a vertex of a host other than the
// source's or the destination's (servers do not forward traffic for others);
// network switches (host -1) may be crossed freely.
//
// Devices are numbered 0..num_devices()-1 in host order (host 0's devices
// first), which is the rank order a job uses: a job of n devices uses devices 0..n-1.
//
// Thread-safety: after finalize(), all const methods may be called from several
// threads (the route cache is internally synchronised).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "topology/device_spec.hpp"

namespace dptwin::topology {

enum class VertexKind { Device, HostCpu, PcieSwitch, NvSwitch, Nic, Switch };

enum class LinkKind { NvLink, Pcie, CpuInterconnect, InfiniBand, Ethernet, SharedMemory, Other };

struct Vertex {
  std::string name;       // unique, e.g. "n3.gpu2", "n3.cpu0", "leaf7"
  VertexKind kind = VertexKind::Device;
  int host = -1;          // node index for vertices inside a node, -1 for network switches
  int device = -1;        // device index for VertexKind::Device, else -1
  // Routing preference among equal-hop paths (-1 = none). A device's affinity
  // names the local NIC it prefers (NIC affinity = its local index); a spine's
  // affinity is its index, preferred by traffic to nodes with host % spines ==
  // index (destination-mod-k routing, as InfiniBand fat-trees route).
  int affinity = -1;
};

// One direction of a physical link.
struct Link {
  std::string name;       // e.g. "n0.gpu0->n0.gpu1"
  LinkKind kind = LinkKind::Other;
  int from = -1, to = -1; // vertex indices
  Bandwidth bandwidth;    // bytes/s in this direction (datasheet)
  double efficiency = 1;  // achievable fraction of `bandwidth` for bulk transfers (protocol overhead)
  Time latency;           // one-way latency of this hop
  Bandwidth effective_bandwidth() const { return bandwidth * efficiency; }
};

std::string to_string(VertexKind k);
std::string to_string(LinkKind k);

class Topology {
 public:
  Topology();
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&) = delete;

  std::string name;

  // --- construction (before finalize) ---
  int add_vertex(Vertex v);  // returns vertex index; REQUIRES unique name
  // Adds both directions; returns the id of the a->b link (b->a is that id + 1).
  int add_link(int a, int b, LinkKind kind, Bandwidth bw, Time latency, double efficiency = 1.0);
  // Asymmetric variant.
  int add_link(int a, int b, LinkKind kind, Bandwidth bw_ab, Bandwidth bw_ba, Time latency, double efficiency = 1.0);
  // One direction only (a -> b); returns its id. For host-internal buses such as
  // a shared-memory segment (write side -> shared total -> read side); links
  // between network switches are expected to be two-way.
  int add_one_way_link(int a, int b, LinkKind kind, Bandwidth bw, Time latency, double efficiency = 1.0);
  void set_device_spec(int device, DeviceSpec spec);
  void set_affinity(int vertex, int affinity);  // see Vertex::affinity; before finalize()  // REQUIRES: device vertex exists
  // Validates (connected; every device reaches every other; positive figures)
  // and builds indices. Throws InputError (file/key empty) describing the problem.
  void finalize();

  // --- queries ---
  int num_vertices() const;
  int num_links() const;
  int num_devices() const;
  int num_hosts() const;
  const Vertex& vertex(int v) const;
  const Link& link(int id) const;
  int device_vertex(int device) const;
  int host_of(int device) const;
  const std::vector<int>& devices_on_host(int host) const;
  const DeviceSpec& device_spec(int device) const;
  int find_vertex(const std::string& name) const;  // vertex index, or -1 when absent
  // Links leaving / entering a vertex (directed link ids), in insertion order.
  std::vector<int> out_links(int v) const;
  // Directed link ids from src to dst device (empty when src == dst). Cached.
  const std::vector<int>& route(int src_device, int dst_device) const;
  // Sum of latencies and the minimum effective bandwidth along route(src, dst).
  // For src == dst: zero latency and the device's memory bandwidth (a local copy).
  Time route_latency(int src_device, int dst_device) const;
  Bandwidth route_bandwidth(int src_device, int dst_device) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dptwin::topology
