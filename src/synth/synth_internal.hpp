// Building blocks shared by the synthesizers (not installed).
#pragma once
#include <functional>
#include <vector>

#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {

class ScheduleSink;

// Receives one round at a time (a schedule need not be held whole). The callee may
// take the transfers (move from the round); the builder clears and reuses it.
using RoundFn = std::function<void(Round&)>;

// Ring ReduceScatter among `members` (in ring order) where groups[i] is the set of chunks
// that members[i] must end up owning: afterwards members[i] holds, for every chunk in
// groups[i], the sum over all members. |members|-1 rounds of one group each (bandwidth-optimal).
std::vector<Round> ring_reduce_scatter(const std::vector<int>& members,
                                       const std::vector<std::vector<int>>& groups);
// The mirror AllGather: members[i] starts owning groups[i] complete; afterwards all members
// hold every group. |members|-1 rounds of copies.
std::vector<Round> ring_allgather(const std::vector<int>& members,
                                  const std::vector<std::vector<int>>& groups);
// The same, round by round.
void ring_reduce_scatter(const std::vector<int>& members, const std::vector<std::vector<int>>& groups,
                         const RoundFn& emit);
void ring_allgather(const std::vector<int>& members, const std::vector<std::vector<int>>& groups, const RoundFn& emit);

Schedule synthesize_ring(int n);
Schedule synthesize_rhd(int n);
Schedule synthesize_allpairs(int n);
Schedule synthesize_broadcast(int n, int straggler);
// StragglAR (src/synth/stragglar.cpp): phase `reduce_scatter` + phase `allreduce`.
Schedule synthesize_stragglar(int n, int straggler, const SynthOptions& opts);
// The same schedule with the straggler at n-1 and a resolved K >= 1, round by round into `out`
// (what the plan cache packs: StragglAR at n = 4096 never exists as a Schedule there).
void emit_stragglar(int n, int pipeline, ScheduleSink& out);

// StragglAR-k (src/synth/stragglar_k.cpp): the ranks in `late` (distinct, ascending, k <= n/2)
// arrive together; phase `reduce_scatter` among the others + phase `allreduce`.
Schedule synthesize_stragglar_k(int n, const std::vector<int>& late, const SynthOptions& opts);
// Hierarchical StragglAR (src/synth/hierarchical.cpp): `late` is one host (k consecutive ranks
// from a multiple of k, hosts of k ranks, k <= n/2 dividing n).
Schedule synthesize_hierarchical(int n, const std::vector<int>& late, const SynthOptions& opts);
// The permutation taking the canonical late ranks n-k..n-1 onto `late` (ascending), the
// punctual ranks onto the rest in order.
std::vector<int> late_set_relabeling(int n, const std::vector<int>& late);

// Rotation that moves rank n-1 to `straggler` and keeps the others in cyclic order.
std::vector<int> straggler_relabeling(int n, int straggler);

}  // namespace stragglar::detail
