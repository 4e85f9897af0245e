// auto's estimation (src/runtime/auto/estimator.*): the model native is given, which set
// candidates can run, and estimates from the samples of exchanged windows (measured after
// min_samples fresh ones, the lower quartile, the model scaled for a candidate never measured).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/auto/estimator.hpp"
#include "runtime/auto/late_detector.hpp"
#include "runtime/auto/window_exchange.hpp"

namespace stragglar::detail::auto_policy {
namespace {

PolicyConfig config(int nranks = 2) {
  PolicyConfig c;
  c.nranks = nranks;
  c.period = 5;
  c.exchange_every = 1;
  c.candidates = {Algorithm::stragglar, Algorithm::rhd, Algorithm::native, Algorithm::hierarchical};
  return c;
}

double model(const Choice& c, double delay_s) {
  switch (c.algorithm) {
    case Algorithm::stragglar: return 0.200 - delay_s;
    case Algorithm::rhd: return 0.150;
    case Algorithm::hierarchical: return 0.180 - delay_s;
    default: return std::nan("");
  }
}

TEST(PolicyEstimator, NativeIsModelledAsTheBestStragglerAgnosticCandidate) {
  const Estimator e(config(), model);
  EXPECT_DOUBLE_EQ(e.predict(Choice{Algorithm::native, -1}, 0.0), 0.150);
  EXPECT_DOUBLE_EQ(e.predict(Choice{Algorithm::stragglar, 1}, 0.05), 0.150);
  EXPECT_TRUE(std::isnan(e.predict(Choice{Algorithm::hierarchical, -1}, 0.0)));  // told no set: nothing to run
  EXPECT_TRUE(std::isnan(e.model(Choice{Algorithm::native, -1}, 0.0)));         // as supplied
}

TEST(PolicyEstimator, HierarchicalIsACandidateOnlyToldOneWholeKnownHost) {
  PolicyConfig c = config(8);
  c.ranks_per_host = 2;
  const Estimator e(c, model);
  const std::vector<int> host{6, 7}, not_host{5, 6};
  EXPECT_FALSE(e.available(3, Targets{}));  // no set yet
  EXPECT_TRUE(e.available(3, Targets{-1, 0, host}));
  EXPECT_FALSE(e.available(3, Targets{-1, 0, not_host}));
  EXPECT_EQ(e.choice_of(0, Targets{4, 0, host}), (Choice{Algorithm::stragglar, 4}));
  EXPECT_EQ(e.choice_of(3, Targets{4, 0, host}), (Choice{Algorithm::hierarchical, -1, host}));
  c.ranks_per_host = 0;
  EXPECT_FALSE(Estimator(c, model).available(3, Targets{-1, 0, host}));  // hosts unknown
}

// Two ranks run `alg` and both spend `seconds` in the call; the window is decided.
void run(WindowExchange& x, LateDetector& d, Estimator& e, int k, double seconds) {
  const Algorithm alg = e.candidate(k).algorithm;
  x.begin({k, alg, -1, -1, {}, -1, -1});
  x.record(seconds, 0);
  WindowExchange peer = x;
  std::vector<std::int64_t> mine(static_cast<std::size_t>(x.exchange_size())), theirs(mine.size());
  x.fill(mine, 0);
  peer.fill(theirs, 1);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::max(mine[i], theirs[i]);
  const std::int64_t block = x.decided() / 5;
  d.observe(x.open(mine, 0), x.slots_per_rank(), 1, x.decided());
  d.vote();
  e.add_window(x, d, block);
  e.estimate_all(Targets{d.target(), -1, {}}, Delays{d.delay_s(), 0, 0, 0, 0}, block);
  x.close(false);
}

TEST(PolicyEstimator, MeasuredAfterMinSamplesFreshOnesTheLowerQuartileAndTheModelScaledElsewhere) {
  const PolicyConfig c = config();
  WindowExchange x(c);
  LateDetector d(c);
  Estimator e(c, model);
  run(x, d, e, 1, 0.300);  // rhd, twice the model
  EXPECT_FALSE(e.estimate(1).measured);
  EXPECT_EQ(e.estimate(1).fresh, 1);
  run(x, d, e, 1, 0.330);
  EXPECT_TRUE(e.estimate(1).measured);
  EXPECT_NEAR(e.estimate(1).value, 0.300, 1e-9);  // lower quartile of two: the faster
  // stragglar never ran: its model at no delay, scaled as rhd's was (× 2).
  EXPECT_NEAR(e.estimate(0).value, 2 * 0.200, 1e-9);
  EXPECT_EQ(e.candidate(0).samples.size(), 0u);
  EXPECT_NEAR(e.noise(), c.noise_prior, 1e-12);  // fewer than 3 fresh measurements: σ not measured
}

}  // namespace
}  // namespace stragglar::detail::auto_policy
