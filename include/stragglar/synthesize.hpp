// Schedule synthesizers, one per algorithm (src/synth/<algo>.cpp).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stragglar/algorithm.hpp"
#include "stragglar/cost_model.hpp"
#include "stragglar/schedule.hpp"

namespace stragglar {

inline constexpr int kMinRanks = 2;
inline constexpr int kMaxRanks = 4096;
// pipeline == kPipelineAuto: choose K from the α-β model (see choose_pipeline).
inline constexpr int kPipelineAuto = 0;
// The largest pipelining factor any API accepts (beyond it chunks get tiny, schedules huge).
inline constexpr int kMaxPipeline = 1024;
// The text form of a pipeline (--pipeline flags): "auto" → kPipelineAuto, else an integer
// K ≥ 1; anything else throws Error(InvalidUsage) naming the text.
int parse_pipeline(std::string_view text);

struct SynthOptions {
  // The rank singled out as straggler; nullopt = n-1. Used by stragglar and broadcast.
  std::optional<int> straggler;
  // Several ranks late together: stragglar-k's late set (any order, distinct ranks,
  // at most n/2 of them). Empty: stragglar-k takes {straggler}. A set of one is `straggler`
  // for every algorithm; a larger one is refused by algorithms that handle one late rank.
  std::vector<int> stragglers;
  // StragglAR only: cut the buffer into K·(n-1) chunks. 1 = the paper's schedule.
  int pipeline = 1;
  // Inputs to pipeline == kPipelineAuto.
  std::size_t bytes = 0;
  CostModel cost;
};

// Builds a complete AllReduce schedule for `nranks` ranks (the algorithm's row of the table).
// Throws Error(InvalidUsage) for an algorithm without a schedule (native, auto), n outside
// [kMinRanks, kMaxRanks], a straggler outside [0, n), or a pipeline outside [0, kMaxPipeline],
// naming the value and what was expected.
Schedule synthesize(Algorithm algo, int nranks, const SynthOptions& opts = {});

// StragglAR pipelining factor K minimising the modelled exposed time for `bytes` on n ranks.
int choose_pipeline(int nranks, std::size_t bytes, const CostModel& cost);
// The same for stragglar-k with `late` ranks late (K·(n-late) chunks).
int choose_stragglar_k_pipeline(int nranks, int late, std::size_t bytes, const CostModel& cost);

// The same for hierarchical with the ranks `late` (one host) late: K·(H−1) chunks per host
// segment, chosen by simulating each K with `cost` (hosts and inter-host links included).
int choose_hierarchical_pipeline(int nranks, const std::vector<int>& late, std::size_t bytes, const CostModel& cost);

// Lower bound on the rounds of StragglAR's `allreduce` phase in the single-port model:
// the straggler sends n-1 chunks, then the last needs ⌈log2 n⌉-1 doublings.
int stragglar_round_bound(int nranks);

// Lower bound on the rounds of stragglar-k's `allreduce` phase (k late ranks, `nchunks`
// chunks, single-port): max(⌈nchunks·(n+k−1)/n⌉, nchunks + ⌈log2 n⌉ − 1) (docs/algorithms.md).
int stragglar_k_round_bound(int nranks, int late, int nchunks);

}  // namespace stragglar
