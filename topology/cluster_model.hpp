// topology/cluster_model.hpp — INTERNAL: the typed form of a cluster document.
//
// cluster_parse.cpp turns a YAML cluster description into a ClusterModel
// (validating every key); cluster_build.cpp expands a ClusterModel into a
// Topology. Not included from other modules: use cluster.hpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "topology/device_spec.hpp"
#include "topology/topology.hpp"

namespace dptwin::topology::detail {

// Figures of one physical link (both directions unless noted).
struct LinkSpec {
  LinkKind kind = LinkKind::Other;
  Bandwidth bandwidth;  // per direction, per individual link
  int links = 1;        // parallel links bundled into one edge (bandwidth x links)
  Time latency;
  double efficiency = 1.0;
  Bandwidth total() const { return bandwidth * links; }
};

enum class IntraKind { None, NvLink, NvSwitch, Pcie, SharedMemory };
enum class IntraLayout { AllToAll, Ring, Pairs, HybridCubeMesh, Switch };

struct IntraSpec {
  IntraKind kind = IntraKind::None;
  IntraLayout layout = IntraLayout::Switch;
  LinkSpec link;                     // per device pair (direct layouts) or per device port (switch)
  std::optional<Bandwidth> total_bandwidth;  // shared-memory: bandwidth shared by all devices
};

struct HostSpec {
  int cpus = 0;                       // 0 = no host CPU vertices
  int pcie_switches = 0;              // spread evenly over the CPUs; devices spread evenly over switches
  std::optional<LinkSpec> device_link;  // device <-> its PCIe switch (or CPU when no switches)
  std::optional<LinkSpec> switch_link;  // PCIe switch <-> its CPU
  std::optional<LinkSpec> cpu_link;     // CPU socket <-> CPU socket (all pairs)
};

enum class AttachKind { Cpu, PcieSwitch, Device, List };

struct NicSpec {
  int count = 0;
  LinkKind kind = LinkKind::InfiniBand;
  Bandwidth bandwidth;          // port speed, per direction
  Time latency;                 // one way, NIC <-> first switch
  double efficiency = 1.0;
  AttachKind attach = AttachKind::Cpu;
  std::vector<std::string> attach_to;  // AttachKind::List: local names "cpu0", "pcie1", "gpu2"
  std::optional<LinkSpec> attach_link;  // NIC <-> its attachment point (PCIe)
};

enum class NetworkKind { None, Switch, FatTree };

struct NetworkSpec {
  NetworkKind kind = NetworkKind::None;
  int max_nodes = 1;
  // fat-tree
  int nodes_per_leaf = 0;
  int spines = 0;
  double oversubscription = 1.0;
  bool rail_optimized = false;
  std::optional<Bandwidth> uplink_bandwidth;  // per leaf<->spine link; default from oversubscription
  Time uplink_latency;
  std::optional<double> uplink_efficiency;    // default: the NICs' efficiency
};

struct NodeSpec {
  DeviceSpec device;
  int devices = 1;
  bool partial_node = false;  // the last node holds only the devices a job needs
  IntraSpec intra;
  HostSpec host;
  NicSpec nics;
};

struct ExplicitVertex {
  std::string name;
  VertexKind kind = VertexKind::Device;
  int host = -1;
  std::optional<DeviceSpec> device;
};

struct ExplicitLink {
  std::string a, b;
  LinkSpec link;
  std::optional<Bandwidth> reverse_bandwidth;
  bool one_way = false;
};

struct ClusterModel {
  std::string name, description;
  bool is_template = true;
  NodeSpec node;          // template form
  NetworkSpec network;    // template form
  std::vector<ExplicitVertex> vertices;  // explicit form
  std::vector<ExplicitLink> links;       // explicit form
  DeviceSpec default_device;             // explicit form: device of vertices without one
};

ClusterModel parse_cluster_model(const YamlNode& root);
LinkKind parse_link_kind(const YamlNode& n);

// Expands for `nodes` nodes (template) or the whole graph (explicit).
// device_override replaces every device's spec; inter-node overrides apply
// to NIC<->switch links (bandwidth; latency as half the NIC-to-NIC figure) and
// scale uplinks proportionally.
struct BuildOptions {
  int nodes = 1;
  int devices = 1;  // devices the job needs (partial nodes)
  std::optional<DeviceSpec> device_override;
  std::optional<Bandwidth> inter_node_bandwidth;
  std::optional<Time> inter_node_latency;
};
Topology build_from_model(const ClusterModel& m, const BuildOptions& opt);

}  // namespace dptwin::topology::detail
