// The paper's method for n that is not a power of two (appendix "StragglAR for
// Non-Power-of-2 Values of n"): after the fixed straggler pairing of the round, connect every
// two free ranks u, v with weight 2 if each holds a full chunk the other lacks and weight 1 if
// only one of them does, and take a maximum-weight matching (Edmonds; here LEMON's
// MaxWeightedMatching). Each matched pair then exchanges (or sends one way) the oldest chunk
// the other lacks. Greedy per round, so no round guarantee: the measurements are
// 12→15, 14→17, 20→24 ... rounds against the bound n + ⌈log2 n⌉ - 2 (see docs/schedules.md).
// Kept as the reference the deadline method (stragglar_deadline.cpp) is compared with, and as
// its fallback.
#include <cstdint>
#include <string>

#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"
#include "synth/stragglar_lemon_compat.hpp"

namespace stragglar::detail {

namespace {

// full[x] = set of chunks fully reduced on rank x.
class Holdings {
 public:
  Holdings(int ranks, int chunks) : chunks_(chunks), words_((chunks + 63) / 64),
                                    bits_(static_cast<std::size_t>(ranks) * words_, 0) {}
  bool has(int x, int c) const { return (word(x, c) >> (c % 64)) & 1U; }
  void add(int x, int c) { bits_[idx(x, c)] |= std::uint64_t{1} << (c % 64); }
  // Oldest chunk that `from` holds and `to` lacks, -1 if none.
  int first_missing(int from, int to) const {
    for (int w = 0; w < words_; ++w) {
      std::uint64_t d = bits_[static_cast<std::size_t>(from) * words_ + w] &
                        ~bits_[static_cast<std::size_t>(to) * words_ + w];
      if (d) return w * 64 + __builtin_ctzll(d);
    }
    return -1;
  }
  bool complete(int x) const {
    for (int c = 0; c < chunks_; ++c)
      if (!has(x, c)) return false;
    return true;
  }

 private:
  std::size_t idx(int x, int c) const { return static_cast<std::size_t>(x) * words_ + c / 64; }
  std::uint64_t word(int x, int c) const { return bits_[idx(x, c)]; }
  int chunks_;
  int words_;
  std::vector<std::uint64_t> bits_;
};

}  // namespace

std::vector<Round> stragglar_matching_rounds(int n, int pipeline) {
  require(n >= 2, "stragglar_matching_rounds: n = " + std::to_string(n) + ", expected >= 2");
  require(pipeline >= 1, "stragglar_matching_rounds: pipeline = " + std::to_string(pipeline) +
                             ", expected >= 1");
  const int m = n - 1;
  const int sigma = n - 1;
  const int nchunks = pipeline * m;
  Holdings full(n, nchunks);
  std::vector<Round> rounds;
  // Each round after the pairings gives every incomplete rank something (it is a maximum
  // matching on a graph where the straggler can serve anyone), so this cap is never reached.
  const int max_rounds = 2 * nchunks + 4 * ceil_log2(n) + 16;

  auto all_complete = [&] {
    for (int x = 0; x < n; ++x)
      if (!full.complete(x)) return false;
    return true;
  };

  for (int r = 0; r < nchunks || !all_complete(); ++r) {
    if (r >= max_rounds)
      throw Error(ErrorCode::Internal, "stragglar_matching_rounds: n = " + std::to_string(n) +
                                           " did not complete within " + std::to_string(max_rounds) + " rounds");
    Round round;
    const int busy = r < nchunks ? r % m : -1;
    if (busy >= 0) add_straggler_exchange(round, n, r);

    // Free ranks: everybody but the pair with σ (σ itself is free once all chunks are full).
    lemon::ListGraph g;
    std::vector<lemon::ListGraph::Node> node(n, lemon::INVALID);
    std::vector<int> rank_of;
    for (int x = 0; x < n; ++x) {
      if (x == busy || (x == sigma && busy >= 0)) continue;
      node[x] = g.addNode();
      rank_of.push_back(x);
    }
    lemon::ListGraph::EdgeMap<int> weight(g);
    for (std::size_t i = 0; i < rank_of.size(); ++i)
      for (std::size_t j = i + 1; j < rank_of.size(); ++j) {
        const int u = rank_of[i], v = rank_of[j];
        const int w = (full.first_missing(u, v) >= 0) + (full.first_missing(v, u) >= 0);
        if (w > 0) weight[g.addEdge(node[u], node[v])] = w;
      }
    lemon::MaxWeightedMatching<lemon::ListGraph, lemon::ListGraph::EdgeMap<int>> matching(g, weight);
    matching.run();

    std::vector<std::pair<int, int>> copies;  // (dst, chunk), applied after the round
    for (int u : rank_of) {
      const auto mate = matching.mate(node[u]);
      if (mate == lemon::INVALID) continue;
      const int v = rank_of[static_cast<std::size_t>(g.id(mate))];
      const int c = full.first_missing(u, v);
      if (c < 0) continue;
      round.push_back({u, v, {c}, TransferOp::copy});
      copies.emplace_back(v, c);
    }
    for (auto [dst, c] : copies) full.add(dst, c);
    if (busy >= 0) {
      full.add(busy, r);
      full.add(sigma, r);
    }
    rounds.push_back(std::move(round));
  }
  canonicalize(rounds);
  return rounds;
}

}  // namespace stragglar::detail
