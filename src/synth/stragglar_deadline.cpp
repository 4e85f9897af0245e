// StragglAR `allreduce` phase for n that is not a power of two (issue #5; paper appendix
// "Non-Power-of-2" gives only a greedy matching method, stragglar_matching.cpp).
//
// Model (DESIGN.md, single port): per round a rank sends ≤ 1 and receives ≤ 1 transfer. Unlike
// the paper's undirected matchings, sends need not be paired with receives (u→v, v→w is
// allowed), which the verifier accepts and which helps odd n.
//
// Per round r: the straggler pairing (r mod m ↔ σ on chunk r) is fixed; then a maximum
// bipartite matching free senders → free receivers (Kuhn's augmenting paths; edge u→v when u
// holds a full, not yet complete chunk that v lacks), which maximises the number of useful
// receives of the round — the resource that is tight: with N = 2^⌈log2 n⌉ the whole
// schedule has only N - n spare receive slots at the bound (docs/schedules.md). Receivers are
// tried farthest-from-their-next-pairing first (the paper's "critical window": a rank about
// to pair with σ cannot relay); each matched pair sends the rarest chunk (newest chunks keep
// doubling). A few tie-break seeds; the shortest schedule wins.
//
// Status: verified for every n, but NOT at the bound for most non-power-of-2 n (see
// docs/schedules.md for the measured table). Deterministic (fixed seeds).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar::detail {

namespace {

// Restarts with other tie-breaks; one for large n, whose attempts cost O(n^3) each.
constexpr std::uint64_t kSeedsSmall = 3;
constexpr int kSmallN = 64;

class Bits {
 public:
  Bits() = default;
  explicit Bits(int size) : w_((size + 63) / 64, 0) {}
  bool test(int i) const { return (w_[i >> 6] >> (i & 63)) & 1U; }
  void set(int i) { w_[i >> 6] |= std::uint64_t{1} << (i & 63); }
  void clear(int i) { w_[i >> 6] &= ~(std::uint64_t{1} << (i & 63)); }
  const std::vector<std::uint64_t>& words() const { return w_; }

 private:
  std::vector<std::uint64_t> w_;
};

struct Attempt {
  int n, m, K, L, nchunks, R, sigma, cap;
  std::uint64_t seed;
  std::vector<Bits> has;          // has[x]: full chunks on non-straggler x
  std::vector<int> holders;       // holders[c]: ranks (σ included once it has c) holding c full
  std::vector<std::vector<int>> holder_list;  // non-straggler holders of c
  std::vector<Round> rounds;
  Bits incomplete;  // full chunks not yet on every rank
  Bits sigma_has;

  int next_busy(int x, int r) const {  // next round ≥ r in which x pairs with σ; large if never
    int g = r + ((x - r) % m + m) % m;
    return g < nchunks ? g : 1 << 28;
  }
  int deadline(int c) const { return c == nchunks - 1 ? R - 1 : std::min(c + L, R - 1); }

