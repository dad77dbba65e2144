#include "topology/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"

namespace dptwin::topology {

std::string to_string(VertexKind k) {
  switch (k) {
    case VertexKind::Device: return "device";
    case VertexKind::HostCpu: return "cpu";
    case VertexKind::PcieSwitch: return "pcie-switch";
    case VertexKind::NvSwitch: return "nvswitch";
    case VertexKind::Nic: return "nic";
    case VertexKind::Switch: return "switch";
  }
  return "?";
}

std::string to_string(LinkKind k) {
  switch (k) {
    case LinkKind::NvLink: return "nvlink";
    case LinkKind::Pcie: return "pcie";
    case LinkKind::CpuInterconnect: return "cpu-interconnect";
    case LinkKind::InfiniBand: return "infiniband";
    case LinkKind::Ethernet: return "ethernet";
    case LinkKind::SharedMemory: return "shared-memory";
    case LinkKind::Other: return "other";
  }
  return "?";
}

namespace {

// Directed graph: one edge per direction, the edge bundle is the link id.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, int>;

[[noreturn]] void topo_error(const std::string& topo, const std::string& msg) {
  throw InputError({}, "", topo.empty() ? msg : fmt::format("topology '{}': {}", topo, msg));
}

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Route cost: fewest hops first, then lowest latency.
struct Cost {
  int hops = 0;
  int mismatch = 0;  // hops against the routing preference (Vertex::affinity)
  int64_t latency_ns = 0;
  auto operator<=>(const Cost&) const = default;
};

struct HeapItem {
  Cost cost;
  int vertex;
  bool operator>(const HeapItem& o) const { return o.cost < cost; }
};

// Per-thread search scratch, reused across queries (generation stamps avoid clearing).
struct Scratch {
  std::vector<uint32_t> seen, done;
  std::vector<Cost> cost;
  std::vector<int> pred_link;
  std::vector<uint64_t> pred_hash;
  std::vector<HeapItem> heap;
  uint32_t gen = 0;
  void prepare(size_t n) {
    if (seen.size() < n) {
      seen.resize(n, 0);
      done.resize(n, 0);
      cost.resize(n);
      pred_link.resize(n);
      pred_hash.resize(n);
    }
    if (++gen == 0) {  // wrapped: reset stamps
      std::fill(seen.begin(), seen.end(), 0);
      std::fill(done.begin(), done.end(), 0);
      gen = 1;
    }
    heap.clear();
  }
};

}  // namespace

struct Topology::Impl {
  Graph graph;
  std::vector<Vertex> vertices;
  std::vector<Link> links;
  std::vector<std::optional<DeviceSpec>> specs;  // by device index
  std::vector<int> device_vertex;                // device index -> vertex
  std::vector<std::vector<int>> host_devices;
  std::unordered_map<std::string, int> by_name;
  bool finalized = false;
  // Flat adjacency built by finalize() from `graph` for fast search.
  std::vector<int> adj_begin;               // size V + 1
  std::vector<std::pair<int, int>> adj;     // (target vertex, link id)
  std::vector<std::pair<int, int>> radj;    // reverse: (source vertex, link id), same layout
  std::vector<int> radj_begin;
  mutable std::shared_mutex cache_mu;
  mutable std::unordered_map<uint64_t, std::vector<int>> cache;

