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
// and caches results by (kind, algorithm, ranks, bytes, root, channels); within
// a model, a phase whose flows equal an earlier one up to a common byte scale
// reuses its max-min solution (time scales linearly with bytes).
//
// Thread-safety: NetworkModel is not thread-safe (one per Simulation); the
// free functions are pure.
#pragma once

#include <cstdint>
#include <optional>
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
bool parse_collective_kind(const std::string& s, CollectiveKind& out);  // the names to_string gives
bool parse_algorithm(const std::string& s, Algorithm& out);  // "ring", "tree", "hd", "hierarchical", "direct", "ps", "auto"

struct CollectiveRequest {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Algorithm algorithm = Algorithm::Ring;
  std::vector<int> ranks;  // device indices taking part, in rank order
  Bytes bytes;             // buffer size per rank (AllReduce: the full buffer; Gather/Scatter: per-rank piece;
                           // SendRecv: bytes from ranks[0] to ranks[1])
  int root = 0;            // index into `ranks` for rooted collectives
  // Ring only (AllReduce, ReduceScatter, AllGather): concurrent rings (NCCL
  // channels), each carrying bytes/channels. Channel c visits every node's ranks
  // rotated by c, so its node crossings leave from local rank c-1 and enter at
  // local rank c: with channels = ranks per node every GPU's NIC carries one
  // crossing, as NCCL spreads rings over rails. Inside one node the rotated
  // rings are the same cycle, so the time is unchanged. Needs ranks grouped by
  // node with equal counts; otherwise one ring is used. 1 = one ring.
  int channels = 1;
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
// Conventions: ReduceScatter and AllGather take `bytes` as the full (unsharded)
// buffer, each rank owning bytes/n; Broadcast/Reduce move `bytes` from/to the
// root. Tree models NCCL's double binary tree for AllReduce (two trees, each
// carrying half the buffer, pipelined in chunks; see pipeline_chunks()); for
// Broadcast/Reduce it is one pipelined binary tree; for the other kinds it
// falls back to Ring (Gather/Scatter: binomial tree). Direct is O(n^2) flows.
std::vector<Phase> decompose(const CollectiveRequest& req, const topology::Topology& topo);

// The concrete algorithm decompose() uses for `req` (resolves Auto: Ring on one
// node; Hierarchical across nodes when every node holds the same number > 1 of
// the ranks; Ring otherwise; Direct for Gather/Scatter). Hierarchical with
// unequal ranks per node falls back to Ring.
Algorithm resolve_algorithm(const CollectiveRequest& req, const topology::Topology& topo);

// Pipelining of Tree and pipelined Broadcast/Reduce: a message of `bytes` is
// cut into k = clamp(ceil(bytes / 1 MiB), 1, 64) chunks; a pipeline of depth d
// then takes d + k - 1 steps of one chunk each.
int pipeline_chunks(double bytes);

// Depth (edges on the longest root-to-leaf path) of NCCL's double binary tree
// over n ranks (the deeper of its two trees; ~log2 n).
int double_binary_tree_depth(int n);

// --- alpha-beta cost formulas (pure; used by Analytic mode) ---
// alpha: per-step latency (worst route latency of the step's flows + per-step
// overhead); bandwidth: per-flow bytes/s of the step's bottleneck, i.e. the
// minimum over the links the step's flows cross of effective bandwidth / flows
// crossing it (= the route's bottleneck bandwidth when no flows share a link).
struct AlphaBeta {
  Time alpha;
  double bandwidth = 0;  // bytes/s per flow; REQUIRES > 0 when bytes > 0
};
// Ring allreduce: 2(n-1)·α + 2(n-1)/n·S/B.
Time ring_allreduce_time(const AlphaBeta& ab, Bytes s, int n);
// Ring reduce-scatter or all-gather of a full buffer S: (n-1)·α + (n-1)/n·S/B.
Time ring_reduce_scatter_time(const AlphaBeta& ab, Bytes s, int n);
// Double binary tree allreduce, k chunks, depth d: reduce then broadcast, each
// (d+k-1) steps moving a chunk of S/(2k) per tree edge: 2(d+k-1)·(α + S/(2k)/B).
// Large S: -> 2·S/(2B) per flow = 2·S/B_rank when a rank's two tree flows share its link;
// small S (k=1): -> 2d·α hop latencies.
Time tree_allreduce_time(const AlphaBeta& ab, Bytes s, int depth, int chunks);
// Hierarchical allreduce, m ranks per node on G nodes: intra-node ring
// reduce-scatter and all-gather 2(m-1)·(α_i + S/(m·B_i)), plus inter-node ring
// allreduce of S/m among equal local ranks 2(G-1)·(α_x + S/(m·G·B_x)).
Time hierarchical_allreduce_time(const AlphaBeta& intra, const AlphaBeta& inter, Bytes s, int per_node, int nodes);
// Parameter server: gather (α_g + S/B_g) then broadcast (α_b + S/B_b), where B is
// the per-flow share at the root: B_root/(n-1), so time ≈ 2·(n-1)·S/B_root.
Time parameter_server_time(const AlphaBeta& gather, const AlphaBeta& bcast, Bytes s);

// Calibrated software cost of collectives (the `network:` section of a profile
// YAML, fitted by `dptwin calibrate` from microbenchmarks). A collective whose
// kind and rank count match a table, with a buffer of S bytes, falls into the
// first regime with S <= up_to; then every algorithm step costs `alpha` more and
// the links of `link_kind` carry `bandwidth_factor` x their effective bandwidth.
// Regimes capture size-dependent behaviour (eager vs rendezvous protocols, cache
// vs DRAM copies, algorithm switches inside MPI/Gloo) that one alpha-beta pair
// averages away. Time of a matched collective, per phase and repeat:
//   route latency + per_step_overhead + alpha + bytes / (bandwidth_factor x B_eff).
// A regime may name the sizes its fit saw (`measured_from`..`measured_to`): a
// buffer between the last measured size of one regime and the first of the
// next is then priced by interpolating, linearly in bytes, the table's prices
// at those two sizes instead of extrapolating either regime's line into the
// gap (a flat small-message regime fitted once flat and once sloped priced a
// 482 KB bucket 3.4 vs 2.7 ms, 256 KiB being its last point; see sim/README).
struct CommRegime {
  double up_to = 0;              // bytes of the collective's buffer; 0 = no upper bound
  Time alpha;                    // added per algorithm step (phase repeat)
  double bandwidth_factor = 1;   // multiplies matched links' effective bandwidth; > 0
  double measured_from = 0;      // smallest buffer its fit saw (bytes; 0 = unknown)
  double measured_to = 0;        // largest buffer its fit saw (bytes; 0 = unknown)
};
struct CommCalibration {
  std::string link_kind;         // topology::to_string(LinkKind) of the scaled links; "" = every link
  std::string collective;        // to_string(CollectiveKind) it applies to; "" = every kind
  int ranks = 0;                 // rank count it was measured at (0 = any); the nearest table wins
  std::vector<CommRegime> regimes;  // ascending up_to; the last one should have up_to = 0
  // The algorithm whose steps the regimes' alphas were fitted per: the one the
  // measured library runs (Gloo's broadcast measured as one fan-out step). A
  // request the table prices runs it, whatever its strategy asked for, so a
  // table is never priced with another algorithm's step count. Unset: the
  // request's own.
  std::optional<Algorithm> algorithm;
};
// The table and regime applying to `req` (nullptr when none): among tables of
// the request's kind (else of every kind), the one whose `ranks` is nearest
// the request's rank count (ties: the smaller); in it the first regime whose
// up_to >= bytes (or is 0), else the last.
const CommRegime* find_comm_regime(const std::vector<CommCalibration>& tables, const CollectiveRequest& req,
                                   int* table_index = nullptr, int* regime_index = nullptr);
// The measured sizes a buffer of `bytes` lies between when it falls in the gap
// between two regimes of `t` that both name their measured sizes: (last size
// of the lower regime, first size of the higher); nullopt otherwise.
std::optional<std::pair<double, double>> comm_regime_gap(const CommCalibration& t, double bytes);
// A price at `bytes` inside `gap` on the line between the prices at its two edges.
Time across_gap(const std::pair<double, double>& gap, double bytes, Time at_first, Time at_second);

struct NetworkOptions {
  NetworkMode mode = NetworkMode::Flow;
  std::vector<CommCalibration> calibration;  // calibrated regimes (empty: datasheet links only)
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
  // REQUIRES: `topo` is finalized and outlives the model.
  NetworkModel(const topology::Topology& topo, NetworkOptions opts);
  // Cost of one collective; cached.
  const CollectiveCost& cost(const CollectiveRequest& req);
  // Alpha-beta time for the same request (independent of mode).
  Time analytic_time(const CollectiveRequest& req) const;
  const topology::Topology& topology() const { return topo_; }
  int64_t cache_hits() const { return hits_; }
  int64_t cache_misses() const { return misses_; }
  const NetworkOptions& options() const { return opts_; }
  // Phases priced so far by max-min solves (a phase whose flow pattern equals
  // one solved before, up to a common scale of bytes, reuses that solution).
  int64_t phase_solves() const { return phase_solves_; }

