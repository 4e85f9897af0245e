// Arrival tickets (src/runtime/arrival_tickets.hpp): ranks as threads over one shared block. The
// decision race is tried at every point — the last rank before, at and after the grace, on a
// clock the test moves — and at random over thousands of calls on the real clock: every rank
// reads the same decision, and a late rank always arrived after every rank not called late.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "runtime/arrival_choice.hpp"
#include "runtime/arrival_tickets.hpp"
#include "stragglar/error.hpp"
#include "thread_engine.hpp"

namespace stragglar::detail {
namespace {

// Zeroed, 8-byte aligned shared memory for n ranks.
struct Block {
  explicit Block(int n) : words(ArrivalTickets::bytes(n) / 8, 0) {}
  void* data() { return words.data(); }
  std::vector<std::uint64_t> words;
};

struct Recorded {
  bool all_in_time = true;
  std::vector<int> late;
  bool i_am_late = false;
  int ticket = -1;
  double previous_delay_s = -1;
  int previous_last_late = -2;
};
Recorded record(const ArrivalDecision& d) {
  return {d.all_in_time, {d.late.begin(), d.late.end()}, d.i_am_late, d.ticket, d.previous_delay_s, d.previous_last_late};
}

TEST(ArrivalTickets, RejectsBadArgumentsNamingTheValue) {
  try {
    (void)ArrivalTickets::bytes(0);
    ADD_FAILURE() << "nranks 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nranks 0"), std::string::npos) << e.what();
  }
  Block b(4);
  try {
    ArrivalTickets t(b.data(), 4, 4);
    ADD_FAILURE() << "rank 4 of 4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ArrivalTickets(static_cast<char*>(b.data()) + 4, 4, 0), Error);
}

TEST(ArrivalTickets, OneRankIsAlwaysInTime) {
  Block b(1);
  ArrivalTickets t(b.data(), 1, 0);
  const double grace[] = {0.0};
  for (std::int64_t c = 0; c < 5; ++c) {
    const ArrivalDecision d = t.arrive(c, grace, 1.0);
    EXPECT_TRUE(d.all_in_time);
    EXPECT_TRUE(d.late.empty());
    EXPECT_EQ(d.ticket, 0);
  }
}

// n ranks; ranks 0..n−2 arrive at once on a clock the test sets; the last rank arrives when the
// test says. Returns every rank's decision.
class ManualClockCall {
 public:
  // Each rank's clock notes that the rank read it: a rank reads it first as it enters a call,
  // to stamp its arrival, so once every early rank has read it the clock may move.
  explicit ManualClockCall(int n) : n_(n), block_(n), has_read_(new std::atomic<bool>[static_cast<std::size_t>(n)]) {
    for (int r = 0; r < n; ++r)
      ranks_.emplace_back(block_.data(), n, r, [this, r] {
        has_read_[static_cast<std::size_t>(r)].store(true, std::memory_order_release);
        return now_.load(std::memory_order_acquire);
      });
  }
  std::vector<Recorded> run(std::int64_t call, double grace_s, std::int64_t clock_at_last_arrival,
                            bool wait_for_early_decision, int expected_late = -1) {
    std::vector<Recorded> out(static_cast<std::size_t>(n_));
    const std::vector<double> grace = {grace_s};
    std::atomic<int> returned{0};
    now_.store(base_);
    for (int r = 0; r < n_; ++r) has_read_[static_cast<std::size_t>(r)].store(false);
    std::vector<std::thread> early;
    for (int r = 0; r + 1 < n_; ++r)
      early.emplace_back([&, r] {
        out[static_cast<std::size_t>(r)] =
            record(ranks_[static_cast<std::size_t>(r)].arrive(call, grace, 5.0, expected_late));
        returned.fetch_add(1);
      });
    // Every early rank stamped its arrival at base_ (a rank between its stamp and its ticket
    // counts as missing, so nothing is decided without it).
    for (int r = 0; r + 1 < n_; ++r)
      while (!has_read_[static_cast<std::size_t>(r)].load(std::memory_order_acquire)) std::this_thread::yield();
    now_.store(base_ + clock_at_last_arrival, std::memory_order_release);
    if (wait_for_early_decision)
      while (returned.load() < n_ - 1) std::this_thread::yield();
    out.back() = record(ranks_.back().arrive(call, grace, 5.0, expected_late));
    for (auto& t : early) t.join();
    base_ += 1'000'000'000;  // the next call a second later
    return out;
  }

