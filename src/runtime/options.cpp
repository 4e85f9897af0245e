// stragglar::Options helpers shared by every front-end (include/stragglar/options.hpp).
#include "stragglar/options.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>
#include <string>

#include "plan/plan_cache.hpp"
#include "runtime/env.hpp"
#include "runtime/late_set.hpp"
#include "stragglar/error.hpp"

namespace stragglar {

Options options_from_env() {
  const detail::RuntimeConfig& e = detail::env();
  Options o;
  if (e.algorithm) o.algorithm = *e.algorithm;
  if (e.straggler) o.straggler = *e.straggler;
  if (e.pipeline) o.pipeline = *e.pipeline;
  return o;
}

Options options_for(std::string_view algorithm_name) {
  Options o;
  o.algorithm = parse_algorithm(algorithm_name);
  return o;
}

int resolve_pipeline(const Options& o, int nranks, std::size_t bytes) {
  const AlgorithmInfo& info = algorithm_info(o.algorithm);
  if (o.pipeline < 0 || o.pipeline > kMaxPipeline)  // on auto's path: no string unless it fails
    throw Error(ErrorCode::InvalidUsage, "pipeline " + std::to_string(o.pipeline) + " is outside [1, " +
                                             std::to_string(kMaxPipeline) + "] (or 0 for auto)");
  if (!info.pipelined || nranks < kMinRanks) return 1;
  if (o.pipeline != kPipelineAuto) return o.pipeline;
  if (o.algorithm == Algorithm::stragglar_k) {
    const int late = std::max<int>(1, static_cast<int>(o.stragglers.size()));
    if (2 * late > nranks)
      throw Error(ErrorCode::InvalidUsage, std::to_string(late) + " stragglers on " + std::to_string(nranks) +
                                               " ranks, expected at most n/2");
    return choose_stragglar_k_pipeline(nranks, late, bytes, o.cost.value_or(detail::env().cost));
  }
  if (o.algorithm == Algorithm::hierarchical) {
    if (o.stragglers.size() < 2) return 1;  // one late rank: StragglAR across single-rank hosts, as before
    std::vector<int> late = o.stragglers;
    std::sort(late.begin(), late.end());
    return choose_hierarchical_pipeline(nranks, late, bytes, o.cost.value_or(detail::env().cost));
  }
  return std::max(1, choose_pipeline(nranks, bytes, o.cost.value_or(detail::env().cost)));
}

std::shared_ptr<const Schedule> schedule_for(const Options& o, int nranks, std::size_t bytes) {
  const AlgorithmInfo& info = algorithm_info(o.algorithm);
  if (info.kind != AlgorithmKind::schedule)
    throw Error(ErrorCode::InvalidUsage, std::string("schedule_for: algorithm '") + info.name +
                                             "' has no schedule, expected one of " + algorithm_names(true));
  if (o.straggler < -1 || o.straggler >= nranks)
    throw Error(ErrorCode::InvalidUsage, "schedule_for: straggler " + std::to_string(o.straggler) +
                                             " is outside [0, " + std::to_string(nranks) + ") (or -1 for rank n-1)");
  int straggler = o.straggler < 0 ? nranks - 1 : o.straggler;
  std::vector<int> late = detail::late_set_of(o, nranks, "schedule_for");
  if (late.size() == 1) straggler = late.front(), late.clear();
  const detail::ScheduleKey key{o.algorithm, nranks, info.uses_straggler && late.empty() ? straggler : -1,
                                resolve_pipeline(o, nranks, bytes), late};
  return detail::cached_schedule(key, detail::env().verify);
}

namespace detail {

std::vector<int> late_set_of(const Options& o, int nranks, const std::string& api) {
  if (o.stragglers.empty()) return {};
  std::vector<int> late = o.stragglers;
  std::sort(late.begin(), late.end());
  for (std::size_t i = 0; i < late.size(); ++i) {
    if (late[i] < 0 || late[i] >= nranks)
      throw Error(ErrorCode::InvalidUsage, api + ": stragglers: rank " + std::to_string(late[i]) + " is outside [0, " +
                                               std::to_string(nranks) + ")");
    if (i > 0 && late[i] == late[i - 1])
      throw Error(ErrorCode::InvalidUsage, api + ": stragglers: rank " + std::to_string(late[i]) +
                                               " is given twice, expected distinct ranks");
  }
  if (late.size() == 1) return late;
  if (o.algorithm == Algorithm::stragglar_k || o.algorithm == Algorithm::hierarchical) {
    if (2 * late.size() > static_cast<std::size_t>(nranks))
      throw Error(ErrorCode::InvalidUsage, api + ": " + std::to_string(late.size()) + " stragglers on " +
                                               std::to_string(nranks) + " ranks, expected at most n/2 = " +
                                               std::to_string(nranks / 2));
    return late;
  }
  const AlgorithmInfo* info = find_algorithm(o.algorithm);
  if (info && info->uses_straggler)
    throw Error(ErrorCode::InvalidUsage, api + ": algorithm " + info->name + " handles one late rank, got " +
                                             std::to_string(late.size()) + " stragglers; expected stragglar-k for several");
  return {};  // ring, rhd, allpairs, native, auto: the set changes nothing
}

std::uint64_t late_set_fingerprint(const std::vector<int>& stragglers) noexcept {
  // Order-independent (a sum of mixed ranks) so that no sorted copy is needed per call.
  std::uint64_t h = stragglers.size();
  for (int r : stragglers) {
    std::uint64_t x = static_cast<std::uint64_t>(r) + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    h += x ^ (x >> 31);
  }
  return h;
}

}  // namespace detail
}  // namespace stragglar
