// synthesize(): argument checks shared by every algorithm, then dispatch to src/synth/<algo>.cpp.
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar {

const char* to_string(Algorithm a) noexcept {
  switch (a) {
    case Algorithm::stragglar: return "stragglar";
    case Algorithm::ring: return "ring";
    case Algorithm::rhd: return "rhd";
    case Algorithm::allpairs: return "allpairs";
    case Algorithm::broadcast: return "broadcast";
  }
  return "?";
}

const std::vector<Algorithm>& all_algorithms() {
  static const std::vector<Algorithm> all = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd,
                                             Algorithm::allpairs, Algorithm::broadcast};
  return all;
}

Algorithm parse_algorithm(std::string_view name) {
  for (Algorithm a : all_algorithms())
    if (name == to_string(a)) return a;
  if (name == "direct") return Algorithm::broadcast;  // the paper's code name for it
  throw Error(ErrorCode::InvalidUsage, "unknown algorithm '" + std::string(name) +
                                           "': expected one of stragglar, ring, rhd, allpairs, broadcast (alias direct)");
}

Schedule synthesize(Algorithm algo, int nranks, const SynthOptions& opts) {
  require(nranks >= kMinRanks && nranks <= kMaxRanks,
          "nranks = " + std::to_string(nranks) + ", expected " + std::to_string(kMinRanks) + " <= nranks <= " +
              std::to_string(kMaxRanks));
  const int straggler = opts.straggler.value_or(nranks - 1);
  require(straggler >= 0 && straggler < nranks,
          "straggler = " + std::to_string(straggler) + ", expected a rank in [0, " + std::to_string(nranks) + ")");
  require(opts.pipeline >= 0,
          "pipeline = " + std::to_string(opts.pipeline) + ", expected a positive K or auto");
  switch (algo) {
    case Algorithm::stragglar: return detail::synthesize_stragglar(nranks, straggler, opts);
    case Algorithm::ring: return detail::synthesize_ring(nranks);
    case Algorithm::rhd: return detail::synthesize_rhd(nranks);
    case Algorithm::allpairs: return detail::synthesize_allpairs(nranks);
    case Algorithm::broadcast: return detail::synthesize_broadcast(nranks, straggler);
  }
  throw Error(ErrorCode::InvalidUsage, "unknown algorithm value " + std::to_string(static_cast<int>(algo)));
}

namespace detail {

std::vector<int> straggler_relabeling(int n, int straggler) {
  // rank r -> (r + straggler + 1) mod n, so n-1 -> straggler and the ring order is kept.
  std::vector<int> perm(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) perm[r] = (r + straggler + 1) % n;
  return perm;
}

}  // namespace detail
}  // namespace stragglar