 private:
  struct PhaseSolution {
    double seconds_per_byte = 0;  // transfer time / largest flow bytes (time scales with bytes)
    Time latency;                 // worst route latency of the phase's flows
    std::vector<std::pair<int, double>> link_bytes_per_byte;
  };
  // analytic_time within the regime its bytes fall in (no gap interpolation).
  Time regime_analytic_time(const CollectiveRequest& req) const;
  CollectiveCost solve_flow(const CollectiveRequest& req);
  CollectiveCost solve_analytic(const CollectiveRequest& req) const;
  AlphaBeta phase_alpha_beta(const Phase& p, const std::vector<double>& capacity, Time extra_alpha) const;
  AlphaBeta phase_alpha_beta(const Phase& p) const { return phase_alpha_beta(p, capacity_, Time::zero()); }
  // Link capacities under the regime applying to `req` (capacity_ when none), and its alpha.
  const std::vector<double>& capacities_for(const CollectiveRequest& req, Time& alpha, std::string& key_suffix) const;
  mutable std::unordered_map<int64_t, std::vector<double>> regime_capacity_;
  void add_link_bytes(const Phase& p, std::vector<double>& acc) const;
  double local_rate_ = 0;
  std::unordered_map<std::string, PhaseSolution> phase_cache_;
  int64_t phase_solves_ = 0;
  const topology::Topology& topo_;
  NetworkOptions opts_;
  std::vector<double> capacity_;
  std::unordered_map<std::string, CollectiveCost> cache_;
  int64_t hits_ = 0, misses_ = 0;
};

// nccl-tests bus bandwidth of an allreduce of `bytes` taking `t`: algbw * 2(n-1)/n.
double allreduce_bus_bandwidth(Bytes bytes, Time t, int ranks);

}  // namespace dptwin::sim
