// The α-β simulator against the paper's closed forms (Table 1, appendix "Baselines").
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

CostModel paper_cost() {  // α = 3 µs, 450 GiB/s (paper §4.3 / Fig. 7b)
  return CostModel{3e-6, 1.0 / (450.0 * 1073741824.0)};
}

void expect_rel(double got, double want, const std::string& what) {
  EXPECT_LE(std::abs(got - want), 1e-9 * std::abs(want)) << what << ": got " << got << " want " << want;
}

TEST(Simulate, RingMatchesClosedForm) {
  const CostModel c = paper_cost();
  for (int n = 2; n <= 64; ++n)
    for (std::size_t s : {std::size_t{1} << 20, kGiB}) {
      const double sb = static_cast<double>(s) * c.beta_s_per_byte;
      const double closed = 2.0 * (n - 1) * c.alpha_s + 2.0 * (n - 1) / n * sb;
      const Schedule ring = synthesize(Algorithm::ring, n);
      expect_rel(lockstep_time_s(ring, s, c), closed, "ring lockstep n=" + std::to_string(n));
      const SimResult r = simulate(ring, s, c, Delay{false, 0});
      expect_rel(r.time_s, closed, "ring event n=" + std::to_string(n));
      expect_rel(r.exposed_s, closed, "ring exposed n=" + std::to_string(n));
    }
}

TEST(Simulate, RhdMatchesClosedFormForPowersOfTwo) {
  const CostModel c = paper_cost();
  for (int n = 2; n <= 1024; n *= 2) {
    const double logn = std::log2(n);
    const double closed = 2 * logn * c.alpha_s + 2.0 * (n - 1) / n * kGiB * c.beta_s_per_byte;
    const Schedule rhd = synthesize(Algorithm::rhd, n);
    expect_rel(lockstep_time_s(rhd, kGiB, c), closed, "rhd n=" + std::to_string(n));
    expect_rel(simulate(rhd, kGiB, c, Delay{false, 0}).time_s, closed, "rhd event n=" + std::to_string(n));
  }
}

TEST(Simulate, StragglarIdealMatchesClosedForm) {
  const CostModel c = paper_cost();
  for (int n = 2; n <= 256; n *= 2) {
    const double logn = std::log2(n);
    const double rounds = n + logn - 2;
    const double closed = rounds * c.alpha_s + rounds / (n - 1) * kGiB * c.beta_s_per_byte;
    const Schedule s = synthesize(Algorithm::stragglar, n);
    expect_rel(lockstep_time_s(s, kGiB, c, /*waiting_phases_only=*/true), closed, "lockstep n=" + std::to_string(n));
    const SimResult r = simulate(s, kGiB, c, Delay{true, 0});
    expect_rel(r.exposed_s, closed, "ideal exposed n=" + std::to_string(n));
    // ideal: the straggler arrives exactly when the others finish their ReduceScatter
    const Schedule early_only = [&] { Schedule e = s; e.phases.resize(1); return e; }();
    expect_rel(r.delay_s + 1.0, lockstep_time_s(early_only, kGiB, c) + 1.0, "ideal delay n=" + std::to_string(n));
  }
}

TEST(Simulate, BroadcastIdealMatchesClosedForm) {
  const CostModel c = paper_cost();
  for (int n = 2; n <= 256; n *= 2) {
    const double logn = std::log2(n);
    const double closed = logn * (c.alpha_s + kGiB * c.beta_s_per_byte);
    expect_rel(simulate(synthesize(Algorithm::broadcast, n), kGiB, c, Delay{true, 0}).exposed_s, closed,
               "broadcast n=" + std::to_string(n));
  }
}

TEST(Simulate, AllpairsSplitsBandwidth) {
  const CostModel c = paper_cost();
  for (int n : {2, 3, 8, 17}) {
    const double closed = 2 * c.alpha_s + 2.0 * (n - 1) / n * kGiB * c.beta_s_per_byte;
    expect_rel(simulate(synthesize(Algorithm::allpairs, n), kGiB, c, Delay{false, 0}).time_s, closed,
               "allpairs n=" + std::to_string(n));
  }
}

TEST(Simulate, PaperAnchorsFig7b) {
  // n = 256 and n = 8, 1 GiB, ideal delay: Ring / StragglAR ≈ 1.94 and ≈ 1.36.
  const CostModel c = paper_cost();
  for (auto [n, want] : {std::pair{256, 1.94}, std::pair{8, 1.36}}) {
    const double ring = simulate(synthesize(Algorithm::ring, n), kGiB, c, Delay{true, 0}).exposed_s;
    const double sar = simulate(synthesize(Algorithm::stragglar, n), kGiB, c, Delay{true, 0}).exposed_s;
    EXPECT_NEAR(ring / sar, want, 0.01) << "n=" << n;
  }
}

