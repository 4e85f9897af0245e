#include "runtime/auto/config_check.hpp"

#include <cmath>
#include <limits>

#include "runtime/auto/trace.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail::auto_policy {
namespace {

void check_int(bool ok, const char* name, long long value, const char* expected) {
  if (!ok) bad_int(name, value, expected);
}
void check_fraction(double v, const char* name, double hi, const char* expected) {
  require(std::isfinite(v) && v >= 0 && v < hi, std::string("straggler policy: ") + name + " " + fmt_g(v) +
                                                    " is not valid, expected " + expected);
}

void check_candidates(const PolicyConfig& c) {
  require(!c.candidates.empty(), "straggler policy: the candidate list is empty, expected at least one of " +
                                     algorithm_names());
  for (std::size_t i = 0; i < c.candidates.size(); ++i) {
    const AlgorithmInfo& info = algorithm_info(c.candidates[i]);  // throws for a value not in the table
    require(info.kind != AlgorithmKind::automatic,
            "straggler policy: candidate 'auto' is not valid, expected an algorithm auto can run "
            "(a schedule or native)");
    for (std::size_t j = 0; j < i; ++j)
      require(c.candidates[j] != c.candidates[i],
              std::string("straggler policy: candidate '") + info.name + "' is listed twice, expected each once");
  }
}

}  // namespace

void bad_int(const char* name, long long value, const char* expected) {
  throw Error(ErrorCode::InvalidUsage, std::string("straggler policy: ") + name + " " + std::to_string(value) +
                                           " is not valid, expected " + expected);
}

void check_config(const PolicyConfig& c) {
  check_int(c.nranks >= 1 && c.nranks <= kMaxRanks, "nranks", c.nranks, "1 to 4096 ranks");
  check_int(c.period >= 1 && c.period <= 1000, "period", c.period, "1 to 1000 calls per block");
  check_int(c.exchange_every >= 0 && c.exchange_every <= c.period, "exchange_every", c.exchange_every,
            "0 (= period) to period calls per exchange");
  const int window = c.exchange_every > 0 ? c.exchange_every : c.period;
  check_int(c.settled_exchange_every == 0 || (c.settled_exchange_every >= window && c.settled_exchange_every <= c.period),
            "settled_exchange_every", c.settled_exchange_every, "0 (= exchange_every) or exchange_every to period calls");
  check_int(c.min_samples >= 1, "min_samples", c.min_samples, "an integer >= 1");
  check_int(c.history >= c.min_samples && c.history <= 1000, "history", c.history, "an integer from min_samples to 1000");
  check_int(c.min_dwell_blocks >= 0, "min_dwell_blocks", c.min_dwell_blocks, "an integer >= 0");
  check_int(c.refresh_blocks >= 1, "refresh_blocks", c.refresh_blocks, "an integer >= 1");
  check_int(c.stale_blocks >= 1, "stale_blocks", c.stale_blocks, "an integer >= 1");
  check_fraction(c.switch_margin, "switch_margin", 1, "a fraction in [0, 1)");
  check_fraction(c.model_error, "model_error", 1, "a fraction in [0, 1)");
  check_fraction(c.fresh_tolerance, "fresh_tolerance", 1, "a fraction in [0, 1)");
  check_fraction(c.min_delay_fraction, "min_delay_fraction", 1, "a fraction in [0, 1)");
  check_fraction(c.noise_prior, "noise_prior", 1, "a fraction in [0, 1)");
  check_int(c.ranks_per_host >= 0 && c.ranks_per_host <= c.nranks, "ranks_per_host", c.ranks_per_host,
            "0 (hosts unknown) to nranks");
  check_int(c.max_late_sets >= 1 && c.max_late_sets <= 64, "max_late_sets", c.max_late_sets, "1 to 64 learned sets");
  check_fraction(c.min_delay_s, "min_delay_s", std::numeric_limits<double>::infinity(), "seconds >= 0");
  check_candidates(c);
  check_int(c.initial_straggler >= -1 && c.initial_straggler < c.nranks, "initial_straggler", c.initial_straggler,
            "a rank in [0, nranks) or -1");
}

}  // namespace stragglar::detail::auto_policy
