// StragglAR-k: k ranks arrive late together (a slow node). Synthesized with the
// late ranks at p..n-1 (p = n - k punctual ranks), then relabelled onto the requested set.
// docs/algorithms.md "StragglAR-k" derives the bound this approaches.
//
//   phase `reduce_scatter` (does not wait): ring ReduceScatter among the p punctual ranks;
//       punctual i ends with P_c, the punctual sum of every chunk c ≡ i (mod p): its collector.
//   phase `allreduce` (waits), round by round:
//     1. late rank j sends its own contribution of chunk (t + j) mod C to that chunk's
//        collector (`reduce`); the k late ranks hit k different collectors (k ≤ p). The
//        contribution that completes a chunk is an exchange, as StragglAR's (paper §3): the
//        collector sends P_c + the other late contributions back (`reduce`), so the chunk is
//        final on two ranks at once.
//     2. every other free port copies final chunks: receivers that lack the most go first and
//        take the oldest final chunk a free holder can send them.
//   It ends when every rank holds every final chunk.
//
// Why this shape: per chunk, n + k − 1 receives are unavoidable after the late ranks arrive
// (k − 1 merges of late contributions and one receive per rank that ends final), and each late
// rank must send and receive s bytes; late ranks here send only their own data and receive only
// final chunks (the least possible), and the collectors do the merges.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "schedule/schedule_sink.hpp"
#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar {
namespace detail {
namespace {

constexpr long long kMaxStragglarKChunks = 1 << 14;

// The exposed rounds with k late ranks at p..n-1 and C = K·p chunks (the `allreduce` phase).
// budget > 0: a late rank may merge another late rank's contribution (it receives it, and sends
// the sum to the collector when its own turn for that chunk comes) while it has receive ports
// to spare: missing + slack < budget − t. That takes receives off the punctual ranks, whose
// C + K·(k−1) receives bound the length.
std::vector<Round> stragglar_k_rounds(int n, int k, int K, int budget, int slack) {
  const int p = n - k;
  const int C = K * p;
  std::vector<char> final_at(static_cast<std::size_t>(C) * n, 0);  // [c * n + r]: r holds final c
  auto holds = [&](int c, int r) -> char& { return final_at[static_cast<std::size_t>(c) * n + r]; };
  std::vector<int> late_merged(static_cast<std::size_t>(C), 0);  // late contributions at the collector
  // How many late contributions late rank j holds of chunk c (its own + merged; 0 once sent).
  std::vector<int> held_by(static_cast<std::size_t>(k) * C, 1);
  auto held = [&](int j, int c) -> int& { return held_by[static_cast<std::size_t>(j) * C + c]; };
  std::vector<int> completed_order;                              // chunks in the order they became final
  completed_order.reserve(static_cast<std::size_t>(C));
  std::vector<std::vector<int>> holders(static_cast<std::size_t>(C));
  std::vector<int> missing(static_cast<std::size_t>(n), C);  // final chunks each rank still lacks
  long long left = static_cast<long long>(C) * n;

  std::vector<Round> rounds;
  std::vector<char> sends(static_cast<std::size_t>(n)), recvs(static_cast<std::size_t>(n));
  std::vector<std::pair<int, int>> became_final;  // (chunk, rank) made final this round
  const int max_rounds = 4 * C + 4 * n + 64;  // far above what the builder takes; a guard only
  for (int t = 0; left > 0; ++t) {
    if (t > max_rounds) throw Error(ErrorCode::Internal, "stragglar-k: no schedule within " + std::to_string(max_rounds) + " rounds");
    Round round;
    std::fill(sends.begin(), sends.end(), 0);
    std::fill(recvs.begin(), recvs.end(), 0);
    became_final.clear();
    // 1. Late contributions, one per late rank and round for the first C rounds.
    if (t < C) {
      for (int j = k - 1; j >= 0; --j) {
        const int c = (t + j) % C, collector = c % p, late = p + j;
        int& mine = held(j, c);
        if (budget > 0) {  // merge into a late rank that sends c later, if it has a port to spare
          int into = -1;
          for (int i = j - 1; i >= 0 && into < 0; --i)
            if (t + j - i < C && !recvs[p + i] && held(i, c) > 0 && (t < k - 1 || missing[p + i] + slack < budget - t))
              into = i;
          if (into >= 0) {
            round.push_back({late, p + into, {c}, TransferOp::reduce});
            sends[late] = recvs[p + into] = 1;
            held(into, c) += mine;
            mine = 0;
            continue;
          }
        }
        round.push_back({late, collector, {c}, TransferOp::reduce});
        sends[late] = recvs[collector] = 1;
        late_merged[c] += mine;
        mine = 0;
        if (late_merged[c] == k) {
          became_final.push_back({c, collector});
          if (!recvs[late] && !sends[collector]) {  // the exchange: final on two ranks
            round.push_back({collector, late, {c}, TransferOp::reduce});
            sends[collector] = recvs[late] = 1;
            became_final.push_back({c, late});
          }
        }
      }
    }
    // 2. Copies of final chunks: a maximum matching of free receivers to free senders that
    //    hold a final chunk the receiver lacks (Kuhn's augmenting paths, the neediest receivers
    //    first), then each pair moves the chunk with the fewest holders (the tail doubles).
    //    A greedy pairing left ~5 of 64 ports idle per round and took 81 rounds at n = 64, k = 8
    //    against 76 with the matching.
    std::vector<int> receivers;
    for (int v = 0; v < n; ++v)
      if (!recvs[v] && missing[v] > 0) receivers.push_back(v);
    std::stable_sort(receivers.begin(), receivers.end(), [&](int a, int b) { return missing[a] > missing[b]; });
    auto useful_chunk = [&](int u, int v) {  // the chunk u should send v, or -1
      int best = -1;
      for (int c : completed_order)
        if (holds(c, u) && !holds(c, v) && (best < 0 || holders[c].size() < holders[best].size())) best = c;
      return best;
    };
    std::vector<int> sender_of(static_cast<std::size_t>(n), -1), receiver_of(static_cast<std::size_t>(n), -1);
    std::vector<int> seen(static_cast<std::size_t>(n), -1);
    std::vector<std::vector<int>> adjacent(static_cast<std::size_t>(n));
    for (int v : receivers)
      for (int u = 0; u < n; ++u)
        if (!sends[u] && u != v && useful_chunk(u, v) >= 0) adjacent[v].push_back(u);
    // Augmenting path from receiver v (depth <= n: the ranks).
    std::function<bool(int, int)> augment = [&](int v, int stamp) {
      for (int u : adjacent[v]) {
        if (seen[u] == stamp) continue;
        seen[u] = stamp;
        if (receiver_of[u] < 0 || augment(receiver_of[u], stamp)) {
          receiver_of[u] = v;
          sender_of[v] = u;
          return true;
        }
      }
      return false;
    };
    for (std::size_t i = 0; i < receivers.size(); ++i) augment(receivers[i], static_cast<int>(i));
    for (int v : receivers) {
      const int u = sender_of[v];
      if (u < 0) continue;
      const int c = useful_chunk(u, v);
      round.push_back({u, v, {c}, TransferOp::copy});
      sends[u] = recvs[v] = 1;
      became_final.push_back({c, v});
    }
    if (round.empty()) throw Error(ErrorCode::Internal, "stragglar-k: a round without progress");
    for (auto [c, r] : became_final) {
      if (holders[c].empty()) completed_order.push_back(c);
      holds(c, r) = 1;
      holders[c].push_back(r);
      --missing[r];
      --left;
    }
    // Fully spread chunks leave the list the copy loop scans.
    std::erase_if(completed_order, [&](int c) { return static_cast<int>(holders[c].size()) == n; });
    rounds.push_back(std::move(round));
  }
  return rounds;
}

// The plain schedule, then late-rank merges with a few slacks against its length: the shortest.
std::vector<Round> stragglar_k_shortest_rounds(int n, int k, int K) {
  std::vector<Round> best = stragglar_k_rounds(n, k, K, 0, 0);
  // Each try is a whole synthesis (the matching costs O(n²) per round): beyond 128 ranks the
  // plain schedule only (n = 256 took 15-43 s for the six tries on the loaded 2-core VM).
  if (k < 2 || n > 128) return best;
  const int budget = static_cast<int>(best.size());
  for (int slack : {4, 6, 8, 10, 12}) {
    std::vector<Round> r = stragglar_k_rounds(n, k, K, budget, slack);
    if (r.size() < best.size()) best = std::move(r);
  }
  return best;
}

}  // namespace
}  // namespace detail

