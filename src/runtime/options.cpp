// stragglar::Options helpers shared by every front-end (include/stragglar/options.hpp).
#include "stragglar/options.hpp"

#include <algorithm>
#include <string>

#include "plan/plan_cache.hpp"
#include "runtime/env.hpp"
#include "stragglar/error.hpp"

namespace stragglar {

Options options_from_env() {
  const detail::Env& e = detail::env();
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
  const int straggler = o.straggler < 0 ? nranks - 1 : o.straggler;
  const detail::ScheduleKey key{o.algorithm, nranks, info.uses_straggler ? straggler : -1,
                                resolve_pipeline(o, nranks, bytes)};
  return detail::cached_schedule(key, detail::env().verify);
}

}  // namespace stragglar