  std::vector<int> search(int src_dev, int dst_dev) const;
  int spine_count = 0;  // switches with an affinity (fat-tree spines)
  void build_index();
  void validate(const std::string& name) const;
};

Topology::Topology() : impl_(std::make_unique<Impl>()) {}
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

int Topology::add_vertex(Vertex v) {
  DPTWIN_ASSERT(!impl_->finalized, "add_vertex after finalize");
  int id = static_cast<int>(boost::add_vertex(impl_->graph));
  if (v.kind == VertexKind::Device) {
    if (v.device < 0) v.device = static_cast<int>(impl_->device_vertex.size());
    if (v.device >= static_cast<int>(impl_->device_vertex.size())) {
      impl_->device_vertex.resize(v.device + 1, -1);
      impl_->specs.resize(v.device + 1);
    }
    if (impl_->device_vertex[v.device] >= 0)
      topo_error(name, fmt::format("device index {} used twice ('{}')", v.device, v.name));
    impl_->device_vertex[v.device] = id;
  } else {
    v.device = -1;
  }
  impl_->vertices.push_back(std::move(v));
  return id;
}

int Topology::add_one_way_link(int a, int b, LinkKind kind, Bandwidth bw, Time latency, double efficiency) {
  DPTWIN_ASSERT(!impl_->finalized, "add_link after finalize");
  int n = num_vertices();
  DPTWIN_ASSERT(a >= 0 && a < n && b >= 0 && b < n && a != b, "link endpoints must be distinct vertices");
  Link l;
  l.name = impl_->vertices[a].name + "->" + impl_->vertices[b].name;
  l.kind = kind;
  l.from = a;
  l.to = b;
  l.bandwidth = bw;
  l.efficiency = efficiency;
  l.latency = latency;
  int id = static_cast<int>(impl_->links.size());
  impl_->links.push_back(std::move(l));
  boost::add_edge(a, b, id, impl_->graph);
  return id;
}

int Topology::add_link(int a, int b, LinkKind kind, Bandwidth bw_ab, Bandwidth bw_ba, Time latency,
                       double efficiency) {
  int id = add_one_way_link(a, b, kind, bw_ab, latency, efficiency);
  add_one_way_link(b, a, kind, bw_ba, latency, efficiency);
  return id;
}

int Topology::add_link(int a, int b, LinkKind kind, Bandwidth bw, Time latency, double efficiency) {
  return add_link(a, b, kind, bw, bw, latency, efficiency);
}

void Topology::set_device_spec(int device, DeviceSpec spec) {
  DPTWIN_ASSERT(device >= 0 && device < static_cast<int>(impl_->specs.size()), "no such device");
  impl_->specs[device] = std::move(spec);
}

void Topology::set_affinity(int vertex, int affinity) {
  DPTWIN_ASSERT(!impl_->finalized, "set_affinity after finalize");
  DPTWIN_ASSERT(vertex >= 0 && vertex < static_cast<int>(impl_->vertices.size()), "no such vertex");
  impl_->vertices[vertex].affinity = affinity;
}

void Topology::Impl::build_index() {
  const int n = static_cast<int>(vertices.size());
  adj_begin.assign(n + 1, 0);
  adj.clear();
  adj.reserve(links.size());
  for (int v = 0; v < n; ++v) {
    adj_begin[v] = static_cast<int>(adj.size());
    auto [it, end] = boost::out_edges(static_cast<Graph::vertex_descriptor>(v), graph);
    for (; it != end; ++it) adj.emplace_back(static_cast<int>(boost::target(*it, graph)), graph[*it]);
  }
  adj_begin[n] = static_cast<int>(adj.size());
  // Reverse adjacency (counting sort by target).
  radj_begin.assign(n + 1, 0);
  for (const auto& l : links) ++radj_begin[l.to + 1];
  for (int v = 0; v < n; ++v) radj_begin[v + 1] += radj_begin[v];
  radj.assign(links.size(), {0, 0});
  std::vector<int> fill(radj_begin.begin(), radj_begin.end() - 1);
  for (int id = 0; id < static_cast<int>(links.size()); ++id) radj[fill[links[id].to]++] = {links[id].from, id};
}

void Topology::Impl::validate(const std::string& name) const {
  const int nv = static_cast<int>(vertices.size());
  const int nd = static_cast<int>(device_vertex.size());
  if (nd == 0) topo_error(name, "it has no devices (at least one GPU or CPU rank is needed)");
  for (int d = 0; d < nd; ++d) {
    if (device_vertex[d] < 0) topo_error(name, fmt::format("device index {} is missing (indices must be 0..n-1)", d));
    const Vertex& v = vertices[device_vertex[d]];
    if (v.host < 0) topo_error(name, fmt::format("device '{}' must belong to a host (host >= 0)", v.name));
    if (d > 0 && vertices[device_vertex[d - 1]].host > v.host)
      topo_error(name, fmt::format("devices must be numbered in host order: device {} ('{}') is on host {} after "
                                   "a device of host {}",
                                   d, v.name, v.host, vertices[device_vertex[d - 1]].host));
    if (!specs[d]) topo_error(name, fmt::format("device '{}' has no device spec", v.name));
    const DeviceSpec& s = *specs[d];
    auto positive = [&](double x, const char* what) {
      if (!(x > 0) || !std::isfinite(x))
        topo_error(name, fmt::format("device '{}' ({}): {} must be > 0, got {}", v.name, s.name, what, x));
    };
    positive(s.fp32_peak.value(), "fp32_peak");
    positive(s.fp16_peak.value(), "fp16_peak");
    positive(s.memory_bandwidth.value(), "memory_bandwidth");
    positive(s.memory.value(), "memory");
    if (s.bf16_peak.value() < 0 || s.launch_overhead < Time::zero())
      topo_error(name, fmt::format("device '{}' ({}): bf16_peak and launch_overhead must be >= 0", v.name, s.name));
  }
  std::unordered_map<std::string, int> names;
  for (int i = 0; i < nv; ++i) {
    if (vertices[i].name.empty()) topo_error(name, fmt::format("vertex {} has an empty name", i));
    auto [it, fresh] = names.emplace(vertices[i].name, i);
    if (!fresh) topo_error(name, fmt::format("vertex name '{}' is used twice", vertices[i].name));
  }
  for (const auto& l : links) {
    if (!(l.bandwidth.value() > 0) || !std::isfinite(l.bandwidth.value()))
      topo_error(name, fmt::format("link '{}': bandwidth must be > 0, got {} B/s", l.name, l.bandwidth.value()));
    if (!(l.efficiency > 0 && l.efficiency <= 1))
      topo_error(name, fmt::format("link '{}': efficiency must be in (0, 1], got {}", l.name, l.efficiency));
    if (l.latency < Time::zero())
      topo_error(name, fmt::format("link '{}': latency must be >= 0", l.name));
  }

  // Reachability under the routing rules (see topology.hpp). Network vertices
  // (host -1) are grouped into components; a device's "exits" are the network
  // components it reaches through its own host's non-device vertices, its
  // "entries" those that reach it. Pairs are also reachable directly inside a
  // host or across a direct host-to-host edge.
  std::vector<int> comp(nv, -1);
  int ncomp = 0;
  for (int s = 0; s < nv; ++s) {
    if (vertices[s].host >= 0 || comp[s] >= 0) continue;
    std::vector<int> stack{s};
    comp[s] = ncomp;
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      auto visit = [&](int w) {
        if (vertices[w].host < 0 && comp[w] < 0) {
          comp[w] = ncomp;
          stack.push_back(w);
        }
      };
      for (int k = adj_begin[v]; k < adj_begin[v + 1]; ++k) visit(adj[k].first);
      for (int k = radj_begin[v]; k < radj_begin[v + 1]; ++k) visit(radj[k].first);
    }
    ++ncomp;
  }
  struct Reach {
    std::vector<int> nets;     // network components (sorted, unique)
    std::vector<int> visited;  // vertices of other hosts / devices touched
  };
  std::vector<uint32_t> stamp(nv, 0);
  uint32_t gen = 0;
  // forward = true: what device vertex `dv` reaches; false: what reaches it.
  auto explore = [&](int dv, bool forward) {
    Reach r;
    ++gen;
    const int h = vertices[dv].host;
    std::vector<int> stack{dv};
    stamp[dv] = gen;
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      const auto& list = forward ? adj : radj;
      const auto& begin = forward ? adj_begin : radj_begin;
      for (int k = begin[v]; k < begin[v + 1]; ++k) {
        int w = list[k].first;
        if (stamp[w] == gen) continue;
        stamp[w] = gen;
        const Vertex& x = vertices[w];
        if (x.host < 0) {
          r.nets.push_back(comp[w]);
        } else if (x.kind == VertexKind::Device || x.host != h) {
          r.visited.push_back(w);  // endpoint or foreign gateway: not expanded
        } else {
          r.visited.push_back(w);
          stack.push_back(w);
        }
      }
    }
    std::sort(r.nets.begin(), r.nets.end());
    r.nets.erase(std::unique(r.nets.begin(), r.nets.end()), r.nets.end());
    std::sort(r.visited.begin(), r.visited.end());
    return r;
  };
  std::vector<Reach> out(nd), in(nd);
  for (int d = 0; d < nd; ++d) {
    out[d] = explore(device_vertex[d], true);
    in[d] = explore(device_vertex[d], false);
  }
  // Components common to every device's exits and entries make all pairs reachable.
  std::vector<int> common = out[0].nets;
  for (int d = 0; d < nd && !common.empty(); ++d) {
    for (const auto* set : {&out[d].nets, &in[d].nets}) {
      std::vector<int> keep;
      std::set_intersection(common.begin(), common.end(), set->begin(), set->end(), std::back_inserter(keep));
      common.swap(keep);
    }
  }
  auto intersects = [](const std::vector<int>& a, const std::vector<int>& b) {
    auto i = a.begin();
    auto j = b.begin();
    while (i != a.end() && j != b.end()) {
      if (*i == *j) return true;
      if (*i < *j) ++i; else ++j;
    }
    return false;
  };
  // A vertex visited from both sides that belongs to one of the two hosts
  // (the other side's BFS stopped at it as a gateway or expanded it).
  auto crosses = [&](const std::vector<int>& a, const std::vector<int>& b, int ha, int hb) {
    auto i = a.begin();
    auto j = b.begin();
    while (i != a.end() && j != b.end()) {
      if (*i == *j) {
        const int h = vertices[*i].host;
        if ((h == ha || h == hb) && vertices[*i].kind != VertexKind::Device) return true;
        ++i;
        ++j;
      } else if (*i < *j) {
        ++i;
      } else {
        ++j;
      }
    }
    return false;
  };
  for (int s = 0; s < nd; ++s) {
    const int sv = device_vertex[s];
    for (int t = 0; t < nd; ++t) {
      if (s == t) continue;
      const int tv = device_vertex[t];
      const bool same_host = vertices[sv].host == vertices[tv].host;
      if (!common.empty() && !same_host) continue;
      if (std::binary_search(out[s].visited.begin(), out[s].visited.end(), tv)) continue;  // direct or in-host
      if (intersects(out[s].nets, in[t].nets)) continue;                                     // via the network
      if (!same_host && crosses(out[s].visited, in[t].visited, vertices[sv].host, vertices[tv].host))
        continue;  // across a direct host-to-host edge
      topo_error(name, fmt::format("device '{}' cannot reach device '{}' (routes may not pass through other devices "
                                   "or through hosts other than the two endpoints)",
                                   vertices[sv].name, vertices[tv].name));
    }
  }
}

