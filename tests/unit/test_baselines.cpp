// Every baseline synthesizer × many n × straggler positions passes the verifier.
#include <gtest/gtest.h>

#include <bit>

#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"

namespace stragglar {
namespace {

std::vector<int> test_sizes() {
  std::vector<int> ns;
  for (int n = 2; n <= 64; ++n) ns.push_back(n);
  for (int n = 128; n <= 1024; n *= 2) ns.push_back(n);
  return ns;
}

class BaselineTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(BaselineTest, VerifiesForEveryRankCountAndStraggler) {
  for (int n : test_sizes()) {
    // allpairs is n^2 transfers per round; the large sizes only need one straggler position
    std::vector<int> stragglers = n <= 64 ? std::vector<int>{0, n / 2, n - 1} : std::vector<int>{n - 1};
    for (int straggler : stragglers) {
      SynthOptions o;
      o.straggler = straggler;
      const Schedule s = synthesize(GetParam(), n, o);
      const VerifyReport r = verify(s);
      ASSERT_TRUE(r.ok) << to_string(GetParam()) << " n=" << n << " straggler=" << straggler << ": " << r.message;
      EXPECT_EQ(s.nranks, n);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Baselines, BaselineTest,
                         ::testing::Values(Algorithm::ring, Algorithm::rhd, Algorithm::allpairs, Algorithm::broadcast),
                         [](const auto& param_info) { return std::string(to_string(param_info.param)); });

TEST(Baselines, RoundCountsMatchThePaper) {
  for (int n = 2; n <= 64; ++n) {
    const int logn = std::bit_width(static_cast<unsigned>(n)) - 1;  // floor
    const bool pow2 = std::has_single_bit(static_cast<unsigned>(n));
    EXPECT_EQ(synthesize(Algorithm::ring, n).total_rounds(), 2 * (n - 1)) << n;
    EXPECT_EQ(synthesize(Algorithm::rhd, n).total_rounds(), 2 * logn + (pow2 ? 0 : 2)) << n;
    EXPECT_EQ(synthesize(Algorithm::allpairs, n).total_rounds(), 2) << n;
    const Schedule b = synthesize(Algorithm::broadcast, n);
    const int ceil_log = std::bit_width(static_cast<unsigned>(n - 1));  // ⌈log2 n⌉
    EXPECT_EQ(b.waiting_rounds(), ceil_log) << n;  // exchange + doubling from 2 holders
    EXPECT_EQ(b.total_rounds() - b.waiting_rounds(), 2 * (n - 2)) << n;  // ring among n-1
  }
}

TEST(Baselines, BroadcastKeepsTheStragglerOutOfTheFirstPhase) {
  SynthOptions o;
  o.straggler = 3;
  const Schedule s = synthesize(Algorithm::broadcast, 8, o);
  ASSERT_EQ(s.straggler, 3);
  ASSERT_FALSE(s.phases.front().waits_for_straggler);
  for (const Round& r : s.phases.front().rounds)
    for (const Transfer& t : r) {
      EXPECT_NE(t.src, 3);
      EXPECT_NE(t.dst, 3);
    }
}

TEST(Baselines, DirectIsBroadcast) { EXPECT_EQ(parse_algorithm("direct"), Algorithm::broadcast); }

}  // namespace
}  // namespace stragglar
