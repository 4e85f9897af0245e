// The verifier (chunk by chunk) against the round-by-round verifier it replaced
// (reference_verifier.hpp): the same report — ok, message, rounds per phase, β costs — for every
// synthesized schedule and for thousands of randomly damaged ones, on a Schedule and packed, on
// one thread and on several.
#include <gtest/gtest.h>

#include <cstdlib>

#include "reference_verifier.hpp"
#include "schedule/packed_schedule.hpp"
#include "schedule_mutator.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "verify/verify_packed.hpp"

namespace stragglar {
namespace {

void expect_same(const VerifyReport& got, const VerifyReport& want, const std::string& what) {
  EXPECT_EQ(got.ok, want.ok) << what;
  EXPECT_EQ(got.message, want.message) << what;
  EXPECT_EQ(got.rounds_per_phase, want.rounds_per_phase) << what;
  EXPECT_EQ(got.beta_cost_total, want.beta_cost_total) << what;
  EXPECT_EQ(got.beta_cost_waiting, want.beta_cost_waiting) << what;
}

// Both entry points: the Schedule, and the packed form where it can hold the schedule.
// Several threads cut the schedule into stretches of rounds: their seams must not show.
void check(const Schedule& s, const std::string& what) {
  const VerifyReport want = reference::verify(s);
  expect_same(verify(s), want, what);
  expect_same(detail::verify(s, 3), want, what + " (3 threads)");
  try {
    const detail::PackedSchedule packed = detail::pack(s);
    expect_same(detail::verify(packed), want, what + " (packed)");
    expect_same(detail::verify(packed, 2), want, what + " (packed, 2 threads)");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidSchedule) << what;  // a rank the packed form cannot hold
  }
}

std::vector<Schedule> corpus() {
  std::vector<Schedule> out;
  for (Algorithm a : scheduled_algorithms())
    for (int n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17}) {
      SynthOptions o;
      o.straggler = n / 3;
      out.push_back(synthesize(a, n, o));
      if (a == Algorithm::stragglar) {
        o.pipeline = 3;
        out.push_back(synthesize(a, n, o));
      }
    }
  // Several late ranks: a set, and a late host.
  for (int n : {4, 6, 8, 9, 12, 16}) {
    SynthOptions o;
    o.stragglers = {0, n / 2, n - 1};
    if (2 * 3 <= n) out.push_back(synthesize(Algorithm::stragglar_k, n, o));
    o.stragglers.clear();
    for (int r = n / 2; r < n; ++r) o.stragglers.push_back(r);
    if (n % 2 == 0) out.push_back(synthesize(Algorithm::hierarchical, n, o));
  }
  return out;
}

TEST(VerifyDifferential, SynthesizedSchedulesGetTheSameReport) {
  for (const Schedule& s : corpus()) check(s, s.algorithm + " n=" + std::to_string(s.nranks));
  for (int n : {24, 33, 64, 100}) check(synthesize(Algorithm::stragglar, n), "stragglar n=" + std::to_string(n));
}

TEST(VerifyDifferential, DamagedSchedulesGetTheSameReport) {
  const std::vector<Schedule> base = corpus();
  // STRAGGLAR_TEST_SEED / STRAGGLAR_TEST_CASES run other or more cases (300000 agreed when written).
  testing::Rng rng(std::getenv("STRAGGLAR_TEST_SEED") ? std::strtoull(std::getenv("STRAGGLAR_TEST_SEED"), nullptr, 10) : 20261123);
  int rejected = 0;
  const int kCases = std::getenv("STRAGGLAR_TEST_CASES") ? std::atoi(std::getenv("STRAGGLAR_TEST_CASES")) : 4000;
  for (int i = 0; i < kCases; ++i) {
    Schedule s = base[static_cast<std::size_t>(rng.range(0, static_cast<int>(base.size()) - 1))];
    testing::mutate(s, rng, rng.range(1, 4));
    check(s, "case " + std::to_string(i) + " (" + s.algorithm + " n=" + std::to_string(s.nranks) + ")");
    rejected += reference::verify(s).ok ? 0 : 1;
    if (::testing::Test::HasFailure()) break;  // one case's messages are enough
  }
  // Most damage breaks a schedule; some (an op flipped on a full chunk, a swapped round of
  // independent transfers) does not. Both kinds must be there.
  EXPECT_GT(rejected, kCases / 2);
  EXPECT_LT(rejected, kCases);
}

}  // namespace
}  // namespace stragglar
