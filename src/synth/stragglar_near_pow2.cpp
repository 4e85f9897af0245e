// StragglAR `allreduce` phase at the round bound n + ⌈log2 n⌉ − 2 for n just below a power of
// two: N − n ≤ L − 1, with L = ⌈log2 n⌉, N = 2^L (issue #5). Algorithm 1 (paper §3.1,
// stragglar_pow2.cpp) is the case N − n = 0; this builder keeps its structure and makes room for
// the N − n ranks that do not exist.
//
// Why this shape (docs/schedules.md, "Why non-power-of-2 n is hard"): a schedule at the bound has
// only N − n spare receive slots, so nearly every free rank receives and sends a useful chunk in
// every round. Algorithm 1's steady state does exactly that: a chunk born in round c (rank c ↔ σ)
// doubles its holders for L − 1 rounds — 1, 2, …, N/2 — and completes at age L, when its N/2
// holders ("P") serve the ranks that still lack it ("Q"). With m = n − 1 < N − 1 ranks, the
// holders of the L live chunks (N − 1 of them) overlap on exactly N − n ranks, which hold the
// oldest chunk and one younger one ("double" ranks). Counting senders shows the scheme stays
// perfect only if
//   * every rank holds at most one "younger" chunk (age < L) and sends it, so every younger
//     chunk doubles;
//   * the rank paired with σ in round g holds the chunk completing in g (born g − L) and no
//     younger one — so a rank that pairs with σ in round g may only receive chunks c ≤ g − L
//     (the paper's "critical window", appendix C);
//   * double ranks never pair with σ again: they are made at round L − 1 from ranks 0..L − 2,
//     hence N − n ≤ L − 1.
// Per round the only choice is which receiver gets which younger chunk: a bipartite matching
// (receivers × the chunks' doubling slots) under those rules, tightest receivers first and
// ranks that would become double last. In the tail (rounds ≥ n − 1) σ is free and also sends
// the last chunk, which must complete L − 1 rounds after it is born.
//
// No proof that every round's matching exists: the builder checks every rule and every transfer
// as it goes and returns nullopt if one fails (the caller then uses the min-cost flow). It
// succeeds for every n with N − n ≤ L − 1 that we tried (tests: every such even n ≤ 256 and
// odd n ≤ 127 that reaches the bound, all verified).
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

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
  int chunk_of(int v) const { return match_[static_cast<std::size_t>(v)]; }
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
      const std::vector<int> current = owners;  // try_assign may append to other lists
      for (int w : current)
        if (try_assign(w)) {
          auto& again = owner_[static_cast<std::size_t>(z)];
          again.erase(std::find(again.begin(), again.end(), w));
          again.push_back(v);
          match_[static_cast<std::size_t>(v)] = z;
          return true;
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
  const int m = n - 1, sigma = n - 1, L = ceil_log2(n), N = 1 << L;
  if (n < 3 || N - n > L - 1) return std::nullopt;
  const int T = m + L - 1;  // the bound
  std::vector<std::vector<char>> has(static_cast<std::size_t>(m), std::vector<char>(static_cast<std::size_t>(m), 0));
  std::vector<int> hold(static_cast<std::size_t>(m), 0);  // non-straggler holders per chunk
  const auto holds = [&](int v, int c) { return has[static_cast<std::size_t>(v)][static_cast<std::size_t>(c)] != 0; };

  std::vector<Round> rounds;
  rounds.reserve(static_cast<std::size_t>(T));
  std::vector<int> younger, ychunk(static_cast<std::size_t>(m)), slots, recv(static_cast<std::size_t>(m));
  std::vector<std::vector<int>> allowed(static_cast<std::size_t>(m));
  for (int r = 0; r < T; ++r) {
    const int busy = r < m ? r : -1;
    const int oldest = r - L, next_oldest = r + 1 - L;
    // Live chunks: born (c < r) and not on every rank. Only the oldest may be older than L − 1.
    younger.clear();
    for (int c = 0; c < std::min(r, m); ++c) {
      if (hold[static_cast<std::size_t>(c)] >= m) continue;
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
      const int h = hold[static_cast<std::size_t>(c)];
      slots[static_cast<std::size_t>(i)] = std::min(h + (r >= m && c == m - 1 ? 1 : 0), m - h);
    }
    // Q: every rank that lacks the oldest chunk gets it now (it completes at age L).
    std::fill(recv.begin(), recv.end(), -1);
    std::vector<int> Q;
    if (oldest >= 0 && hold[static_cast<std::size_t>(oldest)] < m) {
      for (int v = 0; v < m; ++v)
        if (!holds(v, oldest)) {
          if (v == busy) return std::nullopt;
          Q.push_back(v);
          recv[static_cast<std::size_t>(v)] = oldest;
        }
    }
    // Who may receive which younger chunk (indices into `younger`, oldest first).
    std::vector<int> candidates;
    for (int v = 0; v < m; ++v) {
      auto& a = allowed[static_cast<std::size_t>(v)];
      a.clear();
      if (v == busy || recv[static_cast<std::size_t>(v)] >= 0) continue;
      const int y = ychunk[static_cast<std::size_t>(v)];
      for (int i = 0; i < Y; ++i) {
        const int z = younger[static_cast<std::size_t>(i)];
        if (holds(v, z)) continue;
        if (y >= 0 && (v > r || (y != next_oldest && z != next_oldest))) continue;  // double-rank rules
        if (v > r && z > v - L) continue;  // critical window: v pairs with σ in round v
        a.push_back(i);
      }
      if (!a.empty()) candidates.push_back(v);
    }
    // Tightest first (fewest choices, then soonest pairing with σ); ranks that would become
    // double only when the others cannot fill the slots.
    const auto tightness = [&](int v) {
      return std::pair{allowed[static_cast<std::size_t>(v)].size(), v > r ? v : std::numeric_limits<int>::max()};
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
    if (busy >= 0) add_straggler_exchange(round, n, r);
    // Senders: the holders of each younger chunk in rank order (σ last), then for the oldest
    // the holders left over. Any holder may serve any receiver of the same chunk.
    std::vector<char> sent(static_cast<std::size_t>(n), 0);
    std::vector<std::pair<int, int>> got;  // (receiver, chunk)
    for (int i = 0; i < Y; ++i) {
      const int z = younger[static_cast<std::size_t>(i)];
      std::vector<int> receivers;
      for (int v : candidates)
        if (matching.chunk_of(v) == i) receivers.push_back(v);
      std::sort(receivers.begin(), receivers.end());
      std::vector<int> senders;
      for (int u = 0; u < m; ++u)
        if (u != busy && holds(u, z)) senders.push_back(u);
      if (r >= m && z == m - 1) senders.push_back(sigma);
      if (senders.size() < receivers.size()) return std::nullopt;
      for (std::size_t k = 0; k < receivers.size(); ++k) {
        sent[static_cast<std::size_t>(senders[k])] = 1;
        round.push_back({senders[k], receivers[k], {z}, TransferOp::copy});
        got.emplace_back(receivers[k], z);
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
        got.emplace_back(Q[k], oldest);
      }
    }
    for (auto [v, c] : got) {
      has[static_cast<std::size_t>(v)][static_cast<std::size_t>(c)] = 1;
      ++hold[static_cast<std::size_t>(c)];
    }
    if (busy >= 0) {
      has[static_cast<std::size_t>(busy)][static_cast<std::size_t>(r)] = 1;
      ++hold[static_cast<std::size_t>(r)];
    }
  }
  for (int c = 0; c < m; ++c)
    if (hold[static_cast<std::size_t>(c)] < m) return std::nullopt;
  canonicalize(rounds);
  return rounds;
}

}  // namespace stragglar::detail
