// sim/collectives.cpp — decomposition of collectives into phases, and their pricing.
#include "sim/collectives.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/error.hpp"
#include "sim/flow_solver.hpp"

namespace dptwin::sim {

using topology::Topology;

std::string to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "allreduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "allgather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::Gather: return "gather";
    case CollectiveKind::Scatter: return "scatter";
    case CollectiveKind::SendRecv: return "sendrecv";
  }
  return "?";
}

std::string to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::Tree: return "tree";
    case Algorithm::HalvingDoubling: return "hd";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::Direct: return "direct";
    case Algorithm::ParameterServer: return "ps";
  }
  return "?";
}

bool parse_collective_kind(const std::string& s, CollectiveKind& out) {
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                           CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::Gather,
                           CollectiveKind::Scatter, CollectiveKind::SendRecv})
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  return false;
}

bool parse_algorithm(const std::string& s, Algorithm& out) {
  static const std::pair<const char*, Algorithm> table[] = {
      {"auto", Algorithm::Auto},
      {"ring", Algorithm::Ring},
      {"tree", Algorithm::Tree},
      {"hd", Algorithm::HalvingDoubling},
      {"halving-doubling", Algorithm::HalvingDoubling},
      {"hierarchical", Algorithm::Hierarchical},
      {"direct", Algorithm::Direct},
      {"ps", Algorithm::ParameterServer},
      {"parameter-server", Algorithm::ParameterServer},
  };
  for (const auto& [name, a] : table) {
    if (s == name) {
      out = a;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Decomposition helpers (indices are positions in req.ranks until the end).
namespace {

constexpr double kPipelineChunk = 1024.0 * 1024.0;  // bytes per pipeline chunk (target)
constexpr int kMaxPipelineChunks = 64;

using Flows = std::vector<PointToPoint>;

// Ranks grouped by host, groups in order of first appearance (positions in ranks).
std::vector<std::vector<int>> group_by_host(const std::vector<int>& ranks, const Topology& topo) {
  std::vector<std::vector<int>> groups;
  std::map<int, int> index;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    const int h = topo.host_of(ranks[i]);
    auto [it, fresh] = index.emplace(h, static_cast<int>(groups.size()));
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

bool uniform_groups(const std::vector<std::vector<int>>& g) {
  for (const auto& x : g)
    if (x.size() != g[0].size()) return false;
  return true;
}

// Ring over `members` (positions): each sends `bytes` to its successor.
void add_ring(Flows& f, const std::vector<int>& members, double bytes) {
  const int n = static_cast<int>(members.size());
  if (n < 2) return;
  for (int i = 0; i < n; ++i) f.push_back({members[i], members[(i + 1) % n], bytes});
}

// The flows of one ring step: `channels` rings (see CollectiveRequest::channels),
// each moving `bytes` / channels per edge; one ring in rank order when the ranks
// are not host-contiguous groups of equal size.
Flows ring_step(const std::vector<int>& ranks, const Topology& topo, int channels, double bytes) {
  const int n = static_cast<int>(ranks.size());
  Flows f;
  std::vector<std::vector<int>> groups;
  bool rotate = channels > 1;
  if (rotate) {
    groups = group_by_host(ranks, topo);
    rotate = groups.size() > 1 && groups[0].size() > 1 && uniform_groups(groups);
    for (size_t g = 0; rotate && g < groups.size(); ++g)
      for (size_t j = 0; j < groups[g].size(); ++j)
        if (groups[g][j] != static_cast<int>(g * groups[0].size() + j)) rotate = false;
  }
  if (!rotate) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    add_ring(f, order, bytes);
    return f;
  }
  const int m = static_cast<int>(groups[0].size());
  f.reserve(static_cast<size_t>(n) * channels);
  std::vector<int> order(n);
  for (int c = 0; c < channels; ++c) {
    for (size_t g = 0; g < groups.size(); ++g)
      for (int j = 0; j < m; ++j) order[g * m + j] = groups[g][(c + j) % m];
    add_ring(f, order, bytes / channels);
  }
  return f;
}

// NCCL's binary tree (ncclGetBtree): parent of `rank` among n ranks, -1 for the root 0.
int btree_parent(int n, int rank) {
  if (rank == 0) return -1;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  return up;
}

// Parents of NCCL's double binary tree: tree 0 is the btree, tree 1 its mirror
// (even n) or its shift by one (odd n), so a rank is interior in at most one tree.
std::vector<int> dtree_parents(int n, int tree) {
  std::vector<int> parent(n);
  for (int r = 0; r < n; ++r) {
    if (tree == 0) {
      parent[r] = btree_parent(n, r);
    } else if (n % 2 == 1) {
      const int u = btree_parent(n, (r - 1 + n) % n);
      parent[r] = u == -1 ? -1 : (u + 1) % n;
    } else {
      const int u = btree_parent(n, n - 1 - r);
      parent[r] = u == -1 ? -1 : n - 1 - u;
    }
  }
  return parent;
}

int tree_depth(const std::vector<int>& parent) {
  int depth = 0;
  for (int r = 0; r < static_cast<int>(parent.size()); ++r) {
    int d = 0;
    for (int x = r; parent[x] != -1; x = parent[x]) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

Phase make_phase(Flows f, int repeat, std::string label) {
  Phase p;
  p.flows = std::move(f);
  p.repeat = repeat;
  p.label = std::move(label);
  return p;
}

// The same phases with every flow reversed, in reverse order (reduce = mirrored broadcast).
std::vector<Phase> reversed(std::vector<Phase> phases, const std::string& from, const std::string& to) {
  std::reverse(phases.begin(), phases.end());
  for (auto& p : phases) {
    for (auto& f : p.flows) std::swap(f.src, f.dst);
    if (auto pos = p.label.find(from); pos != std::string::npos) p.label.replace(pos, from.size(), to);
  }
  return phases;
}

// Recursive halving-doubling layout: p = largest power of two <= n; the first
// One step of each ring of the hierarchical algorithm for a buffer of `s` bytes:
// the intra-node rings (pieces of s/m) and the inter-node rings among equal
// local ranks (pieces of s/(m·g)), for g nodes of m ranks.
struct HierarchicalSteps {
  Flows intra, inter;
  int g = 0, m = 0;
};
HierarchicalSteps hierarchical_steps(const std::vector<int>& ranks, const Topology& topo, double s) {
  HierarchicalSteps h;
  const auto groups = group_by_host(ranks, topo);
  h.g = static_cast<int>(groups.size());
  h.m = static_cast<int>(groups[0].size());
  for (const auto& grp : groups) add_ring(h.intra, grp, s / h.m);
  for (int l = 0; l < h.m; ++l) {
    std::vector<int> column;
    for (const auto& grp : groups) column.push_back(grp[l]);
    add_ring(h.inter, column, s / (static_cast<double>(h.m) * h.g));
  }
  return h;
}

// 2r ranks (r = n - p) pair up, odd ones folding into even ones (pre-step) and
// being served at the end (post-step). newrank j -> position.
struct HdLayout {
  int p = 1, r = 0;
  int pos(int j) const { return j < r ? 2 * j : j + r; }
};
HdLayout hd_layout(int n) {
  HdLayout h;
  h.p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  h.r = n - h.p;
  return h;
}
Flows hd_fold(const HdLayout& h, double bytes, bool inward) {
  Flows f;
  for (int i = 0; i < h.r; ++i) {
    if (inward) f.push_back({2 * i + 1, 2 * i, bytes});
    else f.push_back({2 * i, 2 * i + 1, bytes});
  }
  return f;
}
// One exchange step at distance `mask` among the p participating ranks.
Flows hd_exchange(const HdLayout& h, int mask, double bytes) {
  Flows f;
  for (int j = 0; j < h.p; ++j) f.push_back({h.pos(j), h.pos(j ^ mask), bytes});
  return f;
}

// Reduce-scatter (halving: distances 1, 2, .. p/2, bytes S/2, S/4, .. S/p) and/or
// all-gather (doubling: the same steps in reverse order).
void add_hd(std::vector<Phase>& out, int n, double s, bool rs, bool ag) {
  const HdLayout h = hd_layout(n);
  if (rs) {
    if (h.r > 0) out.push_back(make_phase(hd_fold(h, s, true), 1, "hd pre-step (fold extra ranks)"));
    for (int mask = 1; mask < h.p; mask <<= 1)
      out.push_back(make_phase(hd_exchange(h, mask, s / (2.0 * mask)), 1, "hd reduce-scatter step (halving)"));
    if (!ag && h.r > 0) out.push_back(make_phase(hd_fold(h, s / n, false), 1, "hd post-step (shard to extra ranks)"));
  }
  if (ag) {
    if (!rs && h.r > 0) out.push_back(make_phase(hd_fold(h, s / n, true), 1, "hd pre-step (shard from extra ranks)"));
    for (int mask = h.p / 2; mask >= 1; mask >>= 1)
      out.push_back(make_phase(hd_exchange(h, mask, s / (2.0 * mask)), 1, "hd all-gather step (doubling)"));
    if (h.r > 0) out.push_back(make_phase(hd_fold(h, s, false), 1, "hd post-step (result to extra ranks)"));
  }
}

Flows all_to_all(int n, double bytes) {
  Flows f;
  f.reserve(static_cast<size_t>(n) * (n - 1));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) f.push_back({i, j, bytes});
  return f;
}

Flows fan_in(int n, int root, double bytes) {
  Flows f;
  for (int i = 0; i < n; ++i)
    if (i != root) f.push_back({i, root, bytes});
  return f;
}
Flows fan_out(int n, int root, double bytes) {
  Flows f;
  for (int i = 0; i < n; ++i)
    if (i != root) f.push_back({root, i, bytes});
  return f;
}

// Pipelined broadcast from `root` along a chain (Ring) or a binary tree (Tree),
// or a binomial tree of whole messages (HalvingDoubling), or one fan-out.
std::vector<Phase> broadcast_phases(Algorithm a, int n, int root, double s) {
  std::vector<Phase> out;
  auto abs = [&](int rel) { return (rel + root) % n; };
  const int k = pipeline_chunks(s);
  switch (a) {
    case Algorithm::Tree: {
      Flows f;
      std::vector<int> parent(n);
      for (int r = 0; r < n; ++r) parent[r] = btree_parent(n, r);
      for (int r = 1; r < n; ++r) f.push_back({abs(parent[r]), abs(r), s / k});
      out.push_back(make_phase(std::move(f), tree_depth(parent) + k - 1, "tree broadcast step (pipelined)"));
      break;
    }
    case Algorithm::HalvingDoubling:
      for (int mask = 1; mask < n; mask <<= 1) {
        Flows f;
        for (int i = 0; i < mask && i + mask < n; ++i) f.push_back({abs(i), abs(i + mask), s});
        out.push_back(make_phase(std::move(f), 1, "binomial broadcast step"));
      }
      break;
    case Algorithm::Direct:
    case Algorithm::ParameterServer:
      out.push_back(make_phase(fan_out(n, root, s), 1, "direct broadcast"));
      break;
    default: {  // Ring / Hierarchical: pipelined chain in rank order starting at the root
      Flows f;
      for (int i = 0; i + 1 < n; ++i) f.push_back({abs(i), abs(i + 1), s / k});
      out.push_back(make_phase(std::move(f), (n - 1) + k - 1, "ring broadcast step (pipelined chain)"));
      break;
    }
  }
  return out;
}

// Gather of `piece` bytes per rank: binomial tree (Tree/HD) or one fan-in.
std::vector<Phase> gather_phases(Algorithm a, int n, int root, double piece) {
  std::vector<Phase> out;
  auto abs = [&](int rel) { return (rel + root) % n; };
  if (a == Algorithm::Tree || a == Algorithm::HalvingDoubling) {
    for (int mask = 1; mask < n; mask <<= 1) {
      Flows f;
      for (int i = mask; i < n; i += 2 * mask) {
        const int held = std::min(mask, n - i);  // pieces accumulated under relative rank i
        f.push_back({abs(i), abs(i - mask), piece * held});
      }
      out.push_back(make_phase(std::move(f), 1, "binomial gather step"));
    }
  } else {
    out.push_back(make_phase(fan_in(n, root, piece), 1, "direct gather"));
  }
  return out;
}

std::vector<Phase> decompose_positions(const CollectiveRequest& req, Algorithm a, const Topology& topo) {
  const int n = static_cast<int>(req.ranks.size());
  const double s = req.bytes.value();
  const int root = req.root;
  std::vector<Phase> out;
  if (req.kind == CollectiveKind::SendRecv) {
    DPTWIN_ASSERT(n >= 2, "SendRecv needs two ranks");
    out.push_back(make_phase({{0, 1, s}}, 1, "send/recv"));
    return out;
  }
  if (n < 2) return out;

  switch (req.kind) {
    case CollectiveKind::AllReduce:
      switch (a) {
        case Algorithm::Tree: {
          const int k = pipeline_chunks(s / 2);
          int depth = 0;
          Flows up;
          for (int t = 0; t < 2; ++t) {
            const auto parent = dtree_parents(n, t);
            depth = std::max(depth, tree_depth(parent));
            for (int r = 0; r < n; ++r)
              if (parent[r] != -1) up.push_back({r, parent[r], s / (2.0 * k)});
          }
          Flows down = up;
          for (auto& f : down) std::swap(f.src, f.dst);
          out.push_back(make_phase(std::move(up), depth + k - 1, "tree reduce step (pipelined, both trees)"));
          out.push_back(make_phase(std::move(down), depth + k - 1, "tree broadcast step (pipelined, both trees)"));
          break;
        }
        case Algorithm::HalvingDoubling:
          add_hd(out, n, s, true, true);
          break;
        case Algorithm::Hierarchical: {
          auto [intra, inter, g, m] = hierarchical_steps(req.ranks, topo, s);
          if (m > 1) out.push_back(make_phase(intra, m - 1, "intra-node ring reduce-scatter step"));
          if (g > 1) out.push_back(make_phase(std::move(inter), 2 * (g - 1), "inter-node ring allreduce step"));
          if (m > 1) out.push_back(make_phase(std::move(intra), m - 1, "intra-node ring all-gather step"));
          break;
        }
        case Algorithm::Direct:
          out.push_back(make_phase(all_to_all(n, s / n), 2, "direct all-to-all step (reduce-scatter, all-gather)"));
          break;
        case Algorithm::ParameterServer:
          out.push_back(make_phase(fan_in(n, root, s), 1, "parameter-server gather"));
          out.push_back(make_phase(fan_out(n, root, s), 1, "parameter-server broadcast"));
          break;
        default:
          out.push_back(make_phase(ring_step(req.ranks, topo, req.channels, s / n), 2 * (n - 1),
                                   "ring step (reduce-scatter, all-gather)"));
          break;
      }
      break;

    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather: {
      const bool rs = req.kind == CollectiveKind::ReduceScatter;
      switch (a) {
        case Algorithm::HalvingDoubling:
          add_hd(out, n, s, rs, !rs);
          break;
        case Algorithm::Hierarchical: {
          auto [intra, inter, g, m] = hierarchical_steps(req.ranks, topo, s);
          Phase pi = make_phase(std::move(intra), m - 1, rs ? "intra-node ring reduce-scatter step"
                                                            : "intra-node ring all-gather step");
          Phase px = make_phase(std::move(inter), g - 1, rs ? "inter-node ring reduce-scatter step"
                                                            : "inter-node ring all-gather step");
          if (rs) {
            if (m > 1) out.push_back(std::move(pi));
            if (g > 1) out.push_back(std::move(px));
          } else {
            if (g > 1) out.push_back(std::move(px));
            if (m > 1) out.push_back(std::move(pi));
          }
          break;
        }
        case Algorithm::Direct:
          out.push_back(make_phase(all_to_all(n, s / n), 1, rs ? "direct reduce-scatter" : "direct all-gather"));
          break;
        case Algorithm::ParameterServer:
          if (rs) {
            out.push_back(make_phase(fan_in(n, root, s), 1, "parameter-server gather"));
            out.push_back(make_phase(fan_out(n, root, s / n), 1, "parameter-server scatter"));
          } else {
            out.push_back(make_phase(fan_in(n, root, s / n), 1, "parameter-server gather"));
            out.push_back(make_phase(fan_out(n, root, s), 1, "parameter-server broadcast"));
          }
          break;
        default:  // Ring (Tree falls back to Ring)
          out.push_back(make_phase(ring_step(req.ranks, topo, req.channels, s / n), n - 1,
                                   rs ? "ring reduce-scatter step" : "ring all-gather step"));
          break;
      }
      break;
    }

    case CollectiveKind::Broadcast:
      out = broadcast_phases(a, n, root, s);
      break;
    case CollectiveKind::Reduce:
      out = reversed(broadcast_phases(a, n, root, s), "broadcast", "reduce");
      break;
    case CollectiveKind::Gather:
      out = gather_phases(a, n, root, s);
      break;
    case CollectiveKind::Scatter:
      out = reversed(gather_phases(a, n, root, s), "gather", "scatter");
      break;
    case CollectiveKind::SendRecv:
      break;
  }
  return out;
}

}  // namespace

int pipeline_chunks(double bytes) {
  if (bytes <= kPipelineChunk) return 1;
  const double k = std::ceil(bytes / kPipelineChunk);
  return k >= kMaxPipelineChunks ? kMaxPipelineChunks : static_cast<int>(k);
}

int double_binary_tree_depth(int n) {
  if (n < 2) return 0;
  return std::max(tree_depth(dtree_parents(n, 0)), tree_depth(dtree_parents(n, 1)));
}

Algorithm resolve_algorithm(const CollectiveRequest& req, const Topology& topo) {
  Algorithm a = req.algorithm;
  if (a == Algorithm::Auto) {
    if (req.kind == CollectiveKind::Gather || req.kind == CollectiveKind::Scatter) return Algorithm::Direct;
    if (req.kind == CollectiveKind::SendRecv || req.kind == CollectiveKind::Broadcast ||
        req.kind == CollectiveKind::Reduce)
      return Algorithm::Ring;
    a = Algorithm::Hierarchical;
  }
  if (a == Algorithm::Hierarchical) {
    const auto groups = group_by_host(req.ranks, topo);
    if (groups.size() < 2 || groups[0].size() < 2 || !uniform_groups(groups)) return Algorithm::Ring;
  }
  return a;
}

std::vector<Phase> decompose(const CollectiveRequest& req, const Topology& topo) {
  DPTWIN_ASSERT(!req.ranks.empty(), "collective without ranks");
  const int n = static_cast<int>(req.ranks.size());
  DPTWIN_ASSERT(req.root >= 0 && req.root < n, "collective root out of range");
  for (int r : req.ranks) DPTWIN_ASSERT(r >= 0 && r < topo.num_devices(), "collective rank is not a device");
  std::vector<Phase> phases = decompose_positions(req, resolve_algorithm(req, topo), topo);
  for (auto& p : phases)
    for (auto& f : p.flows) {
      f.src = req.ranks[f.src];
      f.dst = req.ranks[f.dst];
    }
  return phases;
}

// ---------------------------------------------------------------------------
// Alpha-beta formulas.

Time ring_allreduce_time(const AlphaBeta& ab, Bytes s, int n) {
  if (n < 2) return Time::zero();
  return ab.alpha * (2 * (n - 1)) + Time::from_seconds(2.0 * (n - 1) / n * s.value() / ab.bandwidth);
}

Time ring_reduce_scatter_time(const AlphaBeta& ab, Bytes s, int n) {
  if (n < 2) return Time::zero();
  return ab.alpha * (n - 1) + Time::from_seconds(static_cast<double>(n - 1) / n * s.value() / ab.bandwidth);
}

Time tree_allreduce_time(const AlphaBeta& ab, Bytes s, int depth, int chunks) {
  const int steps = 2 * (depth + chunks - 1);
  return ab.alpha * steps + Time::from_seconds(steps * s.value() / (2.0 * chunks) / ab.bandwidth);
}

Time hierarchical_allreduce_time(const AlphaBeta& intra, const AlphaBeta& inter, Bytes s, int per_node, int nodes) {
  const double m = per_node, g = nodes;
  Time t = Time::zero();
  if (per_node > 1) t += intra.alpha * (2 * (per_node - 1)) + Time::from_seconds(2 * (m - 1) * s.value() / (m * intra.bandwidth));
  if (nodes > 1) t += inter.alpha * (2 * (nodes - 1)) + Time::from_seconds(2 * (g - 1) * s.value() / (m * g * inter.bandwidth));
  return t;
}

Time parameter_server_time(const AlphaBeta& gather, const AlphaBeta& bcast, Bytes s) {
  return gather.alpha + bcast.alpha + Time::from_seconds(s.value() / gather.bandwidth + s.value() / bcast.bandwidth);
}

double allreduce_bus_bandwidth(Bytes bytes, Time t, int ranks) {
  if (t.count_ns() <= 0 || ranks < 1) return 0;
  return bytes.value() / t.seconds() * 2.0 * (ranks - 1) / ranks;
}

// ---------------------------------------------------------------------------
// NetworkModel.

namespace {

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64-style combine
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}
uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
void append(std::string& key, uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

double phase_max_bytes(const Phase& p) {
  double m = 0;
  for (const auto& f : p.flows) m = std::max(m, f.bytes);
  return m;
}

// Key of a phase's flow pattern up to a common byte scale: flow count, two
// independent hashes over (src, dst, bytes / max bytes), first and last flow.
std::string phase_key(const Phase& p, double max_bytes) {
  uint64_t h1 = 0x12345678, h2 = 0x9abcdef0;
  for (const auto& f : p.flows) {
    const uint64_t rel = bits_of(max_bytes > 0 ? f.bytes / max_bytes : 0.0);
    const uint64_t sd = (static_cast<uint64_t>(static_cast<uint32_t>(f.src)) << 32) | static_cast<uint32_t>(f.dst);
    h1 = mix(mix(h1, sd), rel);
    h2 = mix(h2 ^ rel, sd * 0x100000001b3ULL);
  }
  std::string key;
  append(key, p.flows.size());
  append(key, h1);
  append(key, h2);
  if (!p.flows.empty()) {
    append(key, (static_cast<uint64_t>(p.flows.front().src) << 32) | static_cast<uint32_t>(p.flows.front().dst));
    append(key, (static_cast<uint64_t>(p.flows.back().src) << 32) | static_cast<uint32_t>(p.flows.back().dst));
  }
  return key;
}

}  // namespace

NetworkModel::NetworkModel(const Topology& topo, NetworkOptions opts) : topo_(topo), opts_(opts) {
  capacity_.resize(topo_.num_links());
  for (int l = 0; l < topo_.num_links(); ++l) capacity_[l] = topo_.link(l).effective_bandwidth().value();
  local_rate_ = opts_.local_copy_bandwidth;
  if (local_rate_ <= 0 && topo_.num_devices() > 0) local_rate_ = topo_.device_spec(0).memory_bandwidth.value();
  if (local_rate_ <= 0) local_rate_ = 1e12;
}

const CommRegime* find_comm_regime(const std::vector<CommCalibration>& tables, const CollectiveRequest& req,
                                   int* table_index, int* regime_index) {
  const std::string kind = to_string(req.kind);
  const int n = static_cast<int>(req.ranks.size());
  int best = -1;
  auto better = [&](int i) {
    if (best < 0) return true;
    const auto& a = tables[i];
    const auto& b = tables[best];
    const bool ka = a.collective == kind, kb = b.collective == kind;
    if (ka != kb) return ka;  // a table of the request's kind beats a generic one
    const int da = a.ranks == 0 ? 1 << 20 : std::abs(a.ranks - n), db = b.ranks == 0 ? 1 << 20 : std::abs(b.ranks - n);
    return da < db || (da == db && a.ranks < b.ranks);
  };
  for (int i = 0; i < static_cast<int>(tables.size()); ++i) {
    const auto& t = tables[i];
    if (t.regimes.empty() || (!t.collective.empty() && t.collective != kind)) continue;
    if (better(i)) best = i;
  }
  if (best < 0) return nullptr;
  const auto& regs = tables[best].regimes;
  int r = static_cast<int>(regs.size()) - 1;
  for (int i = 0; i < static_cast<int>(regs.size()); ++i)
    if (regs[i].up_to <= 0 || req.bytes.value() <= regs[i].up_to) {
      r = i;
      break;
    }
  if (table_index) *table_index = best;
  if (regime_index) *regime_index = r;
  return &regs[r];
}

const std::vector<double>& NetworkModel::capacities_for(const CollectiveRequest& req, Time& alpha,
                                                        std::string& key_suffix) const {
  alpha = Time::zero();
  int ti = -1, ri = -1;
  const CommRegime* reg = find_comm_regime(opts_.calibration, req, &ti, &ri);
  if (!reg) return capacity_;
  alpha = reg->alpha;
  const int64_t id = (static_cast<int64_t>(ti) << 32) | ri;
  append(key_suffix, static_cast<uint64_t>(id) + 1);
  auto it = regime_capacity_.find(id);
  if (it != regime_capacity_.end()) return it->second;
  std::vector<double> cap = capacity_;
  const std::string& kind = opts_.calibration[ti].link_kind;
  for (int l = 0; l < topo_.num_links(); ++l)
    if (kind.empty() || topology::to_string(topo_.link(l).kind) == kind) cap[l] *= reg->bandwidth_factor;
  return regime_capacity_.emplace(id, std::move(cap)).first->second;
}

const CollectiveCost& NetworkModel::cost(const CollectiveRequest& req) {
  // Key: kind, algorithm, root, bytes (exact bits), rank count, first/last rank, rank-list hash.
  std::string key;
  append(key, static_cast<uint64_t>(req.kind) << 32 | static_cast<uint64_t>(req.algorithm));
  append(key, static_cast<uint64_t>(req.root) << 32 | static_cast<uint32_t>(req.channels));
  append(key, bits_of(req.bytes.value()));
  append(key, req.ranks.size());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int r : req.ranks) h = mix(h, static_cast<uint64_t>(r));
  append(key, h);
  if (!req.ranks.empty()) append(key, (static_cast<uint64_t>(req.ranks.front()) << 32) | static_cast<uint32_t>(req.ranks.back()));
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  // A calibrated table prices the request with the algorithm it was fitted for.
  CollectiveRequest priced = req;
  int table = -1;
  const bool calibrated = find_comm_regime(opts_.calibration, req, &table) != nullptr;
  if (calibrated && opts_.calibration[table].algorithm) priced.algorithm = *opts_.calibration[table].algorithm;
  auto solve = [&](const CollectiveRequest& r) {
    return opts_.mode == NetworkMode::Flow ? solve_flow(r) : solve_analytic(r);
  };
  CollectiveCost c = solve(priced);
  // Between two regimes' measured sizes: the table's prices at both edges,
  // interpolated linearly in bytes (the link bytes stay the request's own).
  if (calibrated) {
    if (auto gap = comm_regime_gap(opts_.calibration[table], req.bytes.value())) {
      CollectiveRequest edge = priced;
      edge.bytes = Bytes(gap->first);
      const CollectiveCost lo = solve(edge);
      edge.bytes = Bytes(gap->second);
      const CollectiveCost hi = solve(edge);
      c.duration = across_gap(*gap, req.bytes.value(), lo.duration, hi.duration);
      c.latency_part = across_gap(*gap, req.bytes.value(), lo.latency_part, hi.latency_part);
      c.phases_solved += lo.phases_solved + hi.phases_solved;
    }
  }
  return cache_.emplace(std::move(key), std::move(c)).first->second;
}

Time across_gap(const std::pair<double, double>& gap, double bytes, Time at_first, Time at_second) {
  const double w = (bytes - gap.first) / (gap.second - gap.first);
  return Time::from_seconds(at_first.seconds() + w * (at_second.seconds() - at_first.seconds()));
}

std::optional<std::pair<double, double>> comm_regime_gap(const CommCalibration& t, double bytes) {
  for (size_t i = 0; i + 1 < t.regimes.size(); ++i) {
    const double lo = t.regimes[i].measured_to, hi = t.regimes[i + 1].measured_from;
    if (lo > 0 && hi > lo && bytes > lo && bytes < hi) return std::make_pair(lo, hi);
  }
  return std::nullopt;
}

void NetworkModel::add_link_bytes(const Phase& p, std::vector<double>& acc) const {
  for (const auto& f : p.flows)
    for (int l : topo_.route(f.src, f.dst)) acc[l] += f.bytes * p.repeat;
}

namespace {
std::vector<std::pair<int, double>> sparse(const std::vector<double>& dense) {
  std::vector<std::pair<int, double>> out;
  for (int l = 0; l < static_cast<int>(dense.size()); ++l)
    if (dense[l] > 0) out.emplace_back(l, dense[l]);
  return out;
}
}  // namespace

CollectiveCost NetworkModel::solve_flow(const CollectiveRequest& req) {
  CollectiveCost c;
  std::vector<double> link_acc(capacity_.size(), 0.0);
  Time regime_alpha;
  std::string regime_key;
  const std::vector<double>& capacity = capacities_for(req, regime_alpha, regime_key);
  for (const Phase& p : decompose(req, topo_)) {
    if (p.flows.empty() || p.repeat <= 0) continue;
    const double max_bytes = phase_max_bytes(p);
    const double scale = max_bytes > 0 ? max_bytes : 1.0;
    const std::string key = phase_key(p, max_bytes) + regime_key;
    auto it = phase_cache_.find(key);
    if (it == phase_cache_.end()) {
      // Copy routes so the flows do not depend on the topology cache's storage.
      std::vector<std::vector<int>> routes(p.flows.size());
      std::vector<RoutedFlow> flows(p.flows.size());
      Time lat = Time::zero();
      for (size_t i = 0; i < p.flows.size(); ++i) {
        routes[i] = topo_.route(p.flows[i].src, p.flows[i].dst);
        Time l = Time::zero();
        for (int id : routes[i]) l += topo_.link(id).latency;
        lat = max(lat, l);
        flows[i] = {&routes[i], p.flows[i].bytes / scale};
      }
      std::vector<double> lb;
      PhaseSolution sol;
      sol.seconds_per_byte = transfer_seconds(flows, capacity, local_rate_, &lb);
      sol.latency = lat;
      sol.link_bytes_per_byte = sparse(lb);
      ++phase_solves_;
      ++c.phases_solved;
      it = phase_cache_.emplace(key, std::move(sol)).first;
    }
    const PhaseSolution& sol = it->second;
    const Time step_latency = sol.latency + opts_.per_step_overhead + regime_alpha;
    const Time step = step_latency + Time::from_seconds(sol.seconds_per_byte * scale);
    c.duration += step * p.repeat;
    c.latency_part += step_latency * p.repeat;
    for (const auto& [l, b] : sol.link_bytes_per_byte) link_acc[l] += b * scale * p.repeat;
  }
  c.link_bytes = sparse(link_acc);
  return c;
}

AlphaBeta NetworkModel::phase_alpha_beta(const Phase& p, const std::vector<double>& capacity, Time extra_alpha) const {
  // Static share: each link's effective bandwidth divided by the phase's flows crossing it.
  std::unordered_map<int, int> count;
  Time lat = Time::zero();
  for (const auto& f : p.flows) {
    Time l = Time::zero();
    for (int id : topo_.route(f.src, f.dst)) {
      ++count[id];
      l += topo_.link(id).latency;
    }
    lat = max(lat, l);
  }
  double bw = local_rate_;
  for (const auto& [id, k] : count) bw = std::min(bw, capacity[id] / k);
  return {lat + opts_.per_step_overhead + extra_alpha, bw};
}

Time NetworkModel::analytic_time(const CollectiveRequest& req) const {
  // Between two regimes' measured sizes: the line between the edges' prices, as cost() does.
  int table = -1;
  if (find_comm_regime(opts_.calibration, req, &table))
    if (auto gap = comm_regime_gap(opts_.calibration[table], req.bytes.value())) {
      CollectiveRequest edge = req;
      edge.bytes = Bytes(gap->first);
      const Time lo = regime_analytic_time(edge);
      edge.bytes = Bytes(gap->second);
      return across_gap(*gap, req.bytes.value(), lo, regime_analytic_time(edge));
    }
  return regime_analytic_time(req);
}

Time NetworkModel::regime_analytic_time(const CollectiveRequest& req) const {
  const std::vector<Phase> phases = decompose(req, topo_);
  if (phases.empty()) return Time::zero();
  const Algorithm a = resolve_algorithm(req, topo_);
  const int n = static_cast<int>(req.ranks.size());
  Time ra;
  std::string unused_key;
  const std::vector<double>& cap = capacities_for(req, ra, unused_key);
  auto phase_alpha_beta = [&](const Phase& p) { return this->phase_alpha_beta(p, cap, ra); };
  if (req.kind == CollectiveKind::AllReduce) {
    switch (a) {
      case Algorithm::Ring:
        // With c channels a flow moves S/(n·c) at a per-flow share B/c: the formula with S/c.
        return ring_allreduce_time(phase_alpha_beta(phases[0]), Bytes(phase_max_bytes(phases[0]) * n), n);
      case Algorithm::Tree:
        return tree_allreduce_time(phase_alpha_beta(phases[0]), req.bytes, double_binary_tree_depth(n),
                                   pipeline_chunks(req.bytes.value() / 2));
      case Algorithm::Hierarchical: {
        const auto groups = group_by_host(req.ranks, topo_);
        // phases: intra reduce-scatter, inter allreduce, intra all-gather
        return hierarchical_allreduce_time(phase_alpha_beta(phases[0]), phase_alpha_beta(phases[1]), req.bytes,
                                           static_cast<int>(groups[0].size()), static_cast<int>(groups.size()));
      }
      case Algorithm::ParameterServer:
        return parameter_server_time(phase_alpha_beta(phases[0]), phase_alpha_beta(phases[1]), req.bytes);
      default:
        break;
    }
  }
  // Generic: sum over phases of repeat * (alpha + largest flow / per-flow bandwidth).
  // Halving-doubling allreduce, for instance: 2·sum_{j=1..log2 p}(α + S/(2^j·B))
  // (+ 2(α + S/B) for the pre/post fold when n is not a power of two);
  // direct allreduce: 2(α + S/(n·B)) with B = a rank's link / (n-1).
  Time t = Time::zero();
  for (const Phase& p : phases) {
    const AlphaBeta ab = phase_alpha_beta(p);
    t += (ab.alpha + Time::from_seconds(phase_max_bytes(p) / ab.bandwidth)) * p.repeat;
  }
  return t;
}

CollectiveCost NetworkModel::solve_analytic(const CollectiveRequest& req) const {
  CollectiveCost c;
  c.duration = analytic_time(req);
  std::vector<double> link_acc(capacity_.size(), 0.0);
  Time ra;
  std::string unused_key;
  const std::vector<double>& cap = capacities_for(req, ra, unused_key);
  for (const Phase& p : decompose(req, topo_)) {
    c.latency_part += phase_alpha_beta(p, cap, ra).alpha * p.repeat;
    add_link_bytes(p, link_acc);
  }
  c.link_bytes = sparse(link_acc);
  return c;
}

}  // namespace dptwin::sim
