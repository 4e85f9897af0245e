// auto's window exchange (src/runtime/auto/window_exchange.*): the exchange array's layout, the
// digest that catches ranks that ran different calls, exact in-call times on one clock, and the
// window growing once settled.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/auto/window_exchange.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail::auto_policy {
namespace {

PolicyConfig two_ranks(int every, int settled = 0, bool shared_clock = false) {
  PolicyConfig c;
  c.nranks = 2;
  c.period = 4;
  c.exchange_every = every;
  c.settled_exchange_every = settled;
  c.shared_clock = shared_clock;
  return c;
}

// Runs `calls` calls of `alg` recording `seconds` (and entries) and fills rank `rank`'s slots.
std::vector<std::int64_t> filled(WindowExchange& x, int rank, int calls, Algorithm alg, double seconds,
                                 std::int64_t entry_ns = 0) {
  for (int i = 0; i < calls; ++i) {
    x.begin({0, alg, -1, -1, {}, -1, -1});
    x.record(seconds, entry_ns);
  }
  std::vector<std::int64_t> all(static_cast<std::size_t>(x.exchange_size()));
  x.fill(all, rank);
  return all;
}

std::vector<std::int64_t> max_of(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> m(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) m[i] = std::max(a[i], b[i]);
  return m;
}

TEST(PolicyWindowExchange, SlotsHoldTheLongestWindowEntriesOnOneClockAndTheDigest) {
  EXPECT_EQ(WindowExchange(two_ranks(1)).slots_per_rank(), 2);
  EXPECT_EQ(WindowExchange(two_ranks(1, 4)).slots_per_rank(), 5);
  EXPECT_EQ(WindowExchange(two_ranks(0)).slots_per_rank(), 5);  // 0: a window is a block
  EXPECT_EQ(WindowExchange(two_ranks(2, 0, true)).slots_per_rank(), 5);
  WindowExchange x(two_ranks(2));
  const std::vector<std::int64_t> all = filled(x, 1, 2, Algorithm::ring, 0.25);
  EXPECT_EQ(all[0], -1);  // rank 0's slots: left to the max over ranks
  EXPECT_EQ(all[3], 250'000'000);
  EXPECT_EQ(all[4], 250'000'000);
  EXPECT_GE(all[5], 0);  // the digest
}

TEST(PolicyWindowExchange, RanksThatRanDifferentCallsGetMismatch) {
  WindowExchange a(two_ranks(1)), b(two_ranks(1));
  const auto all = max_of(filled(a, 0, 1, Algorithm::ring, 0.1), filled(b, 1, 1, Algorithm::rhd, 0.1));
  try {
    a.open(all, 0);
    ADD_FAILURE() << "accepted a window whose calls differ between ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
  }
  WindowExchange c(two_ranks(1)), d(two_ranks(1));
  const auto same = max_of(filled(c, 0, 1, Algorithm::ring, 0.1), filled(d, 1, 1, Algorithm::ring, 0.3));
  EXPECT_EQ(c.open(same, 0)[1 * 2], 300'000'000);  // rank 1's time of call 0
}

TEST(PolicyWindowExchange, OnOneClockInCallTimesAreTheLatestExitMinusEachEntry) {
  WindowExchange a(two_ranks(1, 0, true)), b(two_ranks(1, 0, true));
  // Rank 0 enters at 100 ns for 100 ns, rank 1 at 150 ns for 60 ns: the last exit is at 210 ns.
  const auto all = max_of(filled(a, 0, 1, Algorithm::ring, 100e-9, 100), filled(b, 1, 1, Algorithm::ring, 60e-9, 150));
  const auto times = a.open(all, 0);
  const int S = a.slots_per_rank();
  EXPECT_EQ(times[0], 110);
  EXPECT_EQ(times[static_cast<std::size_t>(S)], 60);
}

TEST(PolicyWindowExchange, TheWindowGrowsAfterAQuietBlockAndShrinksAtTheFirstChange) {
  WindowExchange x(two_ranks(1, 4));
  std::vector<std::int64_t> other;
  const auto decide_one = [&](bool quiet) {
    WindowExchange peer = x;  // the other rank, the same calls
    const auto all = max_of(filled(x, 0, x.window_calls(), Algorithm::ring, 0.1),
                            filled(peer, 1, peer.window_calls(), Algorithm::ring, 0.1));
    x.open(all, 0);
    x.close(quiet);
  };
  for (int i = 0; i < 3; ++i) decide_one(true);
  EXPECT_EQ(x.window_calls(), 1);  // 3 quiet calls: not yet a block
  decide_one(true);
  EXPECT_EQ(x.window_calls(), 4);  // 4 quiet calls, on a block boundary
  decide_one(true);
  EXPECT_EQ(x.window_calls(), 4);
  decide_one(false);
  EXPECT_EQ(x.window_calls(), 1);
  EXPECT_EQ(x.decided(), 12);
}

}  // namespace
}  // namespace stragglar::detail::auto_policy
