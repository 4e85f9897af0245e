#include "runtime/auto/estimator.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/auto/late_detector.hpp"
#include "runtime/auto/stats.hpp"
#include "runtime/auto/window_exchange.hpp"

namespace stragglar::detail::auto_policy {

Estimator::Estimator(const PolicyConfig& c, Predictor predictor)
    : config_(c), predict_(std::move(predictor)), noise_(c.noise_prior) {
  for (Algorithm a : c.candidates) {
    cands_.push_back({a, algorithm_info(a).uses_straggler, uses_late_set(a), {}});
    cands_.back().samples.reserve(static_cast<std::size_t>(c.history));
  }
  // Every buffer at its final size now: deciding makes no heap allocation later (the runtime
  // core promises that for every configuration seen before, auto included).
  const std::size_t K = cands_.size(), H = static_cast<std::size_t>(c.history),
                    P = static_cast<std::size_t>(c.period), N = static_cast<std::size_t>(c.nranks);
  const std::size_t most = std::max({K * H, P, N, K});
  for (auto* v : {&work_, &values_, &devs_, &right_, &wrong_}) v->reserve(most);
  est_.resize(K);
  for (Estimate& e : est_) e.fresh_values.reserve(H);
}

Choice Estimator::choice_of(int k, const Targets& t) const {
  const Candidate& c = candidate(k);
  if (c.uses_set) return {c.algorithm, -1, t.late};
  return {c.algorithm, c.uses_straggler ? t.straggler : -1, {}};
}

bool Estimator::one_known_host(const Targets& t) const {
  const int rph = config_.ranks_per_host, n = static_cast<int>(t.late.size());
  return rph >= 2 && n == rph && config_.nranks % rph == 0 && 2 * rph <= config_.nranks && t.late.front() % rph == 0 &&
         t.late.back() == t.late.front() + rph - 1;
}

bool Estimator::available(int k, const Targets& t) const {
  const Candidate& c = candidate(k);
  if (!c.uses_set) return true;
  if (t.set < 0) return false;  // no set of 2+ late ranks has persisted yet
  // hierarchical's schedule reduces inside hosts of k ranks: the set must be one whole host, and
  // hosts must be known. stragglar-k is then left out: it sends every late rank's whole buffer
  // over the late host's one link, which the model (links between hosts not measured) cannot
  // price; where that link is slow it loses several-fold (docs/auto.md "Several late ranks").
  if (c.algorithm == Algorithm::hierarchical && !one_known_host(t)) return false;
  if (c.algorithm == Algorithm::stragglar_k && one_known_host(t) && has_candidate(Algorithm::hierarchical)) return false;
  const double p = predict_(choice_of(k, t), 0.0);  // a model for it (the core's always has one)
  return std::isfinite(p) && p > 0;
}

double Estimator::predict(const Choice& c, double delay_s) const {
  if (uses_late_set(c.algorithm) && c.late.empty()) return kNaN;  // no set learned: nothing to run
  const double v = predict_(c, delay_s);
  if (std::isfinite(v) && v > 0) return v;
  // No prediction (native: the engine's own AllReduce has no schedule to simulate). It is a
  // bulk-synchronous AllReduce that picks a good algorithm for the size, so it is modelled as
  // the best straggler-agnostic candidate that has a prediction; measurements correct the scale.
  if (algorithm_info(c.algorithm).uses_straggler) return kNaN;
  double best = kNaN;
  for (const Candidate& k : cands_) {
    if (k.uses_straggler || k.algorithm == c.algorithm) continue;
    const double p = predict_(Choice{k.algorithm, -1}, delay_s);
    if (std::isfinite(p) && p > 0 && !(best <= p)) best = p;
  }
  return best;
}

void Estimator::add_sample(Candidate& c, const Sample& s) {
  if (c.first_use_only()) c.samples.clear();  // a later call replaces the first-use measurement
  if (c.samples.size() == static_cast<std::size_t>(config_.history)) c.samples.erase(c.samples.begin());
  c.samples.push_back(s);
}

// Each call of the window with the overlap its choice could use in that call (a StragglAR call
// told the wrong rank overlapped nothing: delay 0).
void Estimator::add_window(const WindowExchange& exchange, const LateDetector& det, std::int64_t block) {
  const std::int64_t first = exchange.decided();
  for (int j = 0; j < exchange.window_calls(); ++j) {
    const CallRecord& r = exchange.call(first + j);
    Candidate& c = candidate(r.candidate);
    const int late = det.call_late(j);
    const double gap = det.call_gap(j);
    double d = c.uses_straggler ? (late == r.straggler ? gap : 0.0) : gap;
    if (c.uses_set) {
      // Told a set: it overlapped the gap before that set when exactly that set was late, the
      // single gap when one rank of the set was late alone, else nothing.
      const auto set_gap = det.call_set_gap(j, r.late);
      d = set_gap ? *set_gap : std::find(r.late.begin(), r.late.end(), late) != r.late.end() ? gap : 0.0;
    }
    // The configuration's first call, after the agreement: everyone had arrived, and it paid
    // first-use costs. A measurement at no delay, worth keeping only for a candidate that does
    // not depend on who is late (the first call runs one without a model: native).
    const bool first_call = first + j == 0 && config_.first_call_synchronised;
    if (first_call) {
      if (c.uses_straggler) continue;
      d = 0;
    }
    // Native's first run, where it is not the first call's: it paid its own first-use costs.
    const bool native_cold = !config_.first_call_measures_native && c.algorithm == Algorithm::native && c.samples.empty();
    const bool overlapped =
        c.uses_straggler && !c.uses_set && late == r.straggler && det.significant_gap(gap, det.call_exposed(j));
    add_sample(c, {det.call_exposed(j), predict(Choice{c.algorithm, r.straggler, r.late}, d), block, first_call || native_cold,
                   overlapped});
  }
}

// A straggler-using candidate overlaps the delay only in the calls in which its straggler is in
// fact the last to arrive (the fraction `persistence` of recent calls): its model is the mixture.
// A straggler late in one call of three is worth little; one late in every call, all of the overlap.
double Estimator::predicted_now(int k, const Targets& t, const Delays& d) const {
  const Candidate& c = candidate(k);
  const Choice ch = choice_of(k, t);
  if (c.uses_set)  // the same mixture, over the calls in which the target set was late together
    return d.set_persistence >= 1 ? predict(ch, d.set_s)
                                  : d.set_persistence * predict(ch, d.set_s) + (1 - d.set_persistence) * predict(ch, 0.0);
  if (c.uses_straggler)
    return d.persistence >= 1 ? predict(ch, d.target_s)
                              : d.persistence * predict(ch, d.target_s) + (1 - d.persistence) * predict(ch, 0.0);
  return predict(ch, d.all_s);
}

void Estimator::estimate_one(int k, const Targets& t, const Delays& d, std::int64_t block) {
  const Candidate& c = candidate(k);
  Estimate& e = est_[static_cast<std::size_t>(k)];
  if (c.uses_set && !available(k, t)) {  // no late set (or not a host): not a candidate now
    e.predicted = e.value = kNaN;
    e.fresh = 0;
    e.measured = false;
    e.fresh_values.clear();
    return;
  }
  e.predicted = predicted_now(k, t, d);
  // Two regimes measured (a straggler late in some calls only): each sample at its regime's level
  // of the rebuilt mixture (regime_mixture).
  const Regimes regimes =
      c.uses_straggler && !c.uses_set && d.persistence < 1 ? regime_mixture(k, t, d.target_s, d.persistence, block) : Regimes{};
  e.fresh_values.clear();
  values_.clear();
  for (auto s = c.samples.rbegin(); s != c.samples.rend(); ++s) {
    // Move the measurement to the current delay with the model's ratio (its absolute seconds may
    // be off). No model (native): assumed not to depend on the delay, as a bulk-synchronous
    // AllReduce does not.
    const double ratio = std::isfinite(e.predicted) && std::isfinite(s->predicted_s) ? e.predicted / s->predicted_s : 1.0;
    const double v = regimes.mixture > 0 && !s->first_use && std::isfinite(s->predicted_s)
                         ? s->exposed_s / s->predicted_s / (s->overlapped ? regimes.level_late : regimes.level_other) *
                               regimes.mixture
                         : s->exposed_s * ratio;
    values_.push_back(v);
    if (!s->first_use && std::abs(ratio - 1) <= config_.fresh_tolerance && block - s->block <= config_.stale_blocks)
      e.fresh_values.push_back(v);
  }
  e.fresh = static_cast<int>(e.fresh_values.size());
  e.measured = e.fresh >= config_.min_samples;
  e.value = e.measured ? lower_quartile(e.fresh_values, work_) : lower_quartile(values_, work_);
}

void Estimator::estimate_all(const Targets& t, const Delays& d, std::int64_t block) {
  for (int k = 0; k < size(); ++k) estimate_one(k, t, d, block);
  update_noise();
  scale_unmeasured();
}

// The relative spread of calls (σ): 1.4826 × the median absolute relative deviation from each
// candidate's median (robust to outliers, as the medians are), pooled over candidates with at
// least 3 fresh measurements (two say little about spread), and smoothed over decisions from
// config.noise_prior: it is a property of the host more than of one window.
void Estimator::update_noise() {
  devs_.clear();
  for (const Estimate& e : est_) {
    if (e.fresh < 3) continue;
    std::vector<double>& v = work_;
    v.assign(e.fresh_values.begin(), e.fresh_values.end());
    std::sort(v.begin(), v.end());
    const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    for (double x : v) devs_.push_back(std::abs(x / med - 1));
  }
  if (devs_.empty()) return;
  std::sort(devs_.begin(), devs_.end());
  const std::size_t m = devs_.size() / 2;
  const double sigma = 1.4826 * (devs_.size() % 2 ? devs_[m] : (devs_[m - 1] + devs_[m]) / 2);
  noise_ = 0.75 * noise_ + 0.25 * sigma;
}

// Never measured: the model scaled by how far it is off for the measured candidates.
void Estimator::scale_unmeasured() {
  values_.clear();
  for (int k = 0; k < size(); ++k)
    if (!candidate(k).samples.empty() && !candidate(k).first_use_only() && std::isfinite(estimate(k).predicted))
      values_.push_back(estimate(k).value / estimate(k).predicted);
  const double scale = lower_median(values_, work_);
  for (int k = 0; k < size(); ++k)
    if (candidate(k).samples.empty()) est_[static_cast<std::size_t>(k)].value = estimate(k).predicted * scale;  // NaN when either is unknown
}

// A straggler-using candidate whose straggler is late in some of the recent calls only (two that
// alternate, a different rank each call) has two regimes: the calls that overlap the delay and the
// calls where another rank is late and nothing overlaps. The model moves both to their mixture,
// but on a shared host it is off by a different factor in each (docs/auto.md "Estimates"). With
// measurements in both regimes, each regime's level is its median measured/model ratio; returns
// the two levels and the mixture rebuilt from them — mixture 0 when a regime has no recent
// measurement (the model's mixture moves them then).
Estimator::Regimes Estimator::regime_mixture(int k, const Targets& t, double delay_target_s, double persistence,
                                             std::int64_t block) {
  const Choice ch = choice_of(k, t);
  const double at_right = predict(ch, delay_target_s), at_wrong = predict(ch, 0.0);
  if (!std::isfinite(at_right) || !std::isfinite(at_wrong)) return {};
  right_.clear();
  wrong_.clear();
  for (const Sample& s : candidate(k).samples) {
    if (s.first_use || !std::isfinite(s.predicted_s) || block - s.block > config_.stale_blocks) continue;
    (s.overlapped ? right_ : wrong_).push_back(s.exposed_s / s.predicted_s);
  }
  if (right_.empty() || wrong_.empty()) return {};  // one regime seen: the model moves it
  Regimes r;
  r.level_late = lower_median(right_, work_);
  r.level_other = lower_median(wrong_, work_);
  r.mixture = persistence * r.level_late * at_right + (1 - persistence) * r.level_other * at_wrong;
  return r;
}

}  // namespace stragglar::detail::auto_policy
