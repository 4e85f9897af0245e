// StragglAR `allreduce` phase at the round bound n + ⌈log2 n⌉ − 2 for K = 1 and n in the upper
// third below a power of two: with L = ⌈log2 n⌉, N = 2^L, every n with
// 3n ≥ 2N + 3 − L except 3, 6, 11, 21 — e.g. 84..127, 169..255, 340..511. Algorithm 1 (paper
// §3.1, stragglar_pow2.cpp) is the case n = N; this builder keeps its structure and makes room
// for the N − n ranks that do not exist. Other n: the min-cost flow (stragglar_deadline.cpp).
//
// Why this shape (docs/schedules.md, "Why non-power-of-2 n is hard"): a schedule at the bound has
// only N − n spare receive slots, so nearly every free rank receives and sends a useful chunk in
// every round. Algorithm 1's steady state does exactly that: a chunk born in round c (its partner
// ↔ σ) doubles its holders for L − 1 rounds — 1, 2, …, N/2 — and completes at age L, when its
// N/2 holders ("P") serve the ranks that still lack it ("Q"). With m = n − 1 < N − 1 ranks, the
// holders of the L live chunks (N − 1 of them) overlap on exactly N − n ranks, which hold the
// oldest chunk and one younger one ("double" ranks). Counting senders shows the scheme stays
// perfect only if
//   * every rank holds at most one "younger" chunk (age < L) and sends it, so every younger
//     chunk doubles;
//   * the rank paired with σ in round g holds the chunk completing in g (born g − L) and no
//     younger one — so it may only receive chunks c ≤ g − L before round g (the paper's
//     "critical window", appendix C);
//   * double ranks never pair with σ again. They are made in round L − 1 from ranks that already
//     paired (0..L − 2) and, for the e = N − n − (L − 1) more that are needed, from "donor" ranks
//     L..L + e − 1, which hand their ReduceScatter result to ranks m − e..m − 1 in round 0 (idle
//     then but for rank 0): those pair with σ twice, the donors never. (3n ≥ 2N + 3 − L is
//     exactly "the donors and their recipients are different ranks".)
// Per round the only choice is which receiver gets which younger chunk: a bipartite matching
// (receivers × the chunks' doubling slots) under those rules — donors first while the early
// rounds have idle receivers, then tightest receivers first, ranks that would become double
// last. In the tail (rounds ≥ n − 1) σ is free and also sends the last chunk, which then
// completes L − 1 rounds after it is born.
//
// No proof that every round's matching exists: the builder checks every rule and every transfer
// as it goes and returns nullopt if one fails (the caller then uses the min-cost flow). The test
// `NearPowerOfTwoBuilderReachesTheBound` pins for which n ≤ 256 it succeeds, and verifies.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "synth/holdings.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar::detail {

namespace {

// Receivers × younger-chunk slots: augmenting paths (Kuhn), chunk capacities = doubling slots.
class SlotMatching {
 public:
  SlotMatching(const std::vector<int>& slots, const std::vector<std::vector<int>>& allowed)
      : slots_(slots), allowed_(allowed), owner_(slots.size()), match_(allowed.size(), -1) {}

  bool assign(int v) {
    seen_.assign(slots_.size(), 0);
    return try_assign(v);
  }
  int slot_of(int v) const { return match_[static_cast<std::size_t>(v)]; }  // index into `younger`, or -1
  int load(int z) const { return static_cast<int>(owner_[static_cast<std::size_t>(z)].size()); }

 private:
  bool try_assign(int v) {
    for (int z : allowed_[static_cast<std::size_t>(v)]) {
      auto& owners = owner_[static_cast<std::size_t>(z)];
      if (seen_[static_cast<std::size_t>(z)]) continue;
      seen_[static_cast<std::size_t>(z)] = 1;
      if (static_cast<int>(owners.size()) < slots_[static_cast<std::size_t>(z)]) {
        owners.push_back(v);
        match_[static_cast<std::size_t>(v)] = z;
        return true;
      }
      // Move one owner w of z elsewhere (appends to another list only: z is seen), then take its
      // place. Indexing, not iterators, so the loop does not depend on that.
      for (std::size_t k = 0; k < owners.size(); ++k) {
        const int w = owners[k];
        if (try_assign(w)) {
          owners.erase(owners.begin() + static_cast<std::ptrdiff_t>(k));
          owners.push_back(v);
          match_[static_cast<std::size_t>(v)] = z;
          return true;
        }
      }
    }
    return false;
  }