void Topology::finalize() {
  DPTWIN_ASSERT(!impl_->finalized, "finalize called twice");
  impl_->build_index();
  impl_->validate(name);
  for (const auto& v : impl_->vertices)
    if (v.kind == VertexKind::Switch && v.affinity >= 0) ++impl_->spine_count;
  int hosts = 0;
  for (const auto& v : impl_->vertices) hosts = std::max(hosts, v.host + 1);
  impl_->host_devices.assign(hosts, {});
  for (int d = 0; d < num_devices(); ++d) impl_->host_devices[impl_->vertices[impl_->device_vertex[d]].host].push_back(d);
  impl_->by_name.clear();
  for (int i = 0; i < num_vertices(); ++i) impl_->by_name.emplace(impl_->vertices[i].name, i);
  impl_->finalized = true;
}

int Topology::num_vertices() const { return static_cast<int>(impl_->vertices.size()); }
int Topology::num_links() const { return static_cast<int>(impl_->links.size()); }
int Topology::num_devices() const { return static_cast<int>(impl_->device_vertex.size()); }
int Topology::num_hosts() const { return static_cast<int>(impl_->host_devices.size()); }
const Vertex& Topology::vertex(int v) const { return impl_->vertices.at(v); }
const Link& Topology::link(int id) const { return impl_->links.at(id); }
int Topology::device_vertex(int device) const { return impl_->device_vertex.at(device); }
int Topology::host_of(int device) const { return vertex(device_vertex(device)).host; }
const std::vector<int>& Topology::devices_on_host(int host) const { return impl_->host_devices.at(host); }
const DeviceSpec& Topology::device_spec(int device) const {
  const auto& s = impl_->specs.at(device);
  DPTWIN_ASSERT(s.has_value(), "device has no spec");
  return *s;
}

