#include "synth/min_cost_flow.hpp"

namespace stragglar::detail {

void MinCostFlow::run(int s, int t, int u0, int u1) {
  build();
  u0_ = u0;
  u1_ = u1;
  in_arc_.assign(static_cast<std::size_t>(nodes_), -1);
  const int nodes = nodes_;
  constexpr int kInf = std::numeric_limits<int>::max() / 4;
  pi_.assign(static_cast<std::size_t>(nodes), kInf);
  pi_[static_cast<std::size_t>(s)] = 0;
  for (int u = 0; u < nodes; ++u) {
    if (pi_[static_cast<std::size_t>(u)] == kInf) continue;
    for (int p = begin(u); p < end(u); ++p) {
      const Arc& a = arc_[static_cast<std::size_t>(p)];
      if (a.cap > 0) pi_[static_cast<std::size_t>(a.to)] = std::min(pi_[static_cast<std::size_t>(a.to)], pi_[static_cast<std::size_t>(u)] + a.cost);
    }
  }
  for (auto& p : pi_)
    if (p == kInf) p = 0;  // unreachable: never on a path
  if (pi_[static_cast<std::size_t>(t)] >= 0) return;
  dist_.resize(static_cast<std::size_t>(nodes));
  cur_.resize(static_cast<std::size_t>(nodes));
  mark_.resize(static_cast<std::size_t>(nodes));
  stamp_ = 0;
  while (true) {
    // Dijkstra on reduced costs (non-negative on residual arcs; small integers, so Dial's
    // buckets). Stops once t is settled: later nodes get dist ≥ dist(t), clamped below.
    std::fill(dist_.begin(), dist_.end(), kInf);
    dist_[static_cast<std::size_t>(s)] = 0;
    for (std::size_t d = 0; d < used_buckets_; ++d) buckets_[d].clear();
    if (buckets_.empty()) buckets_.resize(1);
    used_buckets_ = 1;
    buckets_[0].push_back(s);
    // Raw pointers: the vectors do not change size here, and locals let the compiler keep
    // them in registers (through `this` it reloads them after every store).
    const int* off = off_.data();
    const Arc* arc = arc_.data();
    const int* pi = pi_.data();
    int* dist = dist_.data();
    const int* in_arc = in_arc_.data();
    const auto relax = [&](int base, const Arc& a) {
      const int v = a.to;
      const int nd = base + a.cost - pi[v];
      if (nd < dist[v]) {
        dist[v] = nd;
        const auto b = static_cast<std::size_t>(nd);
        if (b >= buckets_.size()) buckets_.resize(b + 1);
        used_buckets_ = std::max(used_buckets_, b + 1);
        buckets_[b].push_back(v);
      }
    };
    // Nodes at distance ≥ dist(t) need not be expanded: what they reach gets dist ≥ dist(t),
    // and the potential update clamps at dist(t).
    for (std::size_t d = 0; d < used_buckets_ && static_cast<int>(d) < dist[t]; ++d) {
      for (std::size_t bi = 0; bi < buckets_[d].size(); ++bi) {
        const int u = buckets_[d][bi];
        if (dist[u] != static_cast<int>(d)) continue;
        const int base = static_cast<int>(d) + pi[u];
        if (is_unit(u)) {
          if (arc[off[u]].cap > 0) relax(base, arc[off[u]]);
          if (in_arc[u] >= 0) relax(base, arc[in_arc[u]]);
          continue;
        }
        for (const Arc *a = arc + off[u], *e = arc + off[u + 1]; a < e; ++a)
          if (a->cap > 0) relax(base, *a);
      }
    }
    const int dt = dist_[static_cast<std::size_t>(t)];
    if (dt >= kInf) return;
    for (int v = 0; v < nodes; ++v) pi_[static_cast<std::size_t>(v)] += std::min(dist_[static_cast<std::size_t>(v)], dt);
    if (pi_[static_cast<std::size_t>(t)] - pi_[static_cast<std::size_t>(s)] >= 0) return;  // no profit left
    // Blocking flow on the arcs of reduced cost 0.
    for (int v = 0; v < nodes; ++v) {
      cur_[static_cast<std::size_t>(v)] = begin(v);
      mark_[static_cast<std::size_t>(v)] = 0;
    }
    while (augment(s, t)) {
    }
  }
}

void MinCostFlow::build() {
  const auto arcs = 2 * ea_.size();
  off_.assign(static_cast<std::size_t>(nodes_) + 1, 0);
  for (std::size_t k = 0; k < ea_.size(); ++k) {
    ++off_[static_cast<std::size_t>(ea_[k]) + 1];
    ++off_[static_cast<std::size_t>(eb_[k]) + 1];
  }
  for (int u = 0; u < nodes_; ++u) off_[static_cast<std::size_t>(u) + 1] += off_[static_cast<std::size_t>(u)];
  fill_.assign(off_.begin(), off_.end() - 1);
  arc_.resize(arcs);
  fwd_.resize(arcs);
  pos_[0].resize(ea_.size());
  pos_[1].resize(ea_.size());
  // Arc ids 2k (forward) and 2k+1 (reverse) in reverse id order: each node's list starts
  // with its most recently added arc (the order of a linked list with head insertion).
  for (std::size_t id = arcs; id-- > 0;) {
    const std::size_t k = id / 2;
    const bool f = (id & 1U) == 0;
    const int tail = f ? ea_[k] : eb_[k];
    const auto p = static_cast<std::size_t>(fill_[static_cast<std::size_t>(tail)]++);
    arc_[p] = Arc{f ? eb_[k] : ea_[k], f ? ecap_[k] : 0, f ? ecost_[k] : -ecost_[k], 0};
    fwd_[p] = f ? 1 : 0;
    pos_[id & 1U][k] = static_cast<int>(p);
  }
  for (std::size_t k = 0; k < ea_.size(); ++k) {
    arc_[static_cast<std::size_t>(pos_[0][k])].rev = pos_[1][k];
    arc_[static_cast<std::size_t>(pos_[1][k])].rev = pos_[0][k];
  }
}

bool MinCostFlow::augment(int s, int t) {
  const int* off = off_.data();
  Arc* arc = arc_.data();
  const int* pi = pi_.data();
  int* mark = mark_.data();
  int* cur = cur_.data();
  path_.clear();
  const int stamp = ++stamp_;
  int u = s;
  mark[s] = stamp;
  while (u != t) {
    int& p = cur[u];
    const int e = off[u + 1];
    const int pu = pi[u];
    const auto admissible = [&](const Arc& a) {
      return a.cap > 0 && a.cost + pu == pi[a.to] && mark[a.to] < stamp;
    };
    if (is_unit(u)) {
      // The arc to t first, then the one reverse arc with capacity, if any and not passed.
      if (p == off[u] && !admissible(arc[p])) ++p;
      if (p > off[u]) {
        const int in = in_arc_[static_cast<std::size_t>(u)];
        if (in >= p && admissible(arc[in])) p = in;
        else p = e;
      }
    } else {
      for (; p < e; ++p)
        if (admissible(arc[p])) break;
    }
    if (p >= e) {
      mark[u] = kDead;
      if (path_.empty()) return false;
      u = arc[arc[path_.back()].rev].to;
      path_.pop_back();
      continue;
    }
    path_.push_back(p);
    u = arc[p].to;
    mark[u] = stamp;
  }
  for (int p : path_) {
    --arc[p].cap;
    ++arc[arc[p].rev].cap;
    // A unit node is only entered by an arc into it (t ends the path), so entering sets its new
    // inflow arc; leaving it along the old inflow's reverse arc needs no update after that.
    const int v = arc[p].to;
    if (v >= u0_ && v < u1_) in_arc_[static_cast<std::size_t>(v)] = arc[p].rev;
  }
  return true;
}

}  // namespace stragglar::detail