// The modelled exposed time of K: rounds·(α + β·s/(K·p)), rounds counted by building them
// would cost a synthesis per K; the builder takes about K·p·(n−1)/(n−k) + k + ⌈log2 n⌉ rounds.
int choose_stragglar_k_pipeline(int n, int k, std::size_t bytes, const CostModel& cost) {
  using detail::ceil_log2;
  using detail::kMaxStragglarKChunks;
  require(k >= 1 && 2 * k <= n, "choose_stragglar_k_pipeline: k = " + std::to_string(k) + " on " +
                                    std::to_string(n) + " ranks, expected 1 <= k <= n/2");
  if (bytes == 0) return 1;
  const int p = n - k;
  auto modelled = [&](int K) {
    const double chunks = static_cast<double>(K) * p;
    const double rounds = chunks * (n - 1) / p + k + ceil_log2(n);
    return rounds * (cost.alpha_s + cost.beta_s_per_byte * static_cast<double>(bytes) / chunks);
  };
  int best = 1;
  for (int K = 2; K <= kMaxPipeline && static_cast<long long>(K) * p <= kMaxStragglarKChunks; ++K) {
    if (modelled(K) < modelled(best)) best = K;
    else if (modelled(K) > 1.5 * modelled(best)) break;
  }
  return best;
}

