// topology/cluster.hpp — cluster descriptions in YAML and the shipped presets.
//
// A cluster file (and every preset) is either
//   * a node template plus a network: `node:` (device type, devices per node,
//     intra-node fabric: nvlink pairs / all-to-all / hybrid cube mesh / nvswitch /
//     pcie / shared memory, host CPUs, NICs) and `network:` (single switch,
//     two-level fat-tree with oversubscription, none) — expanded for as many
//     nodes as a job needs; or
//   * an explicit graph: `vertices:` and `links:` lists.
// Every figure carries its unit ("100 Gb/s", "1.5 us", "16 GiB"). The full
// format, with an example and the presets' figures and sources, is in
// topology/README.md.
//
// Presets (topology/presets/*.yaml, embedded in the binary): hal-v100 (the
// paper's cluster), dgx1-v100, dgx-a100, dgx-h100, hgx-h200, pcie-8gpu,
// eth-10g, eth-25g, eth-100g (Ethernet clusters; fat-tree when many nodes),
// localhost-cpu (N CPU ranks sharing memory on one host).
//
// Thread-safety: pure functions; build_topology may run concurrently on one spec.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/yaml_reader.hpp"
#include "topology/topology.hpp"

namespace dptwin::topology {

namespace detail {
struct ClusterModel;  // typed form of the document (cluster_model.hpp, internal)
}

// A parsed, validated cluster description (not yet expanded).
struct ClusterSpec {
  std::string name;
  std::string description;
  int devices_per_node = 1;            // for templates; explicit graphs: devices / hosts
  std::optional<int> max_nodes;        // explicit graphs and fixed clusters have a maximum
  DeviceSpec device;                   // device type of the template (explicit: of device 0);
                                       // templates: build_topology uses it, so assigning it
                                       // replaces the device (explicit graphs: use device_override)
  YAML::Node source;                   // the validated document (kept for building)
  std::string file;                    // file name used in messages
  // Overrides applied when building (what-if fields of scenarios): scale
  // inter-node link bandwidth, replace the device type, set node count.
  std::optional<Bandwidth> inter_node_bandwidth;  // replaces the NIC port speed (NIC<->switch links);
                                                 // fat-tree uplinks scale by the same ratio
  std::optional<Time> inter_node_latency;        // NIC-to-NIC one-way latency under one switch
                                                 // (each NIC<->switch hop gets half)
  std::optional<DeviceSpec> device_override;     // replaces the spec of every device
  int explicit_devices = 0;                      // explicit graphs: devices in the graph (0 for templates)
  // The validated document in typed form, shared by copies; build_topology
  // uses it (no YAML access, so concurrent builds are safe). When null,
  // build_topology parses `source` again.
  std::shared_ptr<const detail::ClusterModel> model;

  // Nodes a job of `devices` devices occupies: ceil(devices / devices_per_node).
  int nodes_for(int devices) const;
  // Largest job the cluster holds: max_nodes x devices_per_node; -1 when unbounded.
  int max_devices() const;
};

// Parses and validates a cluster document (errors name file, line and key).
ClusterSpec parse_cluster(const YamlNode& node);
// A preset by name (InputError listing the presets when unknown).
ClusterSpec load_cluster_preset(const std::string& name);
// A preset name or a path to a YAML file.
ClusterSpec load_cluster(const std::string& name_or_path);
std::vector<std::string> cluster_preset_names();
std::string cluster_preset_text(const std::string& name);  // YAML text of a preset

// Expands the description into a graph holding at least `num_devices` devices
// (nodes = ceil(num_devices / devices_per_node)). Throws InputError when the
// cluster cannot hold that many.
Topology build_topology(const ClusterSpec& spec, int num_devices);

}  // namespace dptwin::topology
