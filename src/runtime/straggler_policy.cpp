// The façade of auto's stages (src/runtime/auto/; docs/auto.md "The stages"): one decision reads
// the window, votes who is late, estimates every candidate, selects, and plans the probes.
#include "runtime/straggler_policy.hpp"

#include "runtime/auto/config_check.hpp"
#include "runtime/auto/trace.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {
namespace {

const PolicyConfig& checked(const PolicyConfig& config, const Predictor& predictor) {
  auto_policy::check_config(config);
  require(static_cast<bool>(predictor), "straggler policy: the predictor is empty, expected a callable");
  return config;
}

}  // namespace

StragglerPolicy::StragglerPolicy(PolicyConfig config, Predictor predictor)
    : config_(std::move(config)),
      exchange_(checked(config_, predictor)),
      detector_(config_),
      estimator_(config_, std::move(predictor)),
      selection_(config_),
      probes_(config_, static_cast<int>(config_.candidates.size())) {
  // No survey: from the first measured call on, the candidates are ranked by the model scaled to
  // what was measured, and only those that could be the best are probed.
  selection_.start(estimator_, targets());
  if (config_.first_call_measures_native) probes_.probe_unmodelled(estimator_, targets(), selection_.incumbent());
  update_next();
}

auto_policy::Targets StragglerPolicy::targets() const {
  return {detector_.target(), detector_.target_set(), detector_.set(detector_.target_set())};
}

void StragglerPolicy::update_next() {
  next_ = choice_of(probes_.pending() ? probes_.peek() : selection_.incumbent());
  incumbent_choice_ = choice_of(selection_.incumbent());
}

Choice StragglerPolicy::begin_call() {
  const bool probing = probes_.pending();
  const int cand = probing ? probes_.take() : selection_.incumbent();
  // Budgets count calls run, not planned: a plan replaced within a block (a switch) ran less.
  if (probing) ++estimator_.candidate(cand).burst_calls;
  const Choice c = choice_of(cand);
  const int set = estimator_.candidate(cand).uses_set ? detector_.target_set() : -1;
  exchange_.begin({cand, c.algorithm, c.straggler, set, detector_.set(set), -1, -1});
  update_next();
  return c;
}

void StragglerPolicy::record(double seconds_in_call, std::int64_t entry_ns) { exchange_.record(seconds_in_call, entry_ns); }

bool StragglerPolicy::decide(std::span<const std::int64_t> all) {
  const std::span<const std::int64_t> times = exchange_.open(all, decisions_);
  const int W = exchange_.window_calls(), P = config_.period;
  const std::int64_t first = exchange_.decided();
  const std::int64_t block = first / P;  // staleness, dwell and probes count blocks of P calls
  detector_.observe(times, exchange_.slots_per_rank(), W, first);
  const int old_target = detector_.target(), old_late = detector_.late_rank(), old_target_set = detector_.target_set();
  const Choice old_choice = incumbent_choice_;
  detector_.vote();
  estimator_.add_window(exchange_, detector_, block);
  const auto_policy::Targets t = targets();
  estimator_.estimate_all(t,
                          {detector_.delay_s(), detector_.delay_target_s(), detector_.persistence(),
                           detector_.delay_set_s(), detector_.set_persistence()},
                          block);
  const int best = auto_policy::Selection::best(estimator_);
  std::string reason;
  const bool switched = selection_.consider(best, estimator_, t, old_choice, block, config_.keep_evidence ? &reason : nullptr);
  // Probes are planned once per block (their budgets count blocks), and again when the choice or a
  // target changed: decisions after every call do not multiply them.
  const std::int64_t next_block = (first + W) / P;
  const bool moved = detector_.target() != old_target || detector_.late_rank() != old_late ||
                     detector_.target_set() != old_target_set;
  if (switched || moved || next_block != probes_.planned_block())
    probes_.plan(best, selection_.incumbent(), block, next_block, estimator_, t, detector_.delay_s());
  ++decisions_;
  update_next();
  const bool changed = !(incumbent_choice_ == old_choice);
  const bool quiet = !probes_.pending() && !changed && detector_.late_rank() == old_late &&
                     detector_.target_set() == old_target_set && estimator_.estimate(selection_.incumbent()).measured;
  exchange_.close(quiet);
  if (changed && config_.keep_evidence)
    explain(first, old_choice, std::move(reason), old_target, detector_.target_set() != old_target_set);
  if (config_.keep_trace)
    trace_ = auto_policy::decision_trace({first, exchange_.decided() - 1, detector_, estimator_, t}, incumbent_choice_,
                                         probes_.remaining(), exchange_.window_calls(), config_.shared_clock);
  return changed;
}

void StragglerPolicy::explain(std::int64_t first, const Choice& old_choice, std::string reason, int old_target,
                              bool set_changed) {
  const auto_policy::Targets t = targets();
  evidence_ = auto_policy::switch_evidence({first, exchange_.decided() - 1, detector_, estimator_, t}, old_choice,
                                           incumbent_choice_, std::move(reason), old_target, set_changed);
}

}  // namespace stragglar::detail
