// Maximum-weight flow with integer costs (successive shortest paths, primal-dual), the solver
// of the deadline builder's per-round problem (stragglar_deadline.cpp); its own unit
// with its own test (tests/unit/test_min_cost_flow.cpp). Not installed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace stragglar::detail {

// Min-cost flow, integer costs, arcs added per round into reused storage. Arcs are collected as
// a list, then laid out per tail node (CSR, each node's arcs in reverse insertion order) for
// the search loops. Costs are small (|cost| ≤ ~1300 per arc, paths of ≤ 5 arcs), so 32-bit
// ints, and an arc's fields sit together: both hot loops read to/cap/cost of one arc at a time.
class MinCostFlow {
 public:
  void reset(int nodes) {
    nodes_ = nodes;
    ea_.clear();
    eb_.clear();
    ecap_.clear();
    ecost_.clear();
  }
  void add(int a, int b, int cap, long long cost) {
    ea_.push_back(a);
    eb_.push_back(b);
    ecap_.push_back(cap);
    ecost_.push_back(static_cast<int>(cost));
  }
  // After run(): arcs out of `node` as [begin, end) positions; forward arcs carry flow.
  int begin(int node) const { return off_[static_cast<std::size_t>(node)]; }
  int end(int node) const { return off_[static_cast<std::size_t>(node) + 1]; }
  int to(int p) const { return arc_[static_cast<std::size_t>(p)].to; }
  bool forward(int p) const { return fwd_[static_cast<std::size_t>(p)] != 0; }
  // Cost of arc p (a reverse arc: minus its pair's).
  int cost(int p) const { return arc_[static_cast<std::size_t>(p)].cost; }
  // Flow on the forward arc of the pair p belongs to (a reverse arc's residual is that flow).
  int flow_on(int p) const {
    const Arc& a = arc_[static_cast<std::size_t>(p)];
    return forward(p) ? arc_[static_cast<std::size_t>(a.rev)].cap : a.cap;
  }

  // Maximum-weight flow s → t (stops when the cheapest augmenting path has cost ≥ 0). Nodes
  // must be numbered so that every forward arc goes from a lower to a higher index (a DAG),
  // which gives the initial potentials in one pass.
  //
  // Nodes in [u0, u1) are "unit" nodes: their only out-arc is one to t, added after all arcs
  // into them. Their inflow is ≤ 1, so of their reverse arcs at most one has residual capacity
  // (the one carrying their inflow, kept in in_arc_): both searches look at that arc and the arc
  // to t only, instead of scanning every reverse arc (half of all arcs here). The result is the
  // same as a full scan: the skipped arcs have no capacity.
  void run(int s, int t, int u0, int u1);

 private:
  struct Arc {
    int to, cap, cost, rev;  // rev: position of the paired arc
  };

  void build();

  // One unit along zero-reduced-cost arcs (iterative DFS with current-arc pointers).
  // A node left without reaching t is marked dead for the rest of the phase (zero-cost cycles
  // make that approximate; the next Dijkstra finds whatever it missed).
  bool augment(int s, int t);

  int nodes_ = 0;
  std::vector<int> ea_, eb_, ecap_, ecost_;
  std::vector<int> off_, fill_;
  std::vector<Arc> arc_;
  std::vector<char> fwd_;
  std::vector<int> pos_[2];
  std::vector<int> pi_, dist_;
  std::vector<int> cur_, path_;
  // Per node: the stamp of the augment that last put it on the path, or kDead once it was left
  // without reaching t in this phase (reset every phase); "usable" is mark < current stamp.
  static constexpr int kDead = std::numeric_limits<int>::max();
  std::vector<int> mark_;
  int stamp_ = 0;
  std::vector<std::vector<int>> buckets_;
  std::size_t used_buckets_ = 0;
  // A unit node with arcs (a receiver that is busy this round has none and is unreachable).
  bool is_unit(int u) const { return u >= u0_ && u < u1_ && off_[static_cast<std::size_t>(u)] < off_[static_cast<std::size_t>(u) + 1]; }

  int u0_ = 0, u1_ = 0;
  std::vector<int> in_arc_;
};

}  // namespace stragglar::detail