  const std::vector<int>& slots_;
  const std::vector<std::vector<int>>& allowed_;
  std::vector<std::vector<int>> owner_;  // per younger chunk (index), its receivers
  std::vector<int> match_;               // per receiver, younger chunk index or -1
  std::vector<char> seen_;
};

}  // namespace

std::optional<std::vector<Round>> stragglar_near_pow2_rounds(int n) {
  if (n < 3) return std::nullopt;
  const int m = n - 1, sigma = n - 1, L = ceil_log2(n), N = 1 << L;
  const int T = m + L - 1;  // the bound
  // Donors: e = N − n − (L − 1) double ranks more than ranks 0..L − 2 can provide. Ranks
  // L..L + e − 1 hand their ReduceScatter result (the non-stragglers' partial sum of their chunk)
  // to ranks m − e..m − 1 in round 0, where every rank but 0 is idle anyway: the recipients pair
  // with σ for those chunks instead (so twice), and the donors never pair with σ and can be
  // double ranks.
  const int e = std::max(0, N - n - (L - 1));
  if (L + e > m - e) return std::nullopt;
  std::vector<int> partner(static_cast<std::size_t>(m));  // who pairs with σ in round r < m
  std::iota(partner.begin(), partner.end(), 0);
  for (int i = 0; i < e; ++i) partner[static_cast<std::size_t>(L + i)] = m - e + i;
  std::vector<std::vector<int>> pairs_at(static_cast<std::size_t>(m));  // per rank, its rounds with σ
  for (int r = 0; r < m; ++r) pairs_at[static_cast<std::size_t>(partner[static_cast<std::size_t>(r)])].push_back(r);
  constexpr int kNever = std::numeric_limits<int>::max();
  const auto next_pairing = [&](int v, int r) {  // v's first round with σ after round r
    for (int g : pairs_at[static_cast<std::size_t>(v)])
      if (g > r) return g;
    return kNever;
  };
  Holdings held(m, m);
  const auto holds = [&](int v, int c) { return held.holds(v, c); };

  std::vector<Round> rounds;
  rounds.reserve(static_cast<std::size_t>(T));
  std::vector<int> younger, ychunk(static_cast<std::size_t>(m)), slots, Q, candidates;
  std::vector<char> sent(static_cast<std::size_t>(n));
  std::vector<std::vector<int>> allowed(static_cast<std::size_t>(m));
  for (int r = 0; r < T; ++r) {
    const int busy = r < m ? partner[static_cast<std::size_t>(r)] : -1;
    const int oldest = r - L, next_oldest = r + 1 - L;
    // Live chunks: born (c < r) and not on every rank. Only the oldest may be older than L − 1.
    younger.clear();
    for (int c = 0; c < std::min(r, m); ++c) {
      if (held.holders(c) >= m) continue;
      if (c < oldest) return std::nullopt;  // overdue: the scheme broke
      if (c > oldest) younger.push_back(c);
    }
    const int Y = static_cast<int>(younger.size());
    // Each rank holds ≤ 1 younger chunk (it must send it); the busy rank none.
    std::fill(ychunk.begin(), ychunk.end(), -1);
    for (int i = 0; i < Y; ++i)
      for (int v = 0; v < m; ++v)
        if (holds(v, younger[static_cast<std::size_t>(i)])) {
          if (ychunk[static_cast<std::size_t>(v)] >= 0 || v == busy) return std::nullopt;
          ychunk[static_cast<std::size_t>(v)] = younger[static_cast<std::size_t>(i)];
        }
    // Doubling slots; in the tail σ adds one to the last chunk; never more than still lack it.
    slots.assign(static_cast<std::size_t>(Y), 0);
    for (int i = 0; i < Y; ++i) {
      const int c = younger[static_cast<std::size_t>(i)];
      const int h = held.holders(c);
      slots[static_cast<std::size_t>(i)] = std::min(h + (r >= m && c == m - 1 ? 1 : 0), m - h);
    }
    // Q: every rank that lacks the oldest chunk gets it now (it completes at age L).
    const bool oldest_live = oldest >= 0 && held.holders(oldest) < m;
    const auto in_q = [&](int v) { return oldest_live && !holds(v, oldest); };
    Q.clear();
    for (int v = 0; v < m; ++v)
      if (in_q(v)) {
        if (v == busy) return std::nullopt;
        Q.push_back(v);
      }
    // Who may receive which younger chunk (indices into `younger`, oldest first).
    candidates.clear();
    for (int v = 0; v < m; ++v) {
      auto& a = allowed[static_cast<std::size_t>(v)];
      a.clear();
      if (v == busy || in_q(v)) continue;
      const int y = ychunk[static_cast<std::size_t>(v)], g = next_pairing(v, r);
      for (int i = 0; i < Y; ++i) {
        const int z = younger[static_cast<std::size_t>(i)];
        if (holds(v, z)) continue;
        if (y >= 0) {
          // v holds a younger chunk y, so receiving z makes it a double rank: only if it never
          // pairs with σ again and one of the two is the chunk that is oldest next round.
          const bool pairs_again = g != kNever;
          const bool keeps_next_oldest = y == next_oldest || z == next_oldest;
          if (pairs_again || !keeps_next_oldest) continue;
        }
        if (g != kNever && z > g - L) continue;  // critical window: v pairs with σ in round g
        a.push_back(i);
      }
      if (!a.empty()) candidates.push_back(v);
    }
    // Donors first while the early rounds still have idle receivers (a double rank must
    // hold a chunk by round L − 1), then the tightest (fewest choices, soonest pairing with σ);
    // ranks that would become double only when the others cannot fill the slots.
    const auto tightness = [&](int v) {
      const int g = next_pairing(v, r);
      const bool early_donor = g == kNever && ychunk[static_cast<std::size_t>(v)] < 0 && r < L - 1 && v >= L;
      return std::tuple{early_donor ? 0 : 1, allowed[static_cast<std::size_t>(v)].size(), g};
    };
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return tightness(a) < tightness(b); });
    std::stable_partition(candidates.begin(), candidates.end(), [&](int v) { return ychunk[static_cast<std::size_t>(v)] < 0; });
    const int need = std::accumulate(slots.begin(), slots.end(), 0);
    SlotMatching matching(slots, allowed);
    int filled = 0;
    for (int v : candidates) {
      if (filled >= need) break;
      if (matching.assign(v)) ++filled;
    }
    for (int i = 0; i < Y; ++i)
      if (matching.load(i) < slots[static_cast<std::size_t>(i)]) return std::nullopt;

    Round& round = rounds.emplace_back();
    if (busy >= 0) add_straggler_exchange(round, n, r, busy);
    // Donors: the copied chunk is the non-stragglers' partial sum (the ReduceScatter result),
    // which is exactly what the recipient's reduce with σ in round L + i needs.
    if (r == 0)
      for (int i = 0; i < e; ++i) round.push_back({L + i, m - e + i, {L + i}, TransferOp::copy});
    // Senders: the holders of each younger chunk in rank order (σ last), then for the oldest
    // the holders left over. Any holder may serve any receiver of the same chunk.
    std::fill(sent.begin(), sent.end(), 0);
    for (int i = 0; i < Y; ++i) {
      const int z = younger[static_cast<std::size_t>(i)];
      std::vector<int> receivers;
      for (int v : candidates)
        if (matching.slot_of(v) == i) receivers.push_back(v);
      std::sort(receivers.begin(), receivers.end());
      std::vector<int> senders;
      for (int u = 0; u < m; ++u)
        if (u != busy && holds(u, z)) senders.push_back(u);
      if (r >= m && z == m - 1) senders.push_back(sigma);
      if (senders.size() < receivers.size()) return std::nullopt;
      for (std::size_t k = 0; k < receivers.size(); ++k) {
        sent[static_cast<std::size_t>(senders[k])] = 1;
        round.push_back({senders[k], receivers[k], {z}, TransferOp::copy});
        held.receive(receivers[k], z);
      }
    }
    if (!Q.empty()) {
      std::vector<int> senders;
      for (int u = 0; u < m; ++u)
        if (u != busy && !sent[static_cast<std::size_t>(u)] && holds(u, oldest)) senders.push_back(u);
      if (r >= m && !sent[static_cast<std::size_t>(sigma)]) senders.push_back(sigma);
      if (senders.size() < Q.size()) return std::nullopt;
      for (std::size_t k = 0; k < Q.size(); ++k) {
        round.push_back({senders[k], Q[k], {oldest}, TransferOp::copy});
        held.receive(Q[k], oldest);
      }
    }
    if (busy >= 0) held.receive(busy, r);
    held.end_round();
  }
  for (int c = 0; c < m; ++c)
    if (held.holders(c) < m) return std::nullopt;
  canonicalize(rounds);
  return rounds;
}

}  // namespace stragglar::detail
