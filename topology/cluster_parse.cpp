// topology/cluster_parse.cpp — YAML cluster document -> ClusterModel (strict).
#include <fmt/format.h>

#include <set>

#include "topology/cluster_model.hpp"

namespace dptwin::topology::detail {
namespace {

template <typename E>
struct Named {
  const char* name;
  E value;
};

template <typename E, size_t N>
E parse_enum(const YamlNode& n, const Named<E> (&table)[N], const char* what) {
  std::string s = n.as<std::string>();
  std::vector<std::string> names;
  for (const auto& e : table) {
    if (s == e.name) return e.value;
    names.emplace_back(e.name);
  }
  std::string all;
  for (const auto& x : names) all += (all.empty() ? "" : ", ") + x;
  std::string hint = closest_match(s, names);
  n.fail(fmt::format("unknown {} '{}'{} (expected one of: {})", what, s,
                     hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), all));
}

constexpr Named<LinkKind> kLinkKinds[] = {
    {"nvlink", LinkKind::NvLink},          {"pcie", LinkKind::Pcie},
    {"cpu-interconnect", LinkKind::CpuInterconnect}, {"infiniband", LinkKind::InfiniBand},
    {"ethernet", LinkKind::Ethernet},      {"shared-memory", LinkKind::SharedMemory},
    {"other", LinkKind::Other},
};
constexpr Named<IntraKind> kIntraKinds[] = {
    {"nvlink", IntraKind::NvLink}, {"nvswitch", IntraKind::NvSwitch},
    {"pcie", IntraKind::Pcie},     {"shared-memory", IntraKind::SharedMemory},
};
constexpr Named<IntraLayout> kLayouts[] = {
    {"all-to-all", IntraLayout::AllToAll}, {"ring", IntraLayout::Ring},
    {"pairs", IntraLayout::Pairs},         {"hybrid-cube-mesh", IntraLayout::HybridCubeMesh},
    {"switch", IntraLayout::Switch},
};
constexpr Named<NetworkKind> kNetworkKinds[] = {
    {"none", NetworkKind::None}, {"switch", NetworkKind::Switch}, {"fat-tree", NetworkKind::FatTree}};
constexpr Named<VertexKind> kVertexKinds[] = {
    {"device", VertexKind::Device}, {"cpu", VertexKind::HostCpu},  {"pcie-switch", VertexKind::PcieSwitch},
    {"nvswitch", VertexKind::NvSwitch}, {"nic", VertexKind::Nic}, {"switch", VertexKind::Switch},
};

// Sanity limits (far beyond real clusters; keep counts and products inside int).
constexpr int kMaxDevicesPerNode = 1024;
constexpr int kMaxNodes = 65536;
constexpr int kMaxPerNodeParts = 64;      // CPUs, PCIe switches, NICs of one node
constexpr int kMaxLinkMultiplicity = 1024;
constexpr double kMinEfficiency = 0.01;
constexpr double kMaxLinkLatencySeconds = 1.0;

double parse_efficiency(const YamlNode& n) {
  double e = n.as_positive();
  if (e > 1) n.fail(fmt::format("efficiency is a fraction of the datasheet bandwidth and must be in (0, 1], got {}", e));
  if (e < kMinEfficiency) n.fail(fmt::format("efficiency {} is below the supported minimum of {}", e, kMinEfficiency));
  return e;
}

int parse_count(const YamlNode& n, int limit) {
  int v = n.as_positive_int();
  if (v > limit) n.fail(fmt::format("{} is above the supported maximum of {}", v, limit));
  return v;
}

// A one-way hop latency: a duration of at most 1 s (real hops are ns to us).
Time parse_latency(const YamlNode& n) {
  Time t = n.as_time();
  if (t.seconds() > kMaxLinkLatencySeconds)
    n.fail(fmt::format("link latency '{}' is above the supported maximum of 1 s", n.raw().Scalar()));
  return t;
}

// Fields shared by every link description: bandwidth, links, latency, efficiency.
void read_link_fields(const YamlNode& n, LinkSpec& l) {
  l.bandwidth = n.at("bandwidth").as_bandwidth();
  if (auto k = n.find("links")) l.links = parse_count(*k, kMaxLinkMultiplicity);
  l.latency = parse_latency(n.at("latency"));
  if (auto e = n.find("efficiency")) l.efficiency = parse_efficiency(*e);
}

// {kind?, bandwidth, links?, latency, efficiency?}; `kind` defaults to `dflt`.
LinkSpec parse_link(const YamlNode& n, LinkKind dflt) {
  n.check_keys({"kind", "bandwidth", "links", "latency", "efficiency"});
  LinkSpec l;
  l.kind = n.has("kind") ? parse_link_kind(n.at("kind")) : dflt;
  read_link_fields(n, l);
  return l;
}

IntraSpec parse_intra(const YamlNode& n, int devices) {
  if (!n.is_map()) n.fail("expected a mapping with 'kind' (nvlink, nvswitch, pcie, shared-memory)");
  IntraSpec s;
  s.kind = parse_enum(n.at("kind"), kIntraKinds, "intra-node fabric kind");
  switch (s.kind) {
    case IntraKind::Pcie:
      n.check_keys({"kind"});  // traffic goes through the host PCIe tree (node.host)
      break;
    case IntraKind::NvLink:
      n.check_keys({"kind", "layout", "bandwidth", "links", "latency", "efficiency"});
      s.layout = parse_enum(n.at("layout"), kLayouts, "layout");
      if (s.layout == IntraLayout::Switch) n.at("layout").fail("layout 'switch' needs kind 'nvswitch'");
      if (s.layout == IntraLayout::Pairs && devices % 2 != 0)
        n.at("layout").fail(fmt::format("layout 'pairs' needs an even number of devices, node has {}", devices));
      if (s.layout == IntraLayout::HybridCubeMesh && devices != 8)
        n.at("layout").fail(fmt::format("layout 'hybrid-cube-mesh' needs 8 devices, node has {}", devices));
      s.link.kind = LinkKind::NvLink;
      read_link_fields(n, s.link);
      break;
    case IntraKind::NvSwitch:
      n.check_keys({"kind", "layout", "bandwidth", "links", "latency", "efficiency"});
      if (auto l = n.find("layout"); l && parse_enum(*l, kLayouts, "layout") != IntraLayout::Switch)
        l->fail("kind 'nvswitch' only supports layout 'switch'");
      s.layout = IntraLayout::Switch;
      s.link.kind = LinkKind::NvLink;
      read_link_fields(n, s.link);
      break;
    case IntraKind::SharedMemory:
      n.check_keys({"kind", "layout", "bandwidth", "total_bandwidth", "latency", "efficiency"});
      if (auto l = n.find("layout"); l && parse_enum(*l, kLayouts, "layout") != IntraLayout::Switch)
        l->fail("kind 'shared-memory' only supports layout 'switch'");
      s.layout = IntraLayout::Switch;
      s.link.kind = LinkKind::SharedMemory;
      read_link_fields(n, s.link);
      s.total_bandwidth = n.at("total_bandwidth").as_bandwidth();
      break;
    case IntraKind::None: break;
  }
  return s;
}

HostSpec parse_host(const YamlNode& n, int devices) {
  n.check_keys({"cpus", "pcie_switches", "device_link", "switch_link", "cpu_link"});
  HostSpec h;
  h.cpus = parse_count(n.at("cpus"), kMaxPerNodeParts);
  if (auto p = n.find("pcie_switches")) {
    h.pcie_switches = p->as<int>();
    if (h.pcie_switches < 0) p->fail("must be >= 0");
    if (h.pcie_switches > kMaxPerNodeParts)
      p->fail(fmt::format("{} is above the supported maximum of {}", h.pcie_switches, kMaxPerNodeParts));
    if (h.pcie_switches > 0 && h.pcie_switches % h.cpus != 0)
      p->fail(fmt::format("must be a multiple of cpus ({}) so switches spread evenly", h.cpus));
    if (h.pcie_switches > 0 && devices % h.pcie_switches != 0)
      p->fail(fmt::format("devices per node ({}) must be a multiple of pcie_switches", devices));
  }
  if (h.pcie_switches == 0 && devices % h.cpus != 0)
    n.at("cpus").fail(fmt::format("devices per node ({}) must be a multiple of cpus", devices));
  h.device_link = parse_link(n.at("device_link"), LinkKind::Pcie);
  if (h.pcie_switches > 0) h.switch_link = parse_link(n.at("switch_link"), LinkKind::Pcie);
  else if (auto s = n.find("switch_link")) s->fail("switch_link needs pcie_switches > 0");
  if (h.cpus > 1) h.cpu_link = parse_link(n.at("cpu_link"), LinkKind::CpuInterconnect);
  else if (auto s = n.find("cpu_link")) s->fail("cpu_link needs cpus > 1");
  return h;
}

NicSpec parse_nics(const YamlNode& n, const NodeSpec& node) {
  n.check_keys({"count", "kind", "bandwidth", "latency", "efficiency", "attach", "attach_link"});
  NicSpec s;
  s.count = parse_count(n.at("count"), kMaxPerNodeParts);
  auto kind = n.at("kind");
  s.kind = parse_link_kind(kind);
  if (s.kind != LinkKind::InfiniBand && s.kind != LinkKind::Ethernet)
    kind.fail("NIC kind must be 'infiniband' or 'ethernet'");
  s.bandwidth = n.at("bandwidth").as_bandwidth();
  s.latency = parse_latency(n.at("latency"));
  if (auto e = n.find("efficiency")) s.efficiency = parse_efficiency(*e);
  auto at = n.at("attach");
  const std::string dev_prefix = node.device.kind == DeviceKind::Cpu ? "rank" : "gpu";
  if (at.is_sequence()) {
    s.attach = AttachKind::List;
    auto items = at.items();
    if (static_cast<int>(items.size()) != s.count)
      at.fail(fmt::format("attach lists {} targets but count is {}", items.size(), s.count));
    for (const auto& it : items) {
      std::string t = it.as<std::string>();
      auto index_ok = [&](const std::string& prefix, int limit) {
        if (t.rfind(prefix, 0) != 0 || t.size() == prefix.size()) return false;
        try {
          size_t used = 0;
          int k = std::stoi(t.substr(prefix.size()), &used);
          return used == t.size() - prefix.size() && k >= 0 && k < limit;
        } catch (...) {
          return false;
        }
      };
      if (!index_ok("cpu", node.host.cpus) && !index_ok("pcie", node.host.pcie_switches) &&
          !index_ok(dev_prefix, node.devices))
        it.fail(fmt::format("unknown attachment '{}' (expected cpuK, pcieK or {}K naming a vertex of the node: "
                            "{} cpus, {} PCIe switches, {} devices)",
                            t, dev_prefix, node.host.cpus, node.host.pcie_switches, node.devices));
      s.attach_to.push_back(t);
    }
  } else {
    std::string a = at.as<std::string>();
    if (a == "cpu") {
      s.attach = AttachKind::Cpu;
      if (node.host.cpus == 0) at.fail("attach 'cpu' needs node.host with cpus");
    } else if (a == "pcie-switch") {
      s.attach = AttachKind::PcieSwitch;
      if (node.host.pcie_switches == 0) at.fail("attach 'pcie-switch' needs node.host.pcie_switches > 0");
    } else if (a == "device") {
      s.attach = AttachKind::Device;
    } else {
      at.fail(fmt::format("unknown attach '{}' (expected cpu, pcie-switch, device, or a list of local vertex names "
                          "such as [cpu0])",
                          a));
    }
  }
  s.attach_link = parse_link(n.at("attach_link"), LinkKind::Pcie);
  return s;
}

NetworkSpec parse_network(const YamlNode& n) {
  NetworkSpec s;
  s.kind = parse_enum(n.at("kind"), kNetworkKinds, "network kind");
  switch (s.kind) {
    case NetworkKind::None:
      n.check_keys({"kind", "max_nodes"});
      if (auto m = n.find("max_nodes"); m && m->as_positive_int() != 1) m->fail("network 'none' holds one node");
      s.max_nodes = 1;
      break;
    case NetworkKind::Switch:
      n.check_keys({"kind", "max_nodes"});
      s.max_nodes = parse_count(n.at("max_nodes"), kMaxNodes);
      break;
    case NetworkKind::FatTree: {
      n.check_keys({"kind", "max_nodes", "nodes_per_leaf", "spines", "oversubscription", "rail_optimized",
                    "uplink_bandwidth", "uplink_latency", "uplink_efficiency"});
      s.max_nodes = parse_count(n.at("max_nodes"), kMaxNodes);
      s.nodes_per_leaf = parse_count(n.at("nodes_per_leaf"), kMaxNodes);
      s.spines = parse_count(n.at("spines"), kMaxNodes);
      if (auto o = n.find("oversubscription")) {
        s.oversubscription = o->as_positive();
        if (s.oversubscription < 1) o->fail("oversubscription is downlink:uplink bandwidth and must be >= 1");
        if (s.oversubscription > 1000) o->fail("oversubscription above 1000 is not meaningful");
      }
      s.rail_optimized = n.get<bool>("rail_optimized", false);
      if (auto u = n.find("uplink_bandwidth")) s.uplink_bandwidth = u->as_bandwidth();
      s.uplink_latency = parse_latency(n.at("uplink_latency"));
      if (auto e = n.find("uplink_efficiency")) s.uplink_efficiency = parse_efficiency(*e);
      break;
    }
  }
  return s;
}

void parse_template(const YamlNode& root, ClusterModel& m) {
  root.check_keys({"name", "description", "node", "network"});
  auto node = root.at("node");
  node.check_keys({"device", "devices", "partial_node", "intra", "host", "nics"});
  NodeSpec& ns = m.node;
  ns.device = parse_device_spec(node.at("device"));
  ns.devices = parse_count(node.at("devices"), kMaxDevicesPerNode);
  ns.partial_node = node.get<bool>("partial_node", false);
  if (auto i = node.find("intra")) ns.intra = parse_intra(*i, ns.devices);
  if (auto h = node.find("host")) ns.host = parse_host(*h, ns.devices);
  if (ns.intra.kind == IntraKind::Pcie && ns.host.cpus == 0)
    node.at("intra").fail("intra kind 'pcie' routes through node.host, which is missing");
  if (ns.partial_node && (ns.intra.layout == IntraLayout::Pairs || ns.intra.layout == IntraLayout::HybridCubeMesh))
    node.at("partial_node").fail("partial nodes cannot use the 'pairs' or 'hybrid-cube-mesh' layouts");
  m.network = parse_network(root.at("network"));
  if (auto nics = node.find("nics")) {
    ns.nics = parse_nics(*nics, ns);
    if (ns.partial_node && (ns.nics.attach == AttachKind::Device || ns.nics.attach == AttachKind::List))
      node.at("partial_node").fail("partial nodes cannot attach NICs to devices");
    if (m.network.kind == NetworkKind::None) nics->fail("NICs need a network (network.kind is 'none')");
  } else if (m.network.kind != NetworkKind::None) {
    (void)node.at("nics");  // a network needs NICs: "missing required key" at node.nics
  }
  if (ns.intra.kind == IntraKind::None && ns.host.cpus == 0 && ns.devices > 1)
    node.fail("devices of a node are not connected: give 'intra' or 'host'");
}

void parse_explicit(const YamlNode& root, ClusterModel& m) {
  root.check_keys({"name", "description", "device", "vertices", "links"});
  m.is_template = false;
  if (auto d = root.find("device")) m.default_device = parse_device_spec(*d);
  std::set<std::string> names;
  bool need_default = false;
  for (const auto& v : root.at("vertices").items()) {
    v.check_keys({"name", "kind", "host", "device"});
    ExplicitVertex x;
    x.name = v.at("name").as<std::string>();
    if (x.name.empty()) v.at("name").fail("vertex name must not be empty");
    if (!names.insert(x.name).second) v.at("name").fail(fmt::format("vertex name '{}' is used twice", x.name));
    x.kind = parse_enum(v.at("kind"), kVertexKinds, "vertex kind");
    if (x.kind == VertexKind::Switch) {
      if (auto h = v.find("host")) h->fail("network switches belong to no host (omit 'host')");
    } else {
      x.host = v.at("host").as<int>();
      if (x.host < 0) v.at("host").fail("host must be >= 0");
    }
    if (auto d = v.find("device")) {
      if (x.kind != VertexKind::Device) d->fail("only vertices of kind 'device' take a device spec");
      x.device = parse_device_spec(*d);
    } else if (x.kind == VertexKind::Device) {
      need_default = true;
    }
    m.vertices.push_back(std::move(x));
  }
  if (need_default && !root.has("device"))
    root.fail("missing required key 'device' (the device type of vertices that do not give one)");
  if (m.default_device.name.empty())
    for (const auto& x : m.vertices)
      if (x.device) {
        m.default_device = *x.device;
        break;
      }
  for (const auto& l : root.at("links").items()) {
    l.check_keys({"between", "kind", "bandwidth", "reverse_bandwidth", "links", "latency", "efficiency", "one_way"});
    ExplicitLink x;
    auto ends = l.at("between");
    auto items = ends.items();
    if (items.size() != 2) ends.fail("expected two vertex names: [a, b]");
    x.a = items[0].as<std::string>();
    x.b = items[1].as<std::string>();
    for (size_t i = 0; i < 2; ++i)
      if (!names.count(items[i].as<std::string>())) {
        std::vector<std::string> all(names.begin(), names.end());
        std::string hint = closest_match(items[i].as<std::string>(), all);
        items[i].fail(fmt::format("unknown vertex '{}'{}", items[i].as<std::string>(),
                                  hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
      }
    if (x.a == x.b) ends.fail("a link needs two distinct vertices");
    x.link.kind = parse_link_kind(l.at("kind"));
    read_link_fields(l, x.link);
    x.one_way = l.get<bool>("one_way", false);
    if (auto r = l.find("reverse_bandwidth")) {
      if (x.one_way) r->fail("a one-way link has no reverse direction");
      x.reverse_bandwidth = r->as_bandwidth();
    }
    m.links.push_back(std::move(x));
  }
}

}  // namespace

LinkKind parse_link_kind(const YamlNode& n) { return parse_enum(n, kLinkKinds, "link kind"); }

ClusterModel parse_cluster_model(const YamlNode& root) {
  if (!root.is_map()) root.fail("a cluster description must be a mapping with 'node'/'network' or 'vertices'/'links'");
  ClusterModel m;
  m.name = root.at("name").as<std::string>();
  if (m.name.empty()) root.at("name").fail("name must not be empty");
  if (auto d = root.find("description")) m.description = d->as<std::string>();
  if (root.has("node") || root.has("network")) {
    parse_template(root, m);
  } else if (root.has("vertices") || root.has("links")) {
    parse_explicit(root, m);
  } else {
    root.fail("a cluster description needs either 'node' and 'network' (template) or 'vertices' and 'links' "
              "(explicit graph)");
  }
  return m;
}

}  // namespace dptwin::topology::detail
