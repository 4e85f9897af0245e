// Ring ReduceScatter / AllGather over an arbitrary member list and chunk groups: the
// bandwidth-optimal building block of ring, broadcast and StragglAR's precondition.
//
// ReduceScatter, m members, member i must own group i. Group g starts at member g+1 and
// travels around the ring, each hop reducing: in round k member i sends group (i-1-k) mod m
// to member i+1. After m-1 rounds group g has visited every member and sits, complete, on
// member g. Example m = 3 (groups a,b,c owned by 0,1,2; x' = partial, x* = complete):
//   round 0: 0 sends c to 1, 1 sends a to 2, 2 sends b to 0
//   round 1: 0 sends b' to 1 (b* on 1), 1 sends c' to 2 (c* on 2), 2 sends a' to 0 (a* on 0)
#include "synth/synth_internal.hpp"

namespace stragglar::detail {
namespace {

void ring_pass(const std::vector<int>& members, const std::vector<std::vector<int>>& groups, TransferOp op,
               int group_offset, const RoundFn& emit) {
  const int m = static_cast<int>(members.size());
  Round round;
  for (int k = 0; k + 1 < m; ++k) {
    round.clear();
    round.reserve(static_cast<std::size_t>(m));
    for (int i = 0; i < m; ++i) {
      const int g = ((i + group_offset - k) % m + m) % m;
      if (groups[g].empty()) continue;
      round.push_back(Transfer{members[i], members[(i + 1) % m], groups[g], op});
    }
    if (!round.empty()) emit(round);
  }
}

std::vector<Round> collect(const std::vector<int>& members, const std::vector<std::vector<int>>& groups, TransferOp op,
                           int group_offset) {
  std::vector<Round> rounds;
  rounds.reserve(members.size() > 0 ? members.size() - 1 : 0);
  ring_pass(members, groups, op, group_offset, [&](Round& r) { rounds.push_back(std::move(r)); });
  return rounds;
}

}  // namespace

void ring_reduce_scatter(const std::vector<int>& members, const std::vector<std::vector<int>>& groups,
                         const RoundFn& emit) {
  ring_pass(members, groups, TransferOp::reduce, -1, emit);
}

// AllGather: in round k member i forwards group (i-k) mod m, the one it completed k hops ago.
void ring_allgather(const std::vector<int>& members, const std::vector<std::vector<int>>& groups, const RoundFn& emit) {
  ring_pass(members, groups, TransferOp::copy, 0, emit);
}

std::vector<Round> ring_reduce_scatter(const std::vector<int>& members, const std::vector<std::vector<int>>& groups) {
  return collect(members, groups, TransferOp::reduce, -1);
}

std::vector<Round> ring_allgather(const std::vector<int>& members, const std::vector<std::vector<int>>& groups) {
  return collect(members, groups, TransferOp::copy, 0);
}

}  // namespace stragglar::detail