int Topology::find_vertex(const std::string& vname) const {
  if (impl_->finalized) {
    auto it = impl_->by_name.find(vname);
    return it == impl_->by_name.end() ? -1 : it->second;
  }
  for (int i = 0; i < num_vertices(); ++i)
    if (impl_->vertices[i].name == vname) return i;
  return -1;
}

std::vector<int> Topology::out_links(int v) const {
  std::vector<int> ids;
  auto [it, end] = boost::out_edges(static_cast<Graph::vertex_descriptor>(v), impl_->graph);
  for (; it != end; ++it) ids.push_back(impl_->graph[*it]);
  return ids;
}

// Dijkstra on (hops, latency) from the source device with early exit at the
// destination. Interior vertices must not be devices nor belong to a third
// host. Among equal-cost predecessors the one with the smallest hash of
// (src, dst, link) wins: deterministic, independent of visiting order, and
// different pairs spread over different equal-cost paths (ECMP).
std::vector<int> Topology::Impl::search(int src_dev, int dst_dev) const {
  thread_local Scratch sc;
  const int s = device_vertex[src_dev];
  const int t = device_vertex[dst_dev];
  const int hs = vertices[s].host, ht = vertices[t].host;
  const uint64_t key = mix64((static_cast<uint64_t>(src_dev) << 32) ^ static_cast<uint32_t>(dst_dev));
  sc.prepare(vertices.size());
  const uint32_t g = sc.gen;
  auto& heap = sc.heap;
  auto push = [&](Cost c, int v) {
    heap.push_back({c, v});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  sc.seen[s] = g;
  sc.cost[s] = {};
  sc.pred_link[s] = -1;
  push({}, s);
  bool found = false;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    HeapItem item = heap.back();
    heap.pop_back();
    const int v = item.vertex;
    if (sc.done[v] == g || item.cost != sc.cost[v]) continue;
    sc.done[v] = g;
    if (v == t) {
      found = true;
      break;
    }
    for (int k = adj_begin[v]; k < adj_begin[v + 1]; ++k) {
      const int w = adj[k].first;
      if (sc.done[w] == g) continue;
      const Vertex& x = vertices[w];
      if (w != t) {
        if (x.kind == VertexKind::Device) continue;
        if (x.host >= 0 && x.host != hs && x.host != ht) continue;
      }
      const int l = adj[k].second;
      int mismatch = 0;
      if (x.affinity >= 0) {
        if (x.kind == VertexKind::Nic) {
          const int want = x.host == hs ? vertices[s].affinity : (x.host == ht ? vertices[t].affinity : -1);
          mismatch = want >= 0 && want != x.affinity;
        } else if (x.kind == VertexKind::Switch && spine_count > 0 && ht >= 0) {
          mismatch = x.affinity != ht % spine_count;
        }
      }
      const Cost c{item.cost.hops + 1, item.cost.mismatch + mismatch, item.cost.latency_ns + links[l].latency.count_ns()};
      const uint64_t h = mix64(key ^ (static_cast<uint64_t>(l) * 0x9e3779b97f4a7c15ULL));
      if (sc.seen[w] != g || c < sc.cost[w]) {
        sc.seen[w] = g;
        sc.cost[w] = c;
        sc.pred_link[w] = l;
        sc.pred_hash[w] = h;
        push(c, w);
      } else if (c == sc.cost[w] && h < sc.pred_hash[w]) {
        sc.pred_link[w] = l;
        sc.pred_hash[w] = h;
      }
    }
  }
  DPTWIN_ASSERT(found, fmt::format("no route from device {} to {} (finalize should have caught this)", src_dev, dst_dev));
  std::vector<int> path;
  for (int v = t; v != s; v = links[sc.pred_link[v]].from) path.push_back(sc.pred_link[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

const std::vector<int>& Topology::route(int src_device, int dst_device) const {
  DPTWIN_ASSERT(impl_->finalized, "route() before finalize()");
  DPTWIN_ASSERT(src_device >= 0 && src_device < num_devices() && dst_device >= 0 && dst_device < num_devices(),
                fmt::format("route({}, {}): no such device", src_device, dst_device));
  const uint64_t key = (static_cast<uint64_t>(src_device) << 32) | static_cast<uint32_t>(dst_device);
  {
    std::shared_lock lock(impl_->cache_mu);
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end()) return it->second;
  }
  std::vector<int> path = src_device == dst_device ? std::vector<int>{} : impl_->search(src_device, dst_device);
  std::unique_lock lock(impl_->cache_mu);
  return impl_->cache.try_emplace(key, std::move(path)).first->second;  // node-based: references stay valid
}

Time Topology::route_latency(int src_device, int dst_device) const {
  Time t = Time::zero();
  for (int l : route(src_device, dst_device)) t += impl_->links[l].latency;
  return t;
}

Bandwidth Topology::route_bandwidth(int src_device, int dst_device) const {
  const auto& r = route(src_device, dst_device);
  if (r.empty()) return device_spec(src_device).memory_bandwidth;
  Bandwidth bw = impl_->links[r.front()].effective_bandwidth();
  for (int l : r) bw = std::min(bw, impl_->links[l].effective_bandwidth());
  return bw;
}

}  // namespace dptwin::topology
