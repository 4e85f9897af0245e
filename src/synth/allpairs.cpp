// MSCCL "allpairs" (paper appendix "Discussion of Baselines"): n chunks, two rounds with every
// rank talking to all others at once (ports = all, bandwidth split): rank j reduces chunk j
// from everyone, then sends it to everyone. T = 2α + 2(n-1)/n·sβ.
#include "synth/synth_internal.hpp"

namespace stragglar::detail {

Schedule synthesize_allpairs(int n) {
  Round reduce, gather;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst) {
      if (src == dst) continue;
      reduce.push_back(Transfer{src, dst, {dst}, TransferOp::reduce});
      gather.push_back(Transfer{src, dst, {src}, TransferOp::copy});
    }
  Schedule s;
  s.algorithm = "allpairs";
  s.nranks = n;
  s.nchunks = n;
  s.ports = kAllPorts;
  s.phases.push_back(Phase{"reduce_scatter", true, {std::move(reduce)}});
  s.phases.push_back(Phase{"allgather", true, {std::move(gather)}});
  return s;
}

}  // namespace stragglar::detail
