// StragglAR `allreduce` phase for n that is not a power of two (issue #5; the paper's appendix
// "Non-Power-of-2" gives only a greedy matching method, ported in stragglar_matching.cpp).
//
// Model (DESIGN.md, single port): per round a rank sends ≤ 1 and receives ≤ 1 transfer. Unlike
// the paper's undirected matchings, sends need not be paired with receives (u→v, v→w is
// allowed).
//
// Per round t: the straggler pairing (t mod m ↔ σ on chunk t) is fixed; the copies of the round
// are a min-cost flow  source → free sender s → chunk c (s holds c) → free receiver v (v lacks
// c) → sink, every arc capacity 1 except the chunk arcs. Any holder of c can serve any
// non-holder of c, so every integral flow decomposes into a valid set of transfers, and the
// flow maximises a weight:
//   * every useful receive is worth kBase (dominant): the receive slots are the tight resource —
//     with N = 2^⌈log2 n⌉ a schedule at the bound has only N − n spare receive slots in total
//     (docs/schedules.md);
//   * deadline tiers on the chunk arc c_in → c_out: with k rounds left after this one, chunk c
//     must have at least hmin(k) non-straggler holders after this round to still finish in time by
//     doubling (σ helps from round K·m on). The first hmin(k) − h deliveries of c earn
//     kTier[0], the next ones up to hmin(k−1) kTier[1], then kTier[2]; beyond that 0;
//   * a receiver that holds no active chunk yet earns kFresh (it becomes a new sender: early
//     rounds are pure doubling, the paper's "chunk-free ranks"), and every active chunk the
//     receiver already holds costs kPerActive: spreading the active chunks evenly keeps every
//     rank able to send something useful in the next rounds (this one term took the number of
//     even n ≤ 256 at the bound with a single seed from ~15 to 61);
//   * a small pseudo-random tie-break per (seed, round, chunk, receiver).
// Solved by primal–dual successive shortest paths (Dijkstra with potentials, blocking flow on
// the zero-reduced-cost arcs). Attempts with different seeds; the shortest schedule wins. For
// K = 1 and even n ≤ 256 a table (kBestSeed, produced offline by trying seeds)
// gives the first seed that reached our best count, so synthesis of those takes one attempt.
//
// Deterministic: integer costs and a hash-based tie-break, no std distributions.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar::detail {

