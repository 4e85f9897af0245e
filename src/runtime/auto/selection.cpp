#include "runtime/auto/selection.hpp"

#include <cmath>
#include <limits>

#include "runtime/auto/trace.hpp"

namespace stragglar::detail::auto_policy {

Selection::Selection(const PolicyConfig& c)
    : switch_margin_(c.switch_margin),
      model_error_(c.model_error),
      min_dwell_blocks_(c.min_dwell_blocks),
      start_with_native_(c.start_with_native) {}

void Selection::start(const Estimator& est, const Targets& t) {
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < est.size(); ++k) {
    const double p = est.predict(est.choice_of(k, t), 0.0);
    if (p < best) best = p, incumbent_ = k;
  }
  if (start_with_native_)
    for (int k = 0; k < est.size(); ++k)
      if (est.candidate(k).algorithm == Algorithm::native) incumbent_ = k;
}

int Selection::best(const Estimator& est) {
  int best = -1;
  for (int k = 0; k < est.size(); ++k)
    if (std::isfinite(est.estimate(k).value) && !est.candidate(k).first_use_only() &&  // a cold first call: measured again first
        (best < 0 || est.estimate(k).value < est.estimate(best).value))
      best = k;
  return best;
}

bool Selection::consider(int best, const Estimator& est, const Targets& t, const Choice& incumbent_choice,
                         std::int64_t block, std::string* reason) {
  if (best < 0 || best == incumbent_) return false;
  const Estimate& b = est.estimate(best);
  const Estimate& i = est.estimate(incumbent_);
  bool switched = false;
  if (!std::isfinite(i.value)) {
    switched = true;
    incumbent_by_model_ = !b.measured;
    if (reason) *reason = "the previous choice has no estimate";
  } else if (b.measured || (b.fresh >= 1 && i.fresh >= 1)) {
    // (One fresh measurement is enough to switch when it beats the incumbent's by the margin: a
    // shared host's noise only slows calls down, so a fast call is no accident.)
    switched = measured_switch(best, est, t, block, reason);
  } else {
    switched = model_switch(best, est, reason);
  }
  if (switched) {
    previous_choice_ = incumbent_choice;
    incumbent_ = best;
    last_change_block_ = block;
  }
  return switched;
}

// Two lower quartiles of m_b and m_i samples differ by chance by about 1.36·σ·sqrt(1/m_b + 1/m_i)
// (the standard error of a quartile is 1.36·σ/sqrt(m)); 1.5 of those: ~7% of comparisons between
// equal candidates, and the dwell rule stops those from flapping back. Native is what the user
// runs without us: measured native replaces a schedule when lower by switch_margin alone.
bool Selection::measured_switch(int best, const Estimator& est, const Targets& t, std::int64_t block, std::string* reason) {
  const Estimate& b = est.estimate(best);
  const Estimate& i = est.estimate(incumbent_);
  const double noise = est.noise();
  const double se = 1.36 * noise * std::sqrt(1.0 / b.fresh + (i.measured ? 1.0 / i.fresh : 0.0));
  const bool native_over_schedule = est.candidate(best).algorithm == Algorithm::native && b.measured;
  const double margin = switch_margin_ + (native_over_schedule ? 0.0 : std::min(1.5 * se, model_error_));
  // Dwell: no measured switch straight back to the choice just left (flapping). The choice, not
  // the candidate: StragglAR told another rank is another choice (a straggler that moved).
  const bool dwell_ok = !(est.choice_of(best, t) == previous_choice_) || !i.measured || incumbent_by_model_ ||
                        block - last_change_block_ >= min_dwell_blocks_;
  if (!(b.value * (1 + margin) < i.value && dwell_ok)) return false;
  if (reason)
    *reason = "measured " + ms(b.value) + " vs " + ms(i.value) + " (margin " + fmt_g(std::round(margin * 1000) / 10) +
              "%: " +
              (native_over_schedule ? "the switch margin alone, measured native over a schedule)"
                                    : fmt_g(switch_margin_ * 100) + "% + 1.5 standard errors at noise " +
                                          fmt_g(std::round(noise * 1000) / 10) + "%)");
  incumbent_by_model_ = false;
  return true;
}

// An estimate without enough fresh measurements behind it switches only for a gain larger than the
// model's error; twice that against an incumbent measured only once (it may have met a slow outlier).
bool Selection::model_switch(int best, const Estimator& est, std::string* reason) {
  const Estimate& b = est.estimate(best);
  const Estimate& i = est.estimate(incumbent_);
  if (!(b.value * (1 + model_error_ * (i.measured ? 1 : 2)) < i.value)) return false;
  if (reason)
    *reason = "estimate " + ms(b.value) + " (too few fresh measurements: the model moves older ones to this delay) vs " +
              ms(i.value) + ", a gain beyond the model error " + fmt_g(model_error_ * 100) + "%";
  incumbent_by_model_ = true;
  return true;
}

}  // namespace stragglar::detail::auto_policy
