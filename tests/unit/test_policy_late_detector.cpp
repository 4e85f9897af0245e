// auto's detection (src/runtime/auto/late_detector.*) on hand-written calls: the vote over the
// last block, StragglAR's target and its hysteresis, late sets learned and bounded, the first call
// after a synchronisation, scores.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/auto/late_detector.hpp"

namespace stragglar::detail::auto_policy {
namespace {

PolicyConfig eight_ranks() {
  PolicyConfig c;
  c.nranks = 8;
  c.period = 5;
  c.exchange_every = 1;
  return c;
}

// One call: every rank in the call 100 ms, those in `late` only 100 ms − `delay_ms` (they came
// that much later).
void call(LateDetector& d, std::int64_t index, const std::vector<int>& late, double delay_ms = 30) {
  std::vector<std::int64_t> times(8, 100'000'000);
  for (int r : late) times[static_cast<std::size_t>(r)] -= static_cast<std::int64_t>(delay_ms * 1e6);
  d.observe(times, 1, 1, index);
  d.vote();
}

std::vector<int> v(std::span<const int> s) { return {s.begin(), s.end()}; }

TEST(PolicyLateDetector, ARankLateInMostCallsOfTheBlockIsTheLateRank) {
  LateDetector d(eight_ranks());
  EXPECT_EQ(d.target(), 7);  // rank n-1 until one is measured
  call(d, 0, {5});
  EXPECT_EQ(d.late_rank(), -1);  // one late call is no persistent straggler
  call(d, 1, {5});
  EXPECT_EQ(d.late_rank(), 5);
  EXPECT_EQ(d.target(), 5);
  EXPECT_NEAR(d.delay_s(), 0.030, 1e-9);
  EXPECT_DOUBLE_EQ(d.persistence(), 1.0);
  EXPECT_EQ(d.votes(5), 2);
  for (std::int64_t i = 2; i < 5; ++i) call(d, i, {});
  EXPECT_EQ(d.late_rank(), -1);  // 2 of the last 5 calls: no majority
  EXPECT_EQ(d.target(), 5);      // StragglAR stays told rank 5
  EXPECT_DOUBLE_EQ(d.persistence(), 0.4);
}

TEST(PolicyLateDetector, AlternatingStragglersKeepTheTarget) {
  LateDetector d(eight_ranks());
  for (std::int64_t i = 0; i < 3; ++i) call(d, i, {2});
  ASSERT_EQ(d.target(), 2);
  for (std::int64_t i = 3; i < 12; ++i) {
    call(d, i, {i % 2 ? 6 : 2});
    EXPECT_EQ(d.target(), 2) << "call " << i;
  }
}

TEST(PolicyLateDetector, RanksLateTogetherAreLearnedAsASetAndTheTableIsBounded) {
  PolicyConfig c = eight_ranks();
  c.max_late_sets = 1;
  LateDetector d(c);
  call(d, 0, {6, 7});
  EXPECT_TRUE(d.set(d.late_set()).empty());
  call(d, 1, {6, 7});
  EXPECT_EQ(v(d.set(d.late_set())), (std::vector<int>{6, 7}));
  EXPECT_EQ(v(d.set(d.target_set())), (std::vector<int>{6, 7}));
  const int* where = d.set(d.target_set()).data();
  for (std::int64_t i = 2; i < 7; ++i) call(d, i, {1, 2});
  EXPECT_EQ(d.late_set(), -1);  // a second set: beyond max_late_sets, not chased
  EXPECT_EQ(v(d.set(d.target_set())), (std::vector<int>{6, 7}));
  EXPECT_EQ(d.set(d.target_set()).data(), where);  // a learned set never moves
}

TEST(PolicyLateDetector, TheSynchronisedFirstCallDoesNotVoteAndScoresAreFractions) {
  PolicyConfig c = eight_ranks();
  c.first_call_synchronised = true;
  LateDetector d(c);
  call(d, 0, {3});
  EXPECT_EQ(d.voters(), 0);
  call(d, 1, {3});
  EXPECT_EQ(d.voters(), 1);
  EXPECT_EQ(d.late_rank(), -1);
  EXPECT_NEAR(d.scores()[3], 0.3, 1e-12);  // arrived 30 ms into a 100 ms call
  EXPECT_EQ(d.scores()[0], 0.0);
  EXPECT_TRUE(d.significant_gap(0.030, 0.070));
  EXPECT_FALSE(d.significant_gap(0.001, 0.070));  // under 2 % of the call
}

}  // namespace
}  // namespace stragglar::detail::auto_policy
