// StragglAR `allreduce` phase for n that is not a power of two (the paper's appendix
// "Non-Power-of-2" gives only a greedy matching method, ported in stragglar_matching.cpp).
//
// Model (docs/design.md, single port): per round a rank sends ≤ 1 and receives ≤ 1 transfer. Unlike
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
#include "synth/holdings.hpp"
#include "synth/min_cost_flow.hpp"
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
    Holdings held(m, nchunks);
    std::vector<int> active;                                      // born, not on every rank
    std::vector<Round> rounds;
    std::vector<int> nact(static_cast<std::size_t>(m));
    std::vector<int> sender_arc_from, sender_chunk;
    MinCostFlow f;
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
        for (int v = 0; v < m; ++v) nact[static_cast<std::size_t>(v)] += held.holds(v, c) ? 1 : 0;
      for (int x = 0; x < n; ++x) {
        if (x == busy || (x == sigma && !sigma_free)) continue;
        if (x != sigma && nact[static_cast<std::size_t>(x)] == 0) continue;
        f.add(0, S0 + x, 1, 0);
        for (int i = 0; i < C; ++i)
          if (x == sigma || held.holds(x, active[static_cast<std::size_t>(i)]))
            f.add(S0 + x, CI + i, 1, 0);
      }
      const int k = R - 1 - t;  // rounds left after this one
      const int T0 = std::min(m, hmin(k, t + 1)), T1 = std::min(m, hmin(k - 1, t + 1)),
                T2 = std::min(m, hmin(k - 2, t + 1));
      for (int i = 0; i < C; ++i) {
        const int c = active[static_cast<std::size_t>(i)];
        const int h = held.holders(c);
        const int t0 = std::max(h, T0), t1 = std::max(t0, T1), t2 = std::max(t1, T2);
        if (t0 > h) f.add(CI + i, CO + i, t0 - h, -kTier[0]);
        if (t1 > t0) f.add(CI + i, CO + i, t1 - t0, -kTier[1]);
        if (t2 > t1) f.add(CI + i, CO + i, t2 - t1, -kTier[2]);
        f.add(CI + i, CO + i, n, 0);
        for (int v = 0; v < m; ++v) {
          if (v == busy || held.holds(v, c)) continue;
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
            held.receive(v - V0, c);
          }
        }
      }
      if (busy >= 0) {
        held.receive(busy, t);
        active.push_back(t);
      }
      held.end_round();
      std::erase_if(active, [&](int c) { return held.holders(c) >= m; });
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