TEST(Simulate, PartialOverlapLiesBetweenIdealAndWorst) {
  const CostModel c = paper_cost();
  const Schedule s = synthesize(Algorithm::stragglar, 8);
  const double ideal = simulate(s, kGiB, c, Delay{true, 0}).exposed_s;
  const SimResult worst = simulate(s, kGiB, c, Delay{false, 0});
  EXPECT_NEAR(worst.time_s, lockstep_time_s(s, kGiB, c), 1e-12);
  double previous = worst.exposed_s;
  for (double d : {0.5e-3, 1e-3, 2e-3}) {  // growing delay hides more of the ReduceScatter
    const SimResult r = simulate(s, kGiB, c, Delay{false, d});
    EXPECT_LE(r.exposed_s, previous + 1e-12);
    EXPECT_GE(r.exposed_s, ideal - 1e-12);
    EXPECT_NEAR(r.time_s - r.exposed_s, d, 1e-12);
    previous = r.exposed_s;
  }
  EXPECT_NEAR(simulate(s, kGiB, c, Delay{false, 1.0}).exposed_s, ideal, 1e-12);  // a long delay is ideal
}

// The γ term (α-β-γ): every `reduce` receive costs γ per byte more, on the receiver only.
// Ring reduces s/n in each of its n-1 ReduceScatter rounds; RHD s/2, s/4, ... (n = 2^k); in the
// event mode StragglAR's straggler reduces each of its n-1 chunks after receiving it.
TEST(Simulate, GammaChargesEveryReduceReceive) {
  CostModel c = paper_cost();
  c.gamma_s_per_byte = c.beta_s_per_byte / 2;  // reductions at twice the link bandwidth
  const double sg = static_cast<double>(kGiB) * c.gamma_s_per_byte;
  for (int n : {2, 3, 8, 13, 64}) {
    const double ring = 2.0 * (n - 1) * c.alpha_s + 2.0 * (n - 1) / n * kGiB * c.beta_s_per_byte;
    const Schedule s = synthesize(Algorithm::ring, n);
    expect_rel(lockstep_time_s(s, kGiB, c), ring + (n - 1.0) / n * sg, "ring+gamma lockstep n=" + std::to_string(n));
    expect_rel(simulate(s, kGiB, c, Delay{false, 0}).time_s, ring + (n - 1.0) / n * sg,
               "ring+gamma event n=" + std::to_string(n));
  }
  for (int n = 2; n <= 256; n *= 2) {
    const double rhd = 2 * std::log2(n) * c.alpha_s + 2.0 * (n - 1) / n * kGiB * c.beta_s_per_byte;
    expect_rel(lockstep_time_s(synthesize(Algorithm::rhd, n), kGiB, c), rhd + (n - 1.0) / n * sg,
               "rhd+gamma n=" + std::to_string(n));
  }
  // γ = 0 is the α-β model exactly; γ > 0 only ever adds time.
  for (int n : {4, 6, 8}) {
    const Schedule s = synthesize(Algorithm::stragglar, n);
    const SimResult plain = simulate(s, kGiB, paper_cost(), Delay{true, 0});
    const SimResult with_gamma = simulate(s, kGiB, c, Delay{true, 0});
    EXPECT_GT(with_gamma.exposed_s, plain.exposed_s) << "n=" << n;
  }
}

TEST(Simulate, RejectsBadModels) {
  const Schedule s = synthesize(Algorithm::ring, 4);
  EXPECT_THROW(simulate(s, kGiB, CostModel{-1, 1e-9}, Delay{}), Error);
  EXPECT_THROW(simulate(s, kGiB, CostModel{1e-6, 0}, Delay{}), Error);
  EXPECT_THROW(simulate(s, kGiB, CostModel{1e-6, 1e-9, -1e-9}, Delay{}), Error);
  EXPECT_THROW(simulate(s, kGiB, paper_cost(), Delay{false, -1}), Error);
  EXPECT_THROW(simulate_events(s, kGiB, paper_cost(), {0, 0}), Error);
}

}  // namespace
}  // namespace stragglar

namespace stragglar {
namespace {

TEST(Simulate, ArrivalTicketsBetweenTheSymmetricScheduleAndStragglarToldTheRank) {
  const CostModel c = paper_cost();
  const int n = 8;
  const std::size_t bytes = 64u << 20;
  const Schedule sar = synthesize(Algorithm::stragglar, n);
  const Schedule rhd = synthesize(Algorithm::rhd, n);
  const double worst = simulate(sar, bytes, c, Delay{false, 0}).exposed_s;
  const double sym = simulate(rhd, bytes, c, Delay{false, 0}).exposed_s;
  const double ideal = simulate(sar, bytes, c, Delay{true, 0}).exposed_s;
  const ArrivalTicketCost t{std::max(0.0, worst - sym), 2e-6};
  // In time: the symmetric schedule plus the decision.
  expect_rel(simulate_arrival_tickets(sar, rhd, bytes, c, 0.0, t).exposed_s, sym + t.decision_s, "in time");
  // Far beyond the grace: as StragglAR told the rank with the delay hidden.
  expect_rel(simulate_arrival_tickets(sar, rhd, bytes, c, 10.0, t).exposed_s, ideal, "far beyond");
  // Just after the grace: at most StragglAR's worst case plus the decision.
  const double just = simulate_arrival_tickets(sar, rhd, bytes, c, t.grace_s, t).exposed_s;
  EXPECT_LE(just, worst + t.decision_s + 1e-12);
  EXPECT_GE(just, ideal);
  EXPECT_THROW(simulate_arrival_tickets(sar, rhd, bytes, c, -1.0, t), Error);
  EXPECT_THROW(simulate_arrival_tickets(rhd, sar, bytes, c, 0.0, t), Error);
}

}  // namespace
}  // namespace stragglar
