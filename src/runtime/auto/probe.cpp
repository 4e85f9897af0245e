#include "runtime/auto/probe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stragglar::detail::auto_policy {
namespace {
// Calls whose last arrival trails by at most this fraction of the call have "nobody late" for a
// second run of a candidate measured once.
constexpr double kQuietDelayFraction = 0.15;
}  // namespace

Probes::Probes(const PolicyConfig& c, int candidates) : config_(c) {
  const auto K = static_cast<std::size_t>(candidates), P = static_cast<std::size_t>(c.period);
  plan_.reserve(K + P + 1);
  needs_.reserve(K);
}

void Probes::probe_unmodelled(const Estimator& est, const Targets& t, int incumbent) {
  for (int k = 0; k < est.size(); ++k) {
    if (est.candidate(k).uses_straggler) continue;
    const double own = est.model(est.choice_of(k, t), 0.0);
    if (!(std::isfinite(own) && own > 0) && k != incumbent) {
      plan_.push_back(k);
      return;
    }
  }
}

// Who needs measuring, and how many calls: a candidate never measured (one probe), one measured
// fewer than min_samples times (a single outlier must not rule it out for good), or one whose
// estimate could be the best within the model's error but lacks fresh measurements. At most
// min_samples probe calls per candidate every refresh_blocks blocks, so delays that keep changing
// do not turn into endless probing. Far candidates (beyond the band) are not measured at all.
int Probes::calls_needed(int k, int incumbent, std::int64_t block, Estimator& est, const Bands& b) const {
  const Estimate& e = est.estimate(k);
  Candidate& c = est.candidate(k);
  if (block - c.burst_start >= config_.refresh_blocks) c.burst_start = block, c.burst_calls = 0;
  const int budget = std::min(1, config_.min_samples - c.burst_calls);
  // A first-use measurement alone (native's, from the configuration's first call) does not count:
  // the candidate is ranked by the model, as if never measured, and measured again.
  const int have = c.first_use_only() ? 0 : static_cast<int>(c.samples.size());
  const bool unknown = !std::isfinite(e.value);
  if (budget > 0 &&
      (unknown || ((have == 0 && std::isfinite(e.predicted) ? e.predicted <= b.model_band : e.value <= b.band) && e.fresh == 0)))
    return budget;  // one call: more only if it looks faster (below)
  const Estimate& inc = est.estimate(incumbent);
  // A straggler-agnostic candidate measured once, within the band, that the model ranks level with
  // the best, with nobody late: one run is one draw of noisy calls and may have paid first-use
  // costs — once more before it is ruled out (docs/auto.md "One run is not a verdict").
  const bool nobody_late = b.delay_s <= kQuietDelayFraction * b.best_value;
  if (nobody_late && !c.uses_straggler && have == 1 && e.fresh == 1 && e.value <= b.band && std::isfinite(e.predicted) &&
      e.predicted <= b.model_best * (1 + config_.switch_margin) && budget > 0)
    return budget;
  // Native measured fewer than min_samples times, within the noise of the incumbent, whoever is
  // late: more runs make it measured, and measured native replaces a schedule by switch_margin alone.
  if (c.algorithm == Algorithm::native && e.fresh >= 1 && e.fresh < config_.min_samples && std::isfinite(inc.value) &&
      e.value <= inc.value * (1 + config_.switch_margin + 2 * est.noise()) && budget > 0)
    return budget;
  // One fresh measurement that contradicts a model gain beyond the model's error (a slow outlier)
  // is measured once more before it rules the candidate out.
  if (e.fresh > 0 && e.fresh < config_.min_samples && std::isfinite(e.predicted) && std::isfinite(inc.predicted) &&
      e.predicted * (1 + config_.model_error) < inc.predicted && budget > 0)
    return budget;
  // Looks faster but not beyond the noise, or at a delay its measurements were not taken at
  // (budget spent): one call per plan to settle the question.
  const bool looks_faster = have == 0 ? e.predicted * (1 + config_.switch_margin) < inc.predicted  // model alone
                                      : e.value * (e.measured ? 1 : 1 + config_.switch_margin) < inc.value;
  return looks_faster ? 1 : 0;
}

void Probes::plan(int best, int incumbent, std::int64_t block, std::int64_t next_block, Estimator& est,
                     const Targets& t, double delay_s) {
  plan_.clear();
  pos_ = 0;
  planned_block_ = next_block;
  if (best < 0) best = incumbent;
  // "Could be the best": within the model's error of the best estimate, widened by twice the
  // noise (a candidate with one measurement may have met an outlier). A candidate never measured
  // is ranked by the model alone, within the model's error: predictions carry no measurement noise.
  Bands b{};
  b.best_value = est.estimate(best).value;
  b.band = std::isfinite(b.best_value) ? b.best_value * (1 + config_.model_error + 2 * est.noise())
                                       : std::numeric_limits<double>::infinity();
  b.model_best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < est.size(); ++k)
    if (std::isfinite(est.estimate(k).predicted)) b.model_best = std::min(b.model_best, est.estimate(k).predicted);
  b.model_band = b.model_best * (1 + config_.model_error);
  b.delay_s = delay_s;
  needs_.clear();
  for (int k = 0; k < est.size(); ++k) {
    if (k == incumbent || !est.available(k, t)) continue;
    const int calls = calls_needed(k, incumbent, block, est, b);
    if (calls > 0) needs_.push_back({k, calls, !std::isfinite(est.estimate(k).value), est.estimate(k).value});
  }
  fill(block);
  refresh(incumbent, block, est, b.band);
}

// Unknown candidates first, then by estimate; the first block surveys what could be the best (up
// to P calls), later at most P/2 calls per block, so that a benchmark's median never sees probes.
void Probes::fill(std::int64_t block) {
  std::sort(needs_.begin(), needs_.end(), [](const Need& a, const Need& b) {
    if (a.unknown != b.unknown) return a.unknown;
    if (!a.unknown && a.value != b.value) return a.value < b.value;
    return a.candidate < b.candidate;
  });
  const std::size_t cap = static_cast<std::size_t>(block == 0 ? config_.period : std::max(1, config_.period / 2));
  for (int round = 0; plan_.size() < cap; ++round) {  // round robin: breadth before depth
    bool any = false;
    for (const Need& n : needs_)
      if (n.calls > round && plan_.size() < cap) {
        plan_.push_back(n.candidate);
        any = true;
      }
    if (!any) break;
  }
}

// Periodic refresh: one call of the near candidate measured longest ago, so that drift (a
// challenger getting faster) is noticed.
void Probes::refresh(int incumbent, std::int64_t block, const Estimator& est, double band) {
  if (block - last_refresh_block_ < config_.refresh_blocks) return;
  last_refresh_block_ = block;
  int pick = -1;
  std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
  for (int k = 0; k < est.size(); ++k) {
    if (k == incumbent || !(est.estimate(k).value <= band) || est.candidate(k).samples.empty() ||
        std::find(plan_.begin(), plan_.end(), k) != plan_.end())
      continue;
    const std::int64_t newest = est.candidate(k).samples.back().block;
    if (newest < oldest) oldest = newest, pick = k;
  }
  if (pick >= 0) plan_.push_back(pick);
}

}  // namespace stragglar::detail::auto_policy
