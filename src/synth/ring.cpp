// Ring AllReduce (paper appendix "Discussion of Baselines"): n chunks, ReduceScatter then
// AllGather, 2(n-1) rounds of s/n bytes: T = 2(n-1)α + 2(n-1)/n·sβ.
#include <numeric>

#include "synth/synth_internal.hpp"

namespace stragglar::detail {

Schedule synthesize_ring(int n) {
  std::vector<int> members(static_cast<std::size_t>(n));
  std::iota(members.begin(), members.end(), 0);
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) groups[i] = {i};
  Schedule s;
  s.algorithm = "ring";
  s.nranks = n;
  s.nchunks = n;
  s.ports = 1;
  s.phases.push_back(Phase{"reduce_scatter", true, ring_reduce_scatter(members, groups)});
  s.phases.push_back(Phase{"allgather", true, ring_allgather(members, groups)});
  return s;
}

}  // namespace stragglar::detail
