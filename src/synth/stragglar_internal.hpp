// StragglAR's `allreduce` phase builders (not installed). All of them synthesize with the
// straggler σ = n-1; src/synth/stragglar.cpp adds the ReduceScatter phase and relabels.
//
// Common setting (paper §3.1): m = n-1 non-stragglers, K = pipeline factor,
// nchunks = K·m. After the ReduceScatter, rank i holds the partial sum (over non-stragglers)
// of chunks {i, i+m, i+2m, ...}. In round r < K·m the straggler and rank r mod m exchange
// chunk r (two `reduce` transfers): chunk r is then *full* on both (exception: the
// near-power-of-two builder's donor ranks forward their partial sum to another rank in round 0,
// which then does that exchange instead). Full chunks spread with
// `copy` transfers; a round is single-port (each rank sends ≤ 1 and receives ≤ 1 transfer,
// every transfer carries exactly one chunk, so each round costs one chunk of bandwidth).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "stragglar/schedule.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar::detail {

// ⌈log2 n⌉ for n ≥ 1.
int ceil_log2(int n);

// The `allreduce` phase for n = 2^k: the paper's Algorithm 1 (§3.1, appendix C proofs),
// generalised to K·(n-1) chunks. Exactly K(n-1) + log2(n) - 1 rounds.
// src/synth/stragglar_pow2.cpp.
std::vector<Round> stragglar_pow2_rounds(int n, int pipeline);
// The same, round by round.
void stragglar_pow2_rounds(int n, int pipeline, const RoundFn& emit);

// K = 1 and n in the upper third below a power of two (3n ≥ 2N + 3 − L, N = 2^L, L = ⌈log2 n⌉):
// Algorithm 1's structure with N − n "double" ranks, exactly n + L − 2 rounds (the bound) when
// every round's matching exists; nullopt when a rule fails or n is outside that range (then use
// the flow). src/synth/stragglar_near_pow2.cpp.
std::optional<std::vector<Round>> stragglar_near_pow2_rounds(int n);

// The paper's method for non-power-of-2 n (appendix "Non-Power-of-2"): per round a
// maximum-weight matching (LEMON) on the free ranks, weight 2 if both need a chunk of the
// other, 1 if one way. No round guarantee. src/synth/stragglar_matching.cpp.
std::vector<Round> stragglar_matching_rounds(int n, int pipeline);

// Issue #5: per-round min-cost flow with deadline tiers (see the file); aims at
// target_rounds = K(n-1) + ⌈log2 n⌉ - 1 (the bound for K = 1), returns the shortest schedule
// of its attempts (a seed table for even n ≤ 256, K = 1). nullopt only if every attempt ran
// past 2·K·(n-1) + 4⌈log2 n⌉ + 16 rounds (never observed).
// src/synth/stragglar_deadline.cpp.
std::optional<std::vector<Round>> stragglar_deadline_rounds(int n, int pipeline, int target_rounds);

// One attempt of that method with tie-break `seed`; nullopt if it needs more than `cap` rounds.
// (Exposed for the offline seed search that fills its table.)
std::optional<std::vector<Round>> stragglar_flow_attempt(int n, int pipeline, std::uint64_t seed, int cap);

// Straggler pairings of round r (r < K·m): transfers σ ↔ r mod m on chunk r; with `partner`,
// σ ↔ partner (the near-power-of-two builder's recipients of a donor's chunk).
void add_straggler_exchange(Round& round, int n, int r);
void add_straggler_exchange(Round& round, int n, int r, int partner);

// Sorts the transfers of a round by (src, dst): schedules are compared as data. Keeps its
// buffers from round to round.
class RoundSorter {
 public:
  void operator()(Round& round);

 private:
  std::vector<int> slot_;
  Round sorted_;
};
// The same for every round.
void canonicalize(std::vector<Round>& rounds);

}  // namespace stragglar::detail
