// The C boundary shared by every runtime (MPI and NCCL): the thread-local message behind
// stragglar_last_error(), option defaults and result strings (docs/runtime.md).
#include <string>

#include "runtime/last_error.hpp"
#include "stragglar/stragglar.h"

namespace {

thread_local std::string t_last_error;

}  // namespace

void stragglar::detail::set_last_error(const std::string& message) { t_last_error = message; }

stragglar::Options stragglar::detail::options_from_c(const stragglar_options* opts) noexcept {
  stragglar_options c;
  stragglar_options_init(&c);
  if (opts != nullptr) c = *opts;
  Options o;
  o.algorithm = static_cast<Algorithm>(c.algorithm);
  o.straggler = c.straggler;
  o.pipeline = c.pipeline;
  // A negative count or a NULL array with a count is refused by the call (late_set_of names it):
  // rank -1 stands for it, as no valid set holds it.
  if (c.nstragglers < 0 || c.nstragglers > stragglar::kMaxRanks || (c.nstragglers > 0 && c.stragglers == nullptr))
    o.stragglers = {-1};
  else if (c.nstragglers > 0) o.stragglers.assign(c.stragglers, c.stragglers + c.nstragglers);
  return o;
}

void stragglar::detail::report_to_c(const StragglerReport& r, int nranks, stragglar_straggler_report* out,
                                    double* scores, int nscores) {
  require(out != nullptr, "straggler report: report is NULL, expected a stragglar_straggler_report to fill");
  require(nscores >= 0, "straggler report: nscores " + std::to_string(nscores) + " is negative");
  out->active = r.active ? 1 : 0;
  out->algorithm = static_cast<stragglar_algorithm>(r.algorithm);
  out->straggler = r.straggler;
  out->late_rank = r.late_rank;
  out->delay_s = r.delay_s;
  out->calls = static_cast<long long>(r.calls);
  out->nranks = nranks;
  if (scores == nullptr) return;
  for (int i = 0; i < nscores && i < static_cast<int>(r.scores.size()); ++i) scores[i] = r.scores[static_cast<std::size_t>(i)];
}

extern "C" {

void stragglar_options_init(stragglar_options* opts) {
  if (opts == nullptr) return;
  stragglar::Options o;
  try {
    o = stragglar::options_from_env();
  } catch (const stragglar::Error&) {  // no status here: the first call reports the variable
  }
  opts->algorithm = static_cast<stragglar_algorithm>(o.algorithm);
  opts->straggler = o.straggler;
  opts->pipeline = o.pipeline;
  opts->stragglers = nullptr;
  opts->nstragglers = 0;
}

const char* stragglar_last_error(void) { return t_last_error.c_str(); }

const char* stragglar_result_string(stragglar_result r) {
  switch (r) {
    case stragglar_success: return "success";
    case stragglar_invalid_usage: return "invalid usage";
    case stragglar_mismatch: return "ranks disagree on the call's arguments";
    case stragglar_timeout: return "timeout: a peer is later than the timeout, stopped, died, or called with different arguments";
    case stragglar_remote_error: return "error on a remote rank";
    case stragglar_system_error: return "system error (MPI / CUDA / NCCL)";
    case stragglar_internal_error: return "internal error";
  }
  return "unknown stragglar_result";
}

}  // extern "C"
