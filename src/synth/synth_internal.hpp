// Building blocks shared by the synthesizers (not installed).
#pragma once
#include <vector>

#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {

// Ring ReduceScatter among `members` (in ring order) where groups[i] is the set of chunks
// that members[i] must end up owning: afterwards members[i] holds, for every chunk in
// groups[i], the sum over all members. |members|-1 rounds of one group each (bandwidth-optimal).
std::vector<Round> ring_reduce_scatter(const std::vector<int>& members,
                                       const std::vector<std::vector<int>>& groups);
// The mirror AllGather: members[i] starts owning groups[i] complete; afterwards all members
// hold every group. |members|-1 rounds of copies.
std::vector<Round> ring_allgather(const std::vector<int>& members,
                                  const std::vector<std::vector<int>>& groups);

Schedule synthesize_ring(int n);
Schedule synthesize_rhd(int n);
Schedule synthesize_allpairs(int n);
Schedule synthesize_broadcast(int n, int straggler);
// StragglAR (src/synth/stragglar.cpp): phase `reduce_scatter` + phase `allreduce`.
Schedule synthesize_stragglar(int n, int straggler, const SynthOptions& opts);

// Rotation that moves rank n-1 to `straggler` and keeps the others in cyclic order.
std::vector<int> straggler_relabeling(int n, int straggler);

}  // namespace stragglar::detail