namespace {

constexpr long long kBase = 1000;
constexpr long long kTier[3] = {200, 50, 10};
constexpr long long kFresh = 20;
constexpr long long kPerActive = 20;
constexpr std::uint64_t kNoise = 8;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Min-cost flow, integer costs, arcs added per round into reused storage. Arcs are collected as
// a list, then laid out per tail node (CSR, each node's arcs in reverse insertion order) for
// the search loops. Costs are small (|cost| ≤ ~1300 per arc, paths of ≤ 5 arcs), so 32-bit
// ints, and an arc's fields sit together: both hot loops read to/cap/cost of one arc at a time.
class Flow {
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
  void run(int s, int t, int u0, int u1) {
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

 private:
  struct Arc {
    int to, cap, cost, rev;  // rev: position of the paired arc
  };

  void build() {
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

  // One unit along zero-reduced-cost arcs (iterative DFS with current-arc pointers).
  // A node left without reaching t is marked dead for the rest of the phase (zero-cost cycles
  // make that approximate; the next Dijkstra finds whatever it missed).
  bool augment(int s, int t) {
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

struct Attempt {
  int n, m, nchunks, R;  // R: target rounds (the bound) — deadlines are measured against it
  std::uint64_t seed;
  int cap;  // give up after this many rounds

  // Rounds of pure doubling from h non-straggler holders before round tt until all m hold it.
  int need(int h, int tt) const {
    int k = 0;
    while (h < m) {
      h += h + (tt >= nchunks ? 1 : 0);
      ++tt;
      ++k;
    }
    return k;
  }
  // Fewest holders before round tt from which k rounds of doubling reach m (m + 1: impossible).
  int hmin(int k, int tt) const {
    if (k < 0) return m + 1;
    int lo = 1, hi = m;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (need(mid, tt) <= k) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  std::optional<std::vector<Round>> run() const {
    const int sigma = n - 1;
    std::vector<std::vector<char>> has(static_cast<std::size_t>(m), std::vector<char>(static_cast<std::size_t>(nchunks), 0));
    std::vector<int> hold(static_cast<std::size_t>(nchunks), 0);  // non-straggler holders
    std::vector<int> active;                                      // born, not on every rank
    std::vector<Round> rounds;
    std::vector<int> nact(static_cast<std::size_t>(m));
    std::vector<int> sender_arc_from, sender_chunk;
    std::vector<std::pair<int, int>> got;
    Flow f;
    for (int t = 0;; ++t) {
      if (t >= nchunks && active.empty()) return rounds;
      if (t >= cap) return std::nullopt;
      Round& round = rounds.emplace_back();
      const int busy = t < nchunks ? t % m : -1;
      const bool sigma_free = t >= nchunks;
      if (busy >= 0) add_straggler_exchange(round, n, t);
      const int C = static_cast<int>(active.size());
      // Nodes: 0 source, 1..n senders (rank x → 1 + x), chunk in/out, receivers, sink (last).
      const int S0 = 1, CI = S0 + n, CO = CI + C, V0 = CO + C, sink = V0 + m;
      f.reset(sink + 1);
      std::fill(nact.begin(), nact.end(), 0);
      for (int c : active)
        for (int v = 0; v < m; ++v) nact[static_cast<std::size_t>(v)] += has[static_cast<std::size_t>(v)][static_cast<std::size_t>(c)];
      for (int x = 0; x < n; ++x) {
        if (x == busy || (x == sigma && !sigma_free)) continue;
        if (x != sigma && nact[static_cast<std::size_t>(x)] == 0) continue;
        f.add(0, S0 + x, 1, 0);
        for (int i = 0; i < C; ++i)
          if (x == sigma || has[static_cast<std::size_t>(x)][static_cast<std::size_t>(active[static_cast<std::size_t>(i)])])
            f.add(S0 + x, CI + i, 1, 0);
      }
      const int k = R - 1 - t;  // rounds left after this one
      const int T0 = std::min(m, hmin(k, t + 1)), T1 = std::min(m, hmin(k - 1, t + 1)),
                T2 = std::min(m, hmin(k - 2, t + 1));
      for (int i = 0; i < C; ++i) {
        const int c = active[static_cast<std::size_t>(i)];
        const int h = hold[static_cast<std::size_t>(c)];
        const int t0 = std::max(h, T0), t1 = std::max(t0, T1), t2 = std::max(t1, T2);
        if (t0 > h) f.add(CI + i, CO + i, t0 - h, -kTier[0]);
        if (t1 > t0) f.add(CI + i, CO + i, t1 - t0, -kTier[1]);
        if (t2 > t1) f.add(CI + i, CO + i, t2 - t1, -kTier[2]);
        f.add(CI + i, CO + i, n, 0);
        for (int v = 0; v < m; ++v) {
          if (v == busy || has[static_cast<std::size_t>(v)][static_cast<std::size_t>(c)]) continue;
          long long w = kBase + (nact[static_cast<std::size_t>(v)] == 0 ? kFresh : 0) -
                        kPerActive * nact[static_cast<std::size_t>(v)];
          w += static_cast<long long>(
              mix(seed * 0x100000001b3ULL ^ mix((static_cast<std::uint64_t>(t) << 40) ^
                                                 (static_cast<std::uint64_t>(c) << 20) ^ static_cast<std::uint64_t>(v))) %
              kNoise);
          f.add(CO + i, V0 + v, 1, -w);
        }
      }
      for (int v = 0; v < m; ++v)
        if (v != busy) f.add(V0 + v, sink, 1, 0);
      f.run(0, sink, V0, sink);

      // Decompose: per chunk, its senders and its receivers, paired in order.
      got.clear();
      for (int i = 0; i < C; ++i) {
        sender_arc_from.clear();
        // senders of chunk i: reverse arcs out of CI + i that carry flow back to a sender node
        for (int a = f.begin(CI + i); a < f.end(CI + i); ++a) {
          const int u = f.to(a);
          if (u >= S0 && u < CI && !f.forward(a) && f.flow_on(a) > 0) sender_arc_from.push_back(u - S0);
        }
        std::size_t j = 0;
        const int c = active[static_cast<std::size_t>(i)];
        for (int a = f.begin(CO + i); a < f.end(CO + i); ++a) {
          const int v = f.to(a);
          if (v >= V0 && v < sink && f.forward(a) && f.flow_on(a) > 0) {
            const int from = sender_arc_from.at(j++);
            round.push_back({from, v - V0, {c}, TransferOp::copy});
            got.emplace_back(v - V0, c);
          }
        }
      }
      for (auto [v, c] : got) {
        has[static_cast<std::size_t>(v)][static_cast<std::size_t>(c)] = 1;
        ++hold[static_cast<std::size_t>(c)];
      }
      if (busy >= 0) {
        has[static_cast<std::size_t>(busy)][static_cast<std::size_t>(t)] = 1;
        ++hold[static_cast<std::size_t>(t)];
        active.push_back(t);
      }
      std::erase_if(active, [&](int c) { return hold[static_cast<std::size_t>(c)] >= m; });
    }
  }
};

// Offline search with stragglar_flow_attempt (the disabled test `StragglarSynth.DISABLED_SeedSearch`
// does the basic part): for K = 1 and even n (index n/2), the first seed that reached the best
// round count among seeds 1..64 (n ≤ 64; up to 1500 for those still above the bound), 1..32
// (n ≤ 128; up to 200 for those above), 1..8 (n > 128; up to 30 for those above). 0 = not tabled (powers of two use
// Algorithm 1). Only the n the near-power-of-two builder does not take still reach this table
// (even n < 2N/3: 6, 10, 18, 20, 34–40, 66–82, 130–168); the other entries are kept as measured.
constexpr int kTableSize = 129;
constexpr std::uint64_t kBestSeed[kTableSize] = {
    0, 0, 0, 1, 0, 1, 1, 6, 0, 1, 1, 2, 2, 1, 16, 236, 0, 1, 1, 1, 1, 1, 1, 1, 1, 16, 7, 69, 75,
    1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5, 7, 1, 15, 1, 10, 10, 54, 58, 18,
    1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1,
    2, 1, 1, 1, 1, 1, 3, 2, 2, 3, 1, 2, 2, 1, 3, 15, 2, 2, 4, 12, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 0,
};

}  // namespace

std::optional<std::vector<Round>> stragglar_flow_attempt(int n, int pipeline, std::uint64_t seed, int cap) {
  const int m = n - 1;
  const Attempt a{n, m, pipeline * m, pipeline * m + ceil_log2(n) - 1, seed, cap};
  return a.run();
}

std::optional<std::vector<Round>> stragglar_deadline_rounds(int n, int pipeline, int target_rounds) {
  require(n >= 2 && pipeline >= 1, "stragglar_deadline_rounds: n = " + std::to_string(n) +
                                       ", pipeline = " + std::to_string(pipeline) + ", expected n >= 2, pipeline >= 1");
  const int m = n - 1;
  std::optional<std::vector<Round>> best;
  std::vector<std::uint64_t> seeds;
  if (pipeline == 1 && n % 2 == 0 && n / 2 < kTableSize && kBestSeed[n / 2] != 0) {
    // The best of the offline searches: one attempt.
    seeds.push_back(kBestSeed[n / 2]);
  } else {
    // Work of one attempt ~ rounds · m · active chunks; keep the untabled search bounded.
    const long long work = static_cast<long long>(pipeline) * m * m;
    const int extra = work <= 2000 ? 16 : work <= 20000 ? 4 : 1;
    for (int s = 1; s <= extra; ++s) seeds.push_back(static_cast<std::uint64_t>(s));
  }
  for (std::uint64_t seed : seeds) {
    const int cap = best ? static_cast<int>(best->size()) : 2 * pipeline * m + 4 * ceil_log2(n) + 16;
    if (auto r = stragglar_flow_attempt(n, pipeline, seed, cap)) best = std::move(r);
    if (best && static_cast<int>(best->size()) <= target_rounds) break;
  }
  if (best) canonicalize(*best);
  return best;
}

}  // namespace stragglar::detail
