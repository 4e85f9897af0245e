// Broadcast, the paper's straggler-aware baseline (appendix "Discussion of Baselines"; the
// paper's code calls it "direct"). The n-1 others AllReduce among themselves during the delay
// (ring over n-1 chunks, a phase that does not wait for the straggler); when the straggler
// arrives one rank exchanges the whole buffer with it, and the result is broadcast by
// doubling: log n rounds of s bytes in all. Ideal T = log n·(α + sβ).
#include <numeric>
#include <utility>

#include "synth/synth_internal.hpp"

namespace stragglar::detail {

Schedule synthesize_broadcast(int n, int straggler) {
  const int sigma = n - 1;  // synthesized with the straggler at n-1, relabelled at the end
  const int m = n - 1;      // the others
  std::vector<int> members(static_cast<std::size_t>(m));
  std::iota(members.begin(), members.end(), 0);
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) groups[i] = {i};
  std::vector<int> all(static_cast<std::size_t>(m));
  std::iota(all.begin(), all.end(), 0);

  Schedule s;
  s.algorithm = "broadcast";
  s.nranks = n;
  s.straggler = sigma;
  s.nchunks = m;
  s.ports = 1;
  std::vector<Round> others = ring_reduce_scatter(members, groups);
  for (Round& r : ring_allgather(members, groups)) others.push_back(std::move(r));
  s.phases.push_back(Phase{"allreduce_others", false, std::move(others)});
  s.phases.push_back(Phase{"exchange", true,
                           {Round{Transfer{0, sigma, all, TransferOp::reduce}, Transfer{sigma, 0, all, TransferOp::reduce}}}});
  // Doubling broadcast from the two holders {0, sigma} to ranks 1..n-2.
  std::vector<int> holders = {0, sigma};
  int next = 1;
  std::vector<Round> bcast;
  while (next < sigma) {
    Round round;
    const std::size_t senders = holders.size();
    for (std::size_t i = 0; i < senders && next < sigma; ++i, ++next) {
      round.push_back(Transfer{holders[i], next, all, TransferOp::copy});
      holders.push_back(next);
    }
    bcast.push_back(std::move(round));
  }
  s.phases.push_back(Phase{"broadcast", true, std::move(bcast)});
  return relabel(std::move(s), straggler_relabeling(n, straggler));
}

}  // namespace stragglar::detail