 private:
  int n_;
  Block block_;
  std::atomic<std::int64_t> now_{0};
  std::int64_t base_ = 1'000'000'000;
  std::unique_ptr<std::atomic<bool>[]> has_read_;
  std::vector<ArrivalTickets> ranks_;
};

TEST(ArrivalTickets, EveryRankReadsThePreviousLateRanksDelayAtTheNextCall) {
  // What the report's delay comes from: the late rank's arrival after the latest of the others,
  // known once it arrived, read by every rank when it enters the next call.
  constexpr int n = 4;
  ManualClockCall job(n);
  for (const Recorded& d : job.run(0, 0.010, 30'000'000, /*wait_for_early_decision=*/true)) {
    EXPECT_FALSE(d.all_in_time);
    EXPECT_EQ(d.previous_delay_s, 0.0);  // no previous call
    EXPECT_EQ(d.previous_last_late, -1);
  }
  for (const Recorded& d : job.run(1, 0.010, 1'000, false)) {
    EXPECT_TRUE(d.all_in_time);
    EXPECT_NEAR(d.previous_delay_s, 0.030, 1e-12);
    EXPECT_EQ(d.previous_last_late, n - 1);
  }
  for (const Recorded& d : job.run(2, 0.010, 1'000, false)) {
    EXPECT_EQ(d.previous_delay_s, 0.0);  // the previous call had no late rank
    EXPECT_EQ(d.previous_last_late, -1);
  }
}

TEST(ArrivalTickets, TheLastRankBeforeAtAndAfterTheGrace) {
  constexpr int n = 5;
  constexpr double grace = 0.010;
  constexpr std::int64_t grace_ns = 10'000'000;
  ManualClockCall job(n);
  std::int64_t call = 0;
  // Before the grace: everyone in time.
  for (const Recorded& d : job.run(call++, grace, grace_ns - 1, false)) {
    EXPECT_TRUE(d.all_in_time);
    EXPECT_FALSE(d.i_am_late);
  }
  // After it: the early ranks decide without the last, which reads that it is late.
  const std::vector<Recorded> after = job.run(call++, grace, grace_ns, true);
  for (int r = 0; r < n; ++r) {
    const Recorded& d = after[static_cast<std::size_t>(r)];
    EXPECT_FALSE(d.all_in_time) << "rank " << r;
    EXPECT_EQ(d.late, std::vector<int>{n - 1}) << "rank " << r;
    EXPECT_EQ(d.i_am_late, r == n - 1) << "rank " << r;
  }
  EXPECT_EQ(after.back().ticket, n - 1);
  // At the grace, the last rank arriving while the others may decide: either outcome, the same
  // on every rank, many times over the two decision slots.
  for (int i = 0; i < 40; ++i) {
    const std::vector<Recorded> at = job.run(call++, grace, grace_ns, false);
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(at[static_cast<std::size_t>(r)].all_in_time, at[0].all_in_time) << "call " << call - 1;
      EXPECT_EQ(at[static_cast<std::size_t>(r)].late, at[0].late) << "call " << call - 1;
    }
    if (!at[0].all_in_time) {
      EXPECT_EQ(at[0].late, std::vector<int>{n - 1});
    }
  }
}

TEST(ArrivalTickets, ARankLateInRecentCallsIsNotWaitedFor) {
  constexpr int n = 4;
  ManualClockCall job(n);
  // The clock does not move: only the told rank being the one missing lets the call go on.
  const std::vector<Recorded> told = job.run(0, 10.0, 0, true, /*expected_late=*/n - 1);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(told[static_cast<std::size_t>(r)].late, std::vector<int>{n - 1}) << "rank " << r;
    EXPECT_EQ(told[static_cast<std::size_t>(r)].i_am_late, r == n - 1) << "rank " << r;
  }
  // Another rank told: the missing one is waited for as usual.
  for (const Recorded& d : job.run(1, 10.0, 0, false, /*expected_late=*/1)) EXPECT_TRUE(d.all_in_time);
}

TEST(ArrivalTickets, NoGraceWaitsForEveryRank) {
  ManualClockCall job(3);
  // The clock runs far past any finite grace (4 s; the calls' timeout is 5 s on the same clock),
  // but the grace is infinite: all in time.
  for (const Recorded& d : job.run(0, INFINITY, 4'000'000'000, false)) EXPECT_TRUE(d.all_in_time);
}

TEST(ArrivalTickets, AMissingRankEndsInATimeoutNamingIt) {
  constexpr int n = 3;
  Block b(n);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n - 1);
  for (int r = 0; r + 1 < n; ++r)
    threads.emplace_back([&, r] {
      ArrivalTickets t(b.data(), n, r);
      const double grace[] = {INFINITY};
      try {
        (void)t.arrive(0, grace, 0.2);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_NE(e.find("ranks still missing: 2"), std::string::npos) << e;
}

// Thousands of calls (1500 per n) on the real clock, arrivals at random (sometimes one or two ranks well
// behind), as an AllReduce runs them: no rank leaves a call before every rank entered it.
TEST(ArrivalTickets, RandomArrivalsGiveEveryRankTheSameDecision) {
  for (int n : {2, 3, 4, 8}) {
    constexpr int kCalls = 1500;
    Block b(n);
    testing::ThreadJob job(n, 30);
    std::vector<std::vector<Recorded>> seen(kCalls, std::vector<Recorded>(static_cast<std::size_t>(n)));
    const std::vector<double> grace = {30e-6, 60e-6};  // one missing, two missing
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        ArrivalTickets t(b.data(), n, r);
        std::mt19937_64 rng(1234 + static_cast<std::uint64_t>(r));
        std::mt19937_64 shared(99);  // the same draws on every rank: who is behind in this call
        for (int c = 0; c < kCalls; ++c) {
          const int behind = static_cast<int>(shared() % static_cast<std::uint64_t>(2 * n));
          const int behind2 = static_cast<int>(shared() % static_cast<std::uint64_t>(3 * n));
          int spin_us = static_cast<int>(rng() % 40);
          if (r == behind) spin_us += 100;
          if (r == behind2) spin_us += 100;
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
          while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
          seen[static_cast<std::size_t>(c)][static_cast<std::size_t>(r)] = record(t.arrive(c, grace, 20.0));
          job.barrier(r);  // the AllReduce: nobody leaves before everyone entered
        }
      });
    for (auto& t : threads) t.join();
    int late_calls = 0;
    for (int c = 0; c < kCalls; ++c) {
      const auto& row = seen[static_cast<std::size_t>(c)];
      for (int r = 0; r < n; ++r) {
        const Recorded& d = row[static_cast<std::size_t>(r)];
        ASSERT_EQ(d.all_in_time, row[0].all_in_time) << "n " << n << " call " << c << " rank " << r;
        ASSERT_EQ(d.late, row[0].late) << "n " << n << " call " << c << " rank " << r;
        const bool in_late = std::find(d.late.begin(), d.late.end(), r) != d.late.end();
        ASSERT_EQ(d.i_am_late, in_late) << "n " << n << " call " << c << " rank " << r;
      }
      ASSERT_LE(row[0].late.size(), 2u);
      ASSERT_LT(row[0].late.size(), static_cast<std::size_t>(n));
      // Tickets are a permutation, and the late ranks hold the last ones.
      std::vector<int> tickets;
      for (const Recorded& d : row) tickets.push_back(d.ticket);
      std::sort(tickets.begin(), tickets.end());
      for (int i = 0; i < n; ++i) ASSERT_EQ(tickets[static_cast<std::size_t>(i)], i) << "n " << n << " call " << c;
      for (int r : row[0].late) ASSERT_GE(row[static_cast<std::size_t>(r)].ticket, n - static_cast<int>(row[0].late.size()));
      late_calls += !row[0].all_in_time;
    }
    // Which outcome each call has depends on the scheduler (the manual-clock test tries both on
    // purpose); printed to show what this run exercised.
    std::printf("n %d: %d of %d calls went on without a late rank\n", n, late_calls, kCalls);
  }
}

// ---- auto's use of them (arrival_choice.hpp) -------------------------------------------------

// A model shaped like the policy tests': StragglAR = a ReduceScatter (0.12 s) the delay hides,
// then 0.09 s; stragglar-k the same with 0.13 s; Ring 0.178 s, RHD 0.151 s.
Predictor shaped_model(double stragglar_rest = 0.09) {
  return [stragglar_rest](const Choice& c, double d) {
    switch (c.algorithm) {
      case Algorithm::stragglar: return std::max(0.12 - d, 0.0) + stragglar_rest;
      case Algorithm::stragglar_k: return std::max(0.12 - d, 0.0) + 0.13;
      case Algorithm::ring: return 0.178;
      case Algorithm::rhd: return 0.151;
      default: return std::nan("");
    }
  };
}

TEST(ArrivalChoice, GracesAreWhatStartingWithoutTheLateRanksCostsWhenTheyComeAtOnce) {
  const std::vector<Algorithm> all = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd, Algorithm::native,
                                      Algorithm::stragglar_k};
  const ArrivalChoice a(8, shaped_model(), all);
  ASSERT_EQ(a.grace_s().size(), 2u);
  EXPECT_NEAR(a.grace_s()[0], 0.21 - 0.151, 1e-12);  // StragglAR's worst case − RHD
  EXPECT_NEAR(a.grace_s()[1], 0.25 - 0.151, 1e-12);  // stragglar-k's
  // Not a candidate, or no gain even at an infinite delay: wait for every rank.
  const ArrivalChoice no_k(8, shaped_model(), {Algorithm::stragglar, Algorithm::rhd});
  EXPECT_TRUE(std::isinf(no_k.grace_s()[1]));
  const ArrivalChoice no_gain(8, shaped_model(0.16), all);
  EXPECT_TRUE(std::isinf(no_gain.grace_s()[0]));
  // Two ranks: one can be late, never two.
  EXPECT_EQ(ArrivalChoice(2, shaped_model(), all).grace_s().size(), 1u);
}

TEST(ArrivalChoice, ARankLateCallAfterCallIsFollowedAndNotWaitedFor) {
  // Two ranks on a clock the test moves: rank 1 comes after rank 0 has waited out its grace in
  // every call; after a majority of recent calls rank 0 no longer waits for it.
  Block b(2);
  std::atomic<std::int64_t> now{1'000'000'000};
  const auto clock = [&now] { return now.load(); };
  ArrivalTickets t0(b.data(), 2, 0, clock), t1(b.data(), 2, 1, clock);
  const std::vector<Algorithm> all = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd};
  ArrivalChoice a0(2, shaped_model(), all), a1(2, shaped_model(), all);
  for (int call = 0; call < 8; ++call) {
    std::optional<Choice> c0;
    const bool waits = a0.expected_late() != 1;  // read before rank 0's call updates it
    std::atomic<bool> decided{false};
    std::thread early([&] {
      c0 = a0.arrive(t0, 5.0);
      decided = true;
    });
    // Past the grace (59 ms) in steps of 0.1 s until rank 0 decides: on a loaded host its thread
    // may enter after the first step, and one step moved before its entry would leave it waiting
    // on a clock that no longer moves.
    while (waits && !decided) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      now += 100'000'000;
    }
    early.join();  // rank 0 decided without rank 1
    const std::optional<Choice> c1 = a1.arrive(t1, 5.0);
    ASSERT_TRUE(c0.has_value()) << "call " << call;
    ASSERT_TRUE(c1.has_value()) << "call " << call;
    EXPECT_EQ(c0->algorithm, Algorithm::stragglar);
    EXPECT_EQ(c0->straggler, 1);
    EXPECT_EQ(c1->straggler, 1);
    EXPECT_EQ(a0.expected_late(), a1.expected_late()) << "call " << call;
    EXPECT_EQ(a0.expected_late(), call >= 2 ? 1 : -1) << "call " << call;  // 3 of the last 5
  }
  EXPECT_EQ(a0.calls(), 8);
  EXPECT_EQ(a0.late_calls(), 8);
}

TEST(ArrivalChoice, OfTwoRanksLateInEveryCallTheReportNamesTheOneThatCameLast) {
  // Ranks 2 and 3 miss the grace in every call, rank 3 after rank 2 (on a host with more ranks
  // than CPUs a rank the scheduler delays can be late beside the straggler as often): the
  // window's late set is both, and its late rank the one that came last, on every rank.
  constexpr int n = 4, calls = 8;
  Block b(n);
  std::atomic<std::int64_t> now{1'000'000'000};
  const auto clock = [&now] { return now.load(); };
  const std::vector<Algorithm> all = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd, Algorithm::stragglar_k};
  std::vector<ArrivalTickets> t;
  std::vector<ArrivalChoice> a;
  for (int r = 0; r < n; ++r) {
    t.emplace_back(b.data(), n, r, clock);
    a.emplace_back(n, shaped_model(), all);
  }
  for (int call = 0; call < calls; ++call) {
    std::atomic<int> decided{0};
    std::vector<std::thread> early;
    for (int r = 0; r < 2; ++r)
      early.emplace_back([&, r] {
        (void)a[static_cast<std::size_t>(r)].arrive(t[static_cast<std::size_t>(r)], 5.0);
        ++decided;
      });
    while (decided < 2) {  // past the grace for two missing (99 ms), until both decided
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      now += 100'000'000;
    }
    for (auto& e : early) e.join();
    for (int r = 2; r < n; ++r) {
      now += 1'000'000;
      const std::optional<Choice> c = a[static_cast<std::size_t>(r)].arrive(t[static_cast<std::size_t>(r)], 5.0);
      ASSERT_TRUE(c.has_value()) << "call " << call;
      EXPECT_EQ(std::vector<int>(c->late.begin(), c->late.end()), (std::vector<int>{2, 3})) << "call " << call;
    }
  }
  for (int r = 0; r < n; ++r) {
    const ArrivalChoice& mine = a[static_cast<std::size_t>(r)];
    EXPECT_EQ(mine.window_late_set(), (std::vector<int>{2, 3})) << "rank " << r;
    EXPECT_EQ(mine.window_late_rank(), 3) << "rank " << r;
    EXPECT_EQ(mine.late_scores()[2], 1.0) << "rank " << r;
    EXPECT_EQ(mine.late_scores()[3], 1.0) << "rank " << r;
  }
}

}  // namespace
}  // namespace stragglar::detail