namespace detail {

std::vector<int> late_set_relabeling(int n, const std::vector<int>& late) {
  // Canonical late ranks n-k..n-1 become `late` (ascending); the punctual ones keep their order.
  const int k = static_cast<int>(late.size());
  std::vector<char> is_late(static_cast<std::size_t>(n), 0);
  for (int r : late) is_late[static_cast<std::size_t>(r)] = 1;
  std::vector<int> perm;
  perm.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    if (!is_late[static_cast<std::size_t>(r)]) perm.push_back(r);
  for (int j = 0; j < k; ++j) perm.push_back(late[static_cast<std::size_t>(j)]);
  return perm;
}

Schedule synthesize_stragglar_k(int n, const std::vector<int>& late, const SynthOptions& opts) {
  const int k = static_cast<int>(late.size());
  require(k >= 1 && 2 * k <= n, "stragglar-k: " + std::to_string(k) + " late ranks on " + std::to_string(n) +
                                    " ranks, expected 1 <= k <= n/2");
  const int p = n - k;
  const int K = opts.pipeline == kPipelineAuto ? choose_stragglar_k_pipeline(n, k, opts.bytes, opts.cost) : opts.pipeline;
  require(static_cast<long long>(K) * p <= kMaxStragglarKChunks,
          "stragglar-k: pipeline = " + std::to_string(K) + " gives " + std::to_string(static_cast<long long>(K) * p) +
              " chunks, expected at most " + std::to_string(kMaxStragglarKChunks));
  Schedule s;
  s.algorithm = "stragglar-k";
  s.nranks = n;
  s.nchunks = K * p;
  s.ports = 1;
  for (int j = 0; j < k; ++j) s.stragglers.push_back(p + j);
  if (k == 1) {  // one late rank is named as every single-straggler schedule names it
    s.straggler = p;
    s.stragglers.clear();
  }
  std::vector<int> members(static_cast<std::size_t>(p));
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) {
    members[i] = i;
    for (int q = 0; q < K; ++q) groups[i].push_back(i + q * p);
  }
  s.phases.push_back(Phase{"reduce_scatter", false, ring_reduce_scatter(members, groups)});
  s.phases.push_back(Phase{"allreduce", true, stragglar_k_shortest_rounds(n, k, K)});
  canonicalize(s.phases.back().rounds);
  // One late rank: the rotation every single-straggler schedule uses, so the plan cache's
  // relabelled canonical schedule (straggler n-1) equals this one.
  return relabel(std::move(s), k == 1 ? straggler_relabeling(n, late.front()) : late_set_relabeling(n, late));
}

}  // namespace detail

int stragglar_k_round_bound(int nranks, int late, int nchunks) {
  require(late >= 1 && 2 * late <= nranks && nchunks >= 1,
          "stragglar_k_round_bound: n = " + std::to_string(nranks) + ", k = " + std::to_string(late) +
              ", chunks = " + std::to_string(nchunks) + ", expected 1 <= k <= n/2 and chunks >= 1");
  // (a) every chunk needs n + k − 1 receives after the late ranks arrive, n per round at most;
  // (b) a late rank sends each chunk at least once, one per round; the chunk it sends first in
  //     its last such round is then on at most two ranks and must double to n.
  const long long receives = static_cast<long long>(nchunks) * (nranks + late - 1);
  const int by_receives = static_cast<int>((receives + nranks - 1) / nranks);
  const int by_late_sends = nchunks + detail::ceil_log2(nranks) - 1;
  return std::max(by_receives, by_late_sends);
}

}  // namespace stragglar
