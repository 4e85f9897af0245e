// The plan cache: a plan for any straggler, derived from the one verified canonical
// schedule, is exactly compile(synthesize(..., straggler), rank); switching stragglers reuses the
// canonical schedule; bad keys are rejected with clear messages.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "plan/plan_cache.hpp"
#include "schedule/packed_schedule.hpp"
#include "stragglar/error.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {
namespace {

using detail::ScheduleKey;

void expect_same_plan(const Plan& got, const Plan& want, const std::string& what) {
  ASSERT_EQ(got.rank, want.rank) << what;
  ASSERT_EQ(got.nranks, want.nranks) << what;
  ASSERT_EQ(got.nchunks, want.nchunks) << what;
  ASSERT_EQ(got.phase_names, want.phase_names) << what;
  ASSERT_EQ(got.max_staged_chunks_per_round, want.max_staged_chunks_per_round) << what;
  ASSERT_EQ(got.rounds.size(), want.rounds.size()) << what;
  for (std::size_t i = 0; i < got.rounds.size(); ++i) {
    const PlanRound& a = got.rounds[i];
    const PlanRound& b = want.rounds[i];
    ASSERT_EQ(a.phase, b.phase) << what << " plan round " << i;
    ASSERT_EQ(a.round, b.round) << what << " plan round " << i;
    ASSERT_EQ(a.waits_for_straggler, b.waits_for_straggler) << what << " plan round " << i;
    ASSERT_EQ(a.sends, b.sends) << what << " plan round " << i;
    ASSERT_EQ(a.recvs, b.recvs) << what << " plan round " << i;
  }
}

ScheduleKey key_of(Algorithm a, int n, int straggler, int k) {
  const AlgorithmInfo& info = algorithm_info(a);
  return ScheduleKey{a, n, info.uses_straggler ? straggler : -1, info.pipelined ? k : 1};
}

// Every algorithm, rank counts around powers of two, every straggler and rank for small n.
TEST(PlanCache, DerivedPlansEqualCompiledSynthesizedSchedules) {
  for (Algorithm a : scheduled_algorithms()) {
    const bool pipelined = algorithm_info(a).pipelined;
    for (int n : {2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 32, 33}) {
      for (int k : pipelined ? std::vector<int>{1, 2, 3} : std::vector<int>{1}) {
        for (int s = 0; s < n; s += (n <= 12 ? 1 : 5)) {
          SynthOptions o;
          o.straggler = s;
          o.pipeline = k;
          const Schedule want = synthesize(a, n, o);
          const ScheduleKey key = key_of(a, n, s, k);
          for (int rank = 0; rank < n; rank += (n <= 12 ? 1 : 3)) {
            const std::string what = std::string(to_string(a)) + " n=" + std::to_string(n) + " K=" + std::to_string(k) +
                                     " straggler=" + std::to_string(s) + " rank=" + std::to_string(rank);
            expect_same_plan(*detail::cached_plan(key, rank), compile(want, rank), what);
            if (::testing::Test::HasFatalFailure()) return;
          }
          EXPECT_EQ(*detail::cached_schedule(key), want) << to_string(a) << " n=" << n << " s=" << s;
        }
      }
    }
  }
}

TEST(PlanCache, LargerRankCountsToo) {
  for (int n : {64, 100, 129, 256}) {
    for (int s : {0, n / 2, n - 1}) {
      SynthOptions o;
      o.straggler = s;
      const Schedule want = synthesize(Algorithm::stragglar, n, o);
      for (int rank : {0, 1, s, n - 2, n - 1})
        expect_same_plan(*detail::cached_plan(key_of(Algorithm::stragglar, n, s, 1), rank), compile(want, rank),
                         "n=" + std::to_string(n) + " s=" + std::to_string(s) + " rank=" + std::to_string(rank));
    }
  }
}

TEST(PlanCache, AStragglerSwitchReusesTheCanonicalSchedule) {
  const auto first = detail::cached_canonical(key_of(Algorithm::stragglar, 24, 3, 2));
  for (int s = 0; s < 24; ++s) {
    EXPECT_EQ(detail::cached_canonical(key_of(Algorithm::stragglar, 24, s, 2)), first);  // the same object
    detail::cached_plan(key_of(Algorithm::stragglar, 24, s, 2), 5);
  }
  EXPECT_EQ(first->header().straggler, 23);
  // Repeated calls hand out the same plan.
  const auto plan = detail::cached_plan(key_of(Algorithm::broadcast, 10, 4, 1), 2);
  EXPECT_EQ(detail::cached_plan(key_of(Algorithm::broadcast, 10, 4, 1), 2), plan);
  // What does not change a schedule does not split the cache.
  EXPECT_EQ(detail::cached_plan(ScheduleKey{Algorithm::ring, 6, 3, 4}, 1), detail::cached_plan(ScheduleKey{Algorithm::ring, 6, -1, 1}, 1));
}

TEST(PlanCache, ThreadsShareOneCanonicalSchedule) {
  detail::clear_plan_cache();
  std::vector<std::shared_ptr<const detail::PackedSchedule>> seen(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      seen[static_cast<std::size_t>(i)] = detail::cached_canonical(key_of(Algorithm::stragglar, 40, i, 1));
      detail::cached_plan(key_of(Algorithm::stragglar, 40, i, 1), i);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s, seen[0]);
}

void expect_usage_error(const ScheduleKey& key, int rank, const std::string& needle) {
  try {
    detail::cached_plan(key, rank);
    FAIL() << "accepted: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PlanCache, RejectsBadKeys) {
  expect_usage_error(ScheduleKey{Algorithm::native, 8, -1, 1}, 0, "algorithm 'native' has no schedule");
  expect_usage_error(ScheduleKey{Algorithm::ring, 1, -1, 1}, 0, "nranks = 1, expected 2 <= nranks <= 4096");
  expect_usage_error(ScheduleKey{Algorithm::stragglar, 8, -1, 1}, 0, "straggler = -1 for stragglar, expected a rank in [0, 8)");
  expect_usage_error(ScheduleKey{Algorithm::broadcast, 8, 8, 1}, 0, "straggler = 8 for broadcast");
  expect_usage_error(ScheduleKey{Algorithm::stragglar, 8, 7, 0}, 0, "pipeline = 0, expected a resolved K in [1, 1024]");
  expect_usage_error(ScheduleKey{Algorithm::stragglar, 8, 7, 1}, 8, "rank 8 is outside [0, 8)");
}

}  // namespace
}  // namespace stragglar
