// sim/flow_solver.cpp — progressive filling with a lazy min-heap of link fair shares.
//
// Algorithm (max-min fairness by progressive filling, Bertsekas & Gallager §6.5):
// every unfrozen flow holds the same rate t; link l saturates when
//   frozen_rate_sum(l) + active(l) * t = capacity(l),  i.e.  t = remaining(l) / active(l).
// The link with the smallest such share is the next bottleneck: its unfrozen
// flows are frozen at that share, which is subtracted from every link on their
// routes. A link's share never decreases when flows freeze elsewhere
// ((rem - s) / (k - 1) >= rem / k whenever s <= rem / k), so a min-heap with
// lazy (versioned) entries finds each bottleneck in O(log L):
// total O(sum of route lengths * log L).
#include "sim/flow_solver.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "core/error.hpp"

namespace dptwin::sim {

namespace {

// Shares within this relative tolerance of the bottleneck freeze together, so a
// symmetric phase (all links equal) is solved in one round.
constexpr double kTieTolerance = 1e-12;

struct HeapEntry {
  double share;
  int link;     // compact link index
  int version;  // entry is stale when it differs from the link's version
  bool operator>(const HeapEntry& o) const { return share > o.share; }
};

// Rates for the flows whose `active[i]` is true (others get 0).
std::vector<double> solve_rates(const std::vector<RoutedFlow>& flows, const std::vector<char>& active,
                                const std::vector<double>& capacity, double local_rate) {
  const int nf = static_cast<int>(flows.size());
  std::vector<double> rate(nf, 0.0);

  // Compact the links actually used: link id -> compact index.
  std::vector<int> compact;  // sized lazily to the largest link id seen
  std::vector<int> used;     // compact -> link id
  std::vector<int> active_count;
  for (int f = 0; f < nf; ++f) {
    if (!active[f]) continue;
    const auto* r = flows[f].route;
    if (r == nullptr || r->empty()) {
      rate[f] = local_rate;
      continue;
    }
    for (int l : *r) {
      DPTWIN_ASSERT(l >= 0 && l < static_cast<int>(capacity.size()), "flow route has an unknown link id");
      if (l >= static_cast<int>(compact.size())) compact.resize(std::max<size_t>(l + 1, compact.size() * 2), -1);
      if (compact[l] < 0) {
        compact[l] = static_cast<int>(used.size());
        used.push_back(l);
        active_count.push_back(0);
      }
      ++active_count[compact[l]];
    }
  }
  const int nl = static_cast<int>(used.size());
  if (nl == 0) return rate;

  // Flows crossing each compact link (CSR layout).
  std::vector<int> start(nl + 1, 0);
  for (int c = 0; c < nl; ++c) start[c + 1] = start[c] + active_count[c];
  std::vector<int> members(start[nl]);
  {
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (int f = 0; f < nf; ++f) {
      if (!active[f] || flows[f].route == nullptr) continue;
      for (int l : *flows[f].route) members[fill[compact[l]]++] = f;
    }
  }

  std::vector<double> remaining(nl);
  std::vector<int> version(nl, 0);
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> heap;
  for (int c = 0; c < nl; ++c) {
    const double cap = capacity[used[c]];
    DPTWIN_ASSERT(cap > 0, "link capacity must be > 0");
    remaining[c] = cap;
    heap.push({cap / active_count[c], c, 0});
  }
  std::vector<char> frozen(nf, 0);
  std::vector<int> touched;

  while (!heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    if (top.version != version[top.link] || active_count[top.link] == 0) continue;
    const double share = top.share;
    // Freeze every link whose share ties with this one (symmetric phases: one round).
    std::vector<int> bottlenecks{top.link};
    while (!heap.empty() && heap.top().share <= share * (1 + kTieTolerance)) {
      const HeapEntry e = heap.top();
      heap.pop();
      if (e.version == version[e.link] && active_count[e.link] > 0) bottlenecks.push_back(e.link);
    }
    touched.clear();
    for (int b : bottlenecks) {
      for (int i = start[b]; i < start[b + 1]; ++i) {
        const int f = members[i];
        if (frozen[f]) continue;
        frozen[f] = 1;
        rate[f] = share;
        for (int l : *flows[f].route) {
          const int c = compact[l];
          remaining[c] -= share;
          --active_count[c];
          touched.push_back(c);
        }
      }
    }
    for (int c : touched) {
      if (active_count[c] <= 0) continue;
      ++version[c];
      // Rounding can leave a hair below the bottleneck share; clamp so shares stay monotone.
      heap.push({std::max(share, remaining[c] / active_count[c]), c, version[c]});
    }
  }
  return rate;
}

}  // namespace

std::vector<double> max_min_rates(const std::vector<RoutedFlow>& flows, const std::vector<double>& capacity,
                                  double local_rate) {
  std::vector<char> active(flows.size(), 1);
  return solve_rates(flows, active, capacity, local_rate);
}

double transfer_seconds(const std::vector<RoutedFlow>& flows, const std::vector<double>& capacity,
                        double local_rate, std::vector<double>* link_bytes) {
  const size_t nf = flows.size();
  if (link_bytes != nullptr) {
    link_bytes->assign(capacity.size(), 0.0);
    for (const auto& f : flows) {
      if (f.route == nullptr) continue;
      for (int l : *f.route) (*link_bytes)[l] += f.bytes;
    }
  }
  std::vector<double> left(nf);
  std::vector<char> active(nf, 0);
  size_t n_active = 0;
  for (size_t i = 0; i < nf; ++i) {
    left[i] = flows[i].bytes;
    if (left[i] > 0) {
      active[i] = 1;
      ++n_active;
    }
  }
  double now = 0;
  // Each round: solve rates, advance to the next completion, retire the flows
  // done by then (relative tolerance so equal flows finish in the same round).
  while (n_active > 0) {
    const std::vector<double> rate = solve_rates(flows, active, capacity, local_rate);
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < nf; ++i) {
      if (!active[i]) continue;
      DPTWIN_ASSERT(rate[i] > 0, "active flow has zero rate");
      dt = std::min(dt, left[i] / rate[i]);
    }
    now += dt;
    for (size_t i = 0; i < nf; ++i) {
      if (!active[i]) continue;
      left[i] -= rate[i] * dt;
      if (left[i] <= flows[i].bytes * 1e-9 || left[i] / rate[i] <= dt * 1e-9) {
        active[i] = 0;
        --n_active;
      }
    }
  }
  return now;
}

}  // namespace dptwin::sim
