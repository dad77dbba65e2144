// sim/collectives.hpp — collectives as phases of point-to-point flows, and
// the network model that prices them.
//
// decompose() turns a collective into phases. A phase is a set of concurrent
// flows that start together (one step of a ring, one level of a tree, the
// fan-in to a parameter server), with a repeat count: a ring allreduce on n
// ranks is one phase repeated 2(n-1) times, so it is solved once. Algorithms:
//   Ring             reduce-scatter + all-gather around the ring of ranks
//   Tree             NCCL-style double binary tree (pipelined reduce up, broadcast down)
//   HalvingDoubling  recursive halving (reduce-scatter) + recursive doubling (all-gather)
//   Hierarchical     ring inside each node, ring across nodes among equal local ranks
//                    (concurrently for each local rank), ring all-gather inside nodes
//   Direct           every rank exchanges with every rank at once
//   ParameterServer  every rank sends to the root, root reduces, root sends to every rank
//
// NetworkModel prices a collective on a Topology in one of two modes:
//   Flow      every distinct phase is solved with max-min fair sharing (flow_solver.hpp)
//   Analytic  alpha-beta formulas over the bottleneck link of the ring (for
//             comparison and speed; agrees with Flow on uncontended symmetric cases)
// and caches results by (kind, algorithm, ranks, bytes, root).
//
// Thread-safety: NetworkModel is not thread-safe (one per Simulation); the
// free functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/units.hpp"
#include "topology/topology.hpp"

namespace dptwin::sim {

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Gather, Scatter, SendRecv };
enum class Algorithm { Auto, Ring, Tree, HalvingDoubling, Hierarchical, Direct, ParameterServer };
enum class NetworkMode { Flow, Analytic };

std::string to_string(CollectiveKind k);
std::string to_string(Algorithm a);
bool parse_algorithm(const std::string& s, Algorithm& out);  // "ring", "tree", "hd", "hierarchical", "direct", "ps", "auto"

struct CollectiveRequest {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Algorithm algorithm = Algorithm::Ring;
  std::vector<int> ranks;  // device indices taking part, in rank order
  Bytes bytes;             // buffer size per rank (AllReduce: the full buffer; Gather/Scatter: per-rank piece;
                           // SendRecv: bytes from ranks[0] to ranks[1])
  int root = 0;            // index into `ranks` for rooted collectives
};

struct PointToPoint {
  int src = 0, dst = 0;    // device indices
  double bytes = 0;
};

struct Phase {
  std::vector<PointToPoint> flows;
  int repeat = 1;           // identical consecutive repetitions
  std::string label;        // e.g. "ring reduce-scatter step"
};

// REQUIRES: ranks non-empty, distinct, valid for `topo`. Auto picks Ring for
// one node, Hierarchical across nodes when each node holds more than one rank.
std::vector<Phase> decompose(const CollectiveRequest& req, const topology::Topology& topo);

struct NetworkOptions {
  NetworkMode mode = NetworkMode::Flow;
  Time per_step_overhead = Time::us(0);  // fixed software cost per algorithm step (NCCL kernel step, MPI progress)
  double local_copy_bandwidth = 0;       // bytes/s for src == dst flows; 0 = device memory bandwidth
};

struct CollectiveCost {
  Time duration;                       // total time of the collective
  Time latency_part;                   // of which: hop latencies and per-step overheads
  std::vector<std::pair<int, double>> link_bytes;  // (directed link id, bytes carried), busy links only
  int phases_solved = 0;               // distinct phases solved (cache misses)
};

class NetworkModel {
 public:
  NetworkModel(const topology::Topology& topo, NetworkOptions opts);
  // Cost of one collective; cached.
  const CollectiveCost& cost(const CollectiveRequest& req);
  // Alpha-beta time for the same request (independent of mode).
  Time analytic_time(const CollectiveRequest& req) const;
  const topology::Topology& topology() const { return topo_; }
  int64_t cache_hits() const { return hits_; }
  int64_t cache_misses() const { return misses_; }

 private:
  CollectiveCost solve_flow(const CollectiveRequest& req);
  const topology::Topology& topo_;
  NetworkOptions opts_;
  std::vector<double> capacity_;
  std::unordered_map<std::string, CollectiveCost> cache_;
  int64_t hits_ = 0, misses_ = 0;
};

// nccl-tests bus bandwidth of an allreduce of `bytes` taking `t`: algbw * 2(n-1)/n.
double allreduce_bus_bandwidth(Bytes bytes, Time t, int ranks);

}  // namespace dptwin::sim
