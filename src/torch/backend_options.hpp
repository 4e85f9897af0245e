// The options of a "stragglar" process group (Python: stragglar.torch.Options, passed as
// pg_options to init_process_group / new_group). No torch headers: plain data and parsing.
#pragma once
#include <string>

#include "stragglar/options.hpp"

namespace stragglar::torch_backend {

struct BackendOptions {
  // What every all_reduce of the group runs (docs/torch.md "Options"). Defaults come from the
  // environment: STRAGGLAR_ALGORITHM (auto), STRAGGLAR_STRAGGLER (-1 = the last rank),
  // STRAGGLAR_PIPELINE (auto).
  Options core;
  // The straggler came from STRAGGLAR_STRAGGLER: one variable for every group of the job, so it
  // names a rank of the whole job; the backend's creator maps it to the group's numbering.
  bool straggler_from_env = false;

  // Each field from its argument when given (non-empty / present), else from the environment,
  // else the core's default. Throws Error(InvalidUsage) naming a bad value (argument or
  // variable). The straggler's upper bound is the group size, checked by the core's agreement
  // on the first call (every rank gets the error).
  static BackendOptions make(const std::string& algorithm, const int* straggler, const std::string& pipeline);

  std::string algorithm_name() const;
  std::string pipeline_text() const;  // "auto" or K
  std::string to_string() const;      // "Options(algorithm='stragglar', straggler=-1, pipeline='auto')"
};

}  // namespace stragglar::torch_backend
