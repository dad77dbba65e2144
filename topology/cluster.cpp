#include "topology/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "topology/cluster_model.hpp"

namespace dptwin::topology {

// Generated at build time by tools/embed_files.py from topology/presets/*.yaml.
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_presets();

namespace {

std::string preset_list() {
  std::string out;
  for (const auto& n : cluster_preset_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

int ClusterSpec::nodes_for(int devices) const {
  if (devices <= 0) return 0;
  return (devices + devices_per_node - 1) / devices_per_node;
}

int ClusterSpec::max_devices() const {
  return max_nodes ? *max_nodes * devices_per_node : -1;
}

ClusterSpec parse_cluster(const YamlNode& node) {
  auto model = std::make_shared<detail::ClusterModel>(detail::parse_cluster_model(node));
  const detail::ClusterModel& m = *model;
  ClusterSpec spec;
  spec.model = model;
  spec.name = m.name;
  spec.description = m.description;
  spec.source = node.raw();
  spec.file = node.file();
  if (m.is_template) {
    spec.devices_per_node = m.node.devices;
    spec.max_nodes = m.network.max_nodes;
    spec.device = m.node.device;
  } else {
    // The whole graph is one fixed cluster: check it now so errors surface at load time.
    Topology t = detail::build_from_model(m, {});
    spec.devices_per_node = (t.num_devices() + t.num_hosts() - 1) / std::max(1, t.num_hosts());
    spec.max_nodes = t.num_hosts();
    spec.device = t.device_spec(0);
    spec.explicit_devices = t.num_devices();
  }
  return spec;
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : embedded_presets()) names.emplace_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string cluster_preset_text(const std::string& name) {
  for (const auto& [n, text] : embedded_presets())
    if (n == name) return std::string(text);
  std::string hint = closest_match(name, cluster_preset_names());
  throw InputError({}, "", fmt::format("unknown cluster preset '{}'{} (presets: {})", name,
                                       hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), preset_list()));
}

ClusterSpec load_cluster_preset(const std::string& name) {
  std::string text = cluster_preset_text(name);
  return parse_cluster(load_yaml_string(text, fmt::format("presets/{}.yaml", name)));
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  for (const auto& [n, text] : embedded_presets())
    if (n == name_or_path) return load_cluster_preset(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return parse_cluster(load_yaml_file(name_or_path));
  std::string hint = closest_match(name_or_path, cluster_preset_names());
  throw InputError({}, "", fmt::format("cluster '{}' is neither a preset{} nor a readable file (presets: {})",
                                       name_or_path, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                       preset_list()));
}

Topology build_topology(const ClusterSpec& spec, int num_devices) {
  const std::string where = spec.file.empty() ? spec.name : spec.file;
  if (num_devices < 1)
    throw InputError({where, 0, 0}, "", fmt::format("cluster '{}': a job needs at least 1 device, got {}", spec.name,
                                                    num_devices));
  std::shared_ptr<const detail::ClusterModel> model = spec.model;
  if (!model) {
    YamlNode root(spec.source, std::make_shared<const std::string>(spec.file), "");
    model = std::make_shared<detail::ClusterModel>(detail::parse_cluster_model(root));
  }
  const detail::ClusterModel& m = *model;
  detail::BuildOptions opt;
  opt.devices = num_devices;
  opt.device_override = spec.device_override;
  opt.inter_node_bandwidth = spec.inter_node_bandwidth;
  opt.inter_node_latency = spec.inter_node_latency;
  if (m.is_template) {
    // `spec.device` is live for templates: assigning it replaces the device type.
    if (!opt.device_override) opt.device_override = spec.device;
    opt.nodes = std::max(1, (num_devices + m.node.devices - 1) / m.node.devices);
    if (opt.nodes > m.network.max_nodes)
      throw InputError({where, 0, 0}, "",
                       fmt::format("cluster '{}' holds at most {} nodes x {} devices = {} devices; {} devices need {} "
                                   "nodes",
                                   spec.name, m.network.max_nodes, m.node.devices,
                                   m.network.max_nodes * m.node.devices, num_devices, opt.nodes));
  }
  Topology t = detail::build_from_model(m, opt);
  if (t.num_devices() < num_devices)
    throw InputError({where, 0, 0}, "", fmt::format("cluster '{}' has {} devices; the job needs {}", spec.name,
                                                    t.num_devices(), num_devices));
  return t;
}

}  // namespace dptwin::topology