  bool run() {
    std::mt19937_64 rng(seed);
    has.assign(m, Bits(nchunks));
    holders.assign(nchunks, 0);
    holder_list.assign(nchunks, {});
    rounds.clear();
    incomplete = Bits(nchunks);
    sigma_has = Bits(nchunks);
    int complete = 0;  // chunks held by all n ranks
    for (int r = 0; complete < nchunks; ++r) {
      if (r >= cap) return false;
      Round& round = rounds.emplace_back();
      const int busy = r < nchunks ? r % m : -1;
      if (busy >= 0) add_straggler_exchange(round, n, r);
      const bool sigma_free = r >= nchunks;
      std::vector<char> send_used(n, 0), recv_used(m, 0);
      if (busy >= 0) send_used[busy] = recv_used[busy] = 1;
      if (!sigma_free) send_used[sigma] = 1;
      std::vector<std::pair<int, int>> got;  // (rank, chunk)

      // Incomplete full chunks by deadline.
      std::vector<int> chunks;
      for (int c = 0; c < std::min(r, nchunks); ++c)
        if (holders[c] < n) chunks.push_back(c);
      std::stable_sort(chunks.begin(), chunks.end(),
                       [&](int a, int b) { return deadline(a) < deadline(b); });

      auto send = [&](int from, int to, int c) {
        send_used[from] = 1;
        recv_used[to] = 1;
        round.push_back({from, to, {c}, TransferOp::copy});
        got.emplace_back(to, c);
      };
      // Maximum bipartite matching senders -> receivers (Kuhn), senders tried in order of
      // their most urgent chunk, receivers in order of distance to their next pairing.
      std::vector<int> S, V;
      for (int x = 0; x < n; ++x)
        if (!send_used[x]) S.push_back(x);
      for (int y = 0; y < m; ++y)
        if (!recv_used[y]) V.push_back(y);
      // Best chunk u can give v: among the incomplete full chunks u holds and v lacks, the
      // one with the fewest holders (rarest first keeps the newest chunks doubling).
      const auto& live = incomplete.words();
      auto useful = [&](int u, int v) {
        int best = -1;
        const auto& hv = has[v].words();
        for (std::size_t w = 0; w < live.size(); ++w) {
          std::uint64_t d = live[w] & ~hv[w];
          if (u != sigma) d &= has[u].words()[w];
          else d &= sigma_has.words()[w];
          while (d) {
            const int c = static_cast<int>(w * 64) + __builtin_ctzll(d);
            d &= d - 1;
            if (best < 0 || holders[c] < holders[best]) best = c;
          }
        }
        return best;
      };
      std::shuffle(V.begin(), V.end(), rng);
      std::stable_sort(V.begin(), V.end(), [&](int a2, int b2) { return next_busy(a2, r + 1) > next_busy(b2, r + 1); });
      std::vector<std::vector<int>> adj(n);
      auto can_give = [&](int u, int v) {
        const auto& hv = has[v].words();
        const auto& hu = u == sigma ? sigma_has.words() : has[u].words();
        for (std::size_t w = 0; w < live.size(); ++w)
          if (live[w] & ~hv[w] & hu[w]) return true;
        return false;
      };
      for (int u : S)
        for (int v : V)
          if (u != v && can_give(u, v)) adj[u].push_back(v);
      std::vector<int> match_of_v(m, -1);
      std::vector<int> seen(m, -1);
      std::function<bool(int, int)> augment = [&](int u, int stamp) {
        for (int v : adj[u]) {
          if (seen[v] == stamp) continue;
          seen[v] = stamp;
          if (match_of_v[v] < 0 || augment(match_of_v[v], stamp)) {
            match_of_v[v] = u;
            return true;
          }
        }
        return false;
      };
      std::shuffle(S.begin(), S.end(), rng);
      int stamp = 0;
      for (int u : S) augment(u, stamp++);
      for (int v : V)
        if (match_of_v[v] >= 0) send(match_of_v[v], v, useful(match_of_v[v], v));
      for (auto [x, c] : got) {
        has[x].set(c);
        if (++holders[c] == n) {
          ++complete;
          incomplete.clear(c);
        }
        holder_list[c].push_back(x);
      }
      if (busy >= 0) {
        has[busy].set(r);
        holders[r] += 2;
        sigma_has.set(r);
        if (holders[r] == n) ++complete;
        else incomplete.set(r);
        holder_list[r].push_back(busy);
      }
    }
    return true;
  }
};

}  // namespace

std::optional<std::vector<Round>> stragglar_deadline_rounds(int n, int pipeline, int target_rounds) {
  require(n >= 2 && pipeline >= 1, "stragglar_deadline_rounds: n = " + std::to_string(n) +
                                       ", pipeline = " + std::to_string(pipeline) + ", expected n >= 2, pipeline >= 1");
  const int m = n - 1;
  std::optional<std::vector<Round>> best;
  const std::uint64_t seeds = n <= kSmallN ? kSeedsSmall : 1;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const int cap = best ? static_cast<int>(best->size()) : 2 * pipeline * m + 4 * ceil_log2(n) + 16;
    Attempt a{n, m, pipeline, ceil_log2(n), pipeline * m, target_rounds, n - 1, cap, seed, {}, {}, {}, {}, {}, {}};
    if (a.run()) best = std::move(a.rounds);
    if (best && static_cast<int>(best->size()) <= target_rounds) break;
  }
  if (best) canonicalize(*best);
  return best;
}

}  // namespace stragglar::detail
