// Recursive halving/doubling (paper appendix "Discussion of Baselines", the "butterfly";
// Thakur et al. 2005). For n = 2^k: log n halving rounds (ReduceScatter) then log n doubling
// rounds (AllGather): T = 2 log n·α + 2(n-1)/n·sβ.
//
// For other n we use the standard reduction to the nearest lower power of two p (as MPICH's
// and Open MPI's Rabenseifner allreduce do): with rem = n - p, each even rank 2i < 2·rem first
// hands its whole buffer to 2i+1 (reduce), the p remaining ranks run RHD, and 2i+1 finally
// copies the result back to 2i. That costs 2 extra rounds of s bytes.
//
// Halving, n = 4, chunks 0..3 (rank: chunk range it keeps):
//   round 0 (mask 2): 0<->2, 1<->3, low ranks keep [0,2), high ranks keep [2,4)
//   round 1 (mask 1): 0<->1, 2<->3 → rank r keeps chunk r, complete
#include <bit>
#include <numeric>

#include "synth/synth_internal.hpp"

namespace stragglar::detail {
namespace {

std::vector<int> iota_chunks(int first, int last) {
  std::vector<int> v(static_cast<std::size_t>(last - first));
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

Schedule synthesize_rhd(int n) {
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int rem = n - p;
  // real rank of virtual rank v in the power-of-two group
  auto real = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };

  Schedule s;
  s.algorithm = "rhd";
  s.nranks = n;
  s.nchunks = p;
  s.ports = 1;
  const std::vector<int> all = iota_chunks(0, p);

  if (rem > 0) {
    Round fold;
    for (int i = 0; i < rem; ++i) fold.push_back(Transfer{2 * i, 2 * i + 1, all, TransferOp::reduce});
    s.phases.push_back(Phase{"fold", true, {std::move(fold)}});
  }

  // lo[v], hi[v]: the chunk range virtual rank v is responsible for.
  std::vector<int> lo(static_cast<std::size_t>(p), 0), hi(static_cast<std::size_t>(p), p);
  std::vector<Round> halving;
  for (int mask = p / 2; mask >= 1; mask /= 2) {
    Round round;
    std::vector<int> nlo = lo, nhi = hi;
    for (int v = 0; v < p; ++v) {
      const int mid = (lo[v] + hi[v]) / 2;
      const bool upper = v & mask;
      // send the half the partner keeps
      round.push_back(Transfer{real(v), real(v ^ mask), upper ? iota_chunks(lo[v], mid) : iota_chunks(mid, hi[v]),
                               TransferOp::reduce});
      (upper ? nlo[v] : nhi[v]) = mid;
    }
    lo = nlo;
    hi = nhi;
    halving.push_back(std::move(round));
  }
  std::vector<Round> doubling;
  for (int mask = 1; mask < p; mask *= 2) {
    Round round;
    std::vector<int> nlo = lo, nhi = hi;
    for (int v = 0; v < p; ++v) {
      const int w = v ^ mask;
      round.push_back(Transfer{real(v), real(w), iota_chunks(lo[v], hi[v]), TransferOp::copy});
      nlo[v] = std::min(lo[v], lo[w]);
      nhi[v] = std::max(hi[v], hi[w]);
    }
    lo = nlo;
    hi = nhi;
    doubling.push_back(std::move(round));
  }
  if (!halving.empty()) s.phases.push_back(Phase{"reduce_scatter", true, std::move(halving)});
  if (!doubling.empty()) s.phases.push_back(Phase{"allgather", true, std::move(doubling)});

  if (rem > 0) {
    Round unfold;
    for (int i = 0; i < rem; ++i) unfold.push_back(Transfer{2 * i + 1, 2 * i, all, TransferOp::copy});
    s.phases.push_back(Phase{"unfold", true, {std::move(unfold)}});
  }
  return s;
}

}  // namespace stragglar::detail
