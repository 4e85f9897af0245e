// The straggler policy behind algorithm = auto (src/runtime/straggler_policy.*, docs/auto.md),
// job-level outcomes: the simulated jobs of policy_job.hpp against the best fixed
// entry and the behaviours auto promises. Nothing is timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "policy_job.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {
namespace {
using namespace policy_job;

// ---- configuration errors -----------------------------------------------------------------

void expect_config_error(PolicyConfig c, const std::string& names) {
  try {
    StragglerPolicy p(c, model_predictor(Costs{}));
    ADD_FAILURE() << "accepted " << names;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(StragglerPolicy, RejectsBadConfigNamingTheValue) {
  PolicyConfig c = config8();
  c.nranks = 0;
  expect_config_error(c, "nranks 0");
  c = config8();
  c.nranks = -3;
  expect_config_error(c, "nranks -3");
  c = config8();
  c.period = 0;
  expect_config_error(c, "period 0");
  c = config8();
  c.min_samples = 0;
  expect_config_error(c, "min_samples 0");
  c = config8();
  c.history = 1;
  expect_config_error(c, "history 1");
  c = config8();
  c.switch_margin = -0.1;
  expect_config_error(c, "switch_margin -0.1");
  c = config8();
  c.model_error = std::nan("");
  expect_config_error(c, "model_error nan");
  c = config8();
  c.min_delay_fraction = 1.5;
  expect_config_error(c, "min_delay_fraction 1.5");
  c = config8();
  c.min_delay_s = -1;
  expect_config_error(c, "min_delay_s -1");
  c = config8();
  c.refresh_blocks = 0;
  expect_config_error(c, "refresh_blocks 0");
  c = config8();
  c.candidates = {};
  expect_config_error(c, "candidate list is empty");
  c = config8();
  c.candidates = {Algorithm::ring, Algorithm::automatic};
  expect_config_error(c, "candidate 'auto'");
  c = config8();
  c.candidates = {Algorithm::ring, Algorithm::rhd, Algorithm::ring};
  expect_config_error(c, "'ring' is listed twice");
  c = config8();
  c.candidates = {static_cast<Algorithm>(77)};
  expect_config_error(c, "algorithm 77");
  try {
    StragglerPolicy p(config8(), Predictor{});
    ADD_FAILURE() << "accepted an empty predictor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("predictor is empty"), std::string::npos) << e.what();
  }
}

TEST(StragglerPolicy, RejectsMisuseOfTheCallSequence) {
  PolicyConfig c = config8_windows();
  c.nranks = 2;
  c.period = 2;
  StragglerPolicy p(c, model_predictor(Costs{}));
  EXPECT_THROW(p.record(0.1), Error);  // no call begun
  p.begin_call();
  EXPECT_THROW(p.record(-1.0), Error);
  EXPECT_THROW(p.record(std::numeric_limits<double>::infinity()), Error);
  {  // On a shared clock every call needs its entry time.
    PolicyConfig clocked = c;
    clocked.shared_clock = true;
    StragglerPolicy q(clocked, model_predictor(Costs{}));
    q.begin_call();
    try {
      q.record(0.1);
      ADD_FAILURE() << "recorded a call without its entry time on a shared clock";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
      EXPECT_NE(std::string(e.what()).find("entry time -1 ns"), std::string::npos) << e.what();
    }
    EXPECT_THROW(q.record(0.1, (std::int64_t{1} << 62) + 1), Error);  // beyond 2^62 ns: could overflow
    q.record(0.1, 5);
  }
  p.record(0.1);
  EXPECT_FALSE(p.exchange_due());
  std::vector<std::int64_t> all(static_cast<std::size_t>(p.exchange_size()));
  EXPECT_THROW(p.fill_exchange(all, 0), Error);  // not due
  EXPECT_THROW(p.decide(all), Error);            // nothing filled
  p.begin_call();
  p.record(0.2);
  ASSERT_TRUE(p.exchange_due());
  std::vector<std::int64_t> wrong(3);
  EXPECT_THROW(p.fill_exchange(wrong, 0), Error);
  EXPECT_THROW(p.fill_exchange(all, 2), Error);  // rank out of range
  p.fill_exchange(all, 0);
  // Rank 1 never contributed: its slots still hold the neutral -1.
  try {
    p.decide(all);
    ADD_FAILURE() << "decided without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("rank 1 contributed nothing"), std::string::npos) << e.what();
  }
}

void expect_mismatch(StragglerPolicy& a, StragglerPolicy& b) {
  std::vector<std::int64_t> fa(static_cast<std::size_t>(a.exchange_size())), fb(fa.size()), all(fa.size());
  a.fill_exchange(fa, 0);
  b.fill_exchange(fb, 1);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = std::max(fa[i], fb[i]);
  try {
    a.decide(all);
    ADD_FAILURE() << "accepted a window that differs between ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(StragglerPolicy, RanksWhoseWindowsDifferGetMismatchNotAHang) {
  PolicyConfig c = config8_windows();
  c.nranks = 2;
  c.period = 2;
  {
    // Rank 1 is one exchange ahead (the core skipped an exchange on rank 0): its window covers
    // calls 2..3, rank 0's calls 0..1.
    StragglerPolicy a(c, model_predictor(Costs{})), b(c, model_predictor(Costs{}));
    for (int i = 0; i < 2; ++i) a.begin_call(), a.record(0.1);
    for (int i = 0; i < 4; ++i) b.begin_call(), b.record(0.1);
    std::vector<std::int64_t> skipped(static_cast<std::size_t>(b.exchange_size()));
    b.fill_exchange(skipped, 1);
    expect_mismatch(a, b);
  }
  {
    // Same calls, different choices (here: ranks given different straggler hints, so their
    // StragglAR calls differ).
    PolicyConfig c1 = c;
    c.candidates = {Algorithm::stragglar};
    c1.candidates = {Algorithm::stragglar};
    c.initial_straggler = 0;
    c1.initial_straggler = 1;
    StragglerPolicy a(c, model_predictor(Costs{})), b(c1, model_predictor(Costs{}));
    for (int i = 0; i < 2; ++i) a.begin_call(), a.record(0.1), b.begin_call(), b.record(0.1);
    expect_mismatch(a, b);
  }
}

TEST(StragglerPolicy, DelayThatComesAndGoesIsFollowed) {
  // No delay (rhd), then rank 4 late by 300 ms (StragglAR with rank 4), then no delay again.
  const Costs k;
  const int P = config8().period;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Job job(config8(), model_predictor(k), seed);
    for (int i = 0; i < 60; ++i) job.call(World{}, k, Noise{});
    EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::rhd) << "seed " << seed;
    for (int i = 0; i < 3 * P; ++i) job.call(World{4, 0.3}, k, Noise{});
    EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar, 4})) << "seed " << seed;
    EXPECT_EQ(job.rank0().late_rank(), 4);
    for (int i = 0; i < 4 * P; ++i) job.call(World{}, k, Noise{});
    EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::rhd) << "seed " << seed << ": "
                                                                 << job.rank0().last_switch_evidence();
    EXPECT_EQ(job.rank0().late_rank(), -1);
  }
}

// ---- agreement -----------------------------------------------------------------------------

TEST(StragglerPolicy, EveryRankRunsTheSameChoiceAtEveryCall) {
  // Different per-rank times every call (that is the point of the measurement), yet the same
  // choice, late rank, scores and evidence on every rank; with and without record/decide lags.
  const Costs k;
  for (int lag = 0; lag <= 3; ++lag)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      Job job(config8(), model_predictor(k), seed, /*record_lag=*/lag, /*decide_lag=*/lag % 2);
      std::mt19937_64 world_rng(seed);
      for (int i = 0; i < 150; ++i) job.call(changing_world(i, world_rng), k, Noise{});
      EXPECT_GT(job.rank0().decisions(), 25);
    }
}

TEST(StragglerPolicy, IsAPureFunctionOfItsInputs) {
  const Costs k;
  std::vector<Choice> first, second;
  for (auto* out : {&first, &second}) {
    Job job(config8(), model_predictor(k), 42);
    for (int i = 0; i < 80; ++i) out->push_back(job.call(World{i < 40 ? 7 : 2, 0.3}, k, Noise{}));
  }
  EXPECT_EQ(first, second);
}

// ---- the benchmark targets, on the synthetic host ------------------------------------------

TEST(StragglerPolicy, FixedLargeDelayNamesTheRankAndRunsStragglarWithIt) {
  for (int late : {7, 3, 0})
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      const BenchRun run = run_bench(0.3, [late](int) { return late; }, seed);
      EXPECT_LE(run.auto_median, 1.05 * run.best_fixed_median)
          << "late " << late << " seed " << seed << " best " << run.best_fixed;
      EXPECT_EQ(run.best_fixed, "stragglar");
      int told = 0;
      for (const Choice& c : run.timed_choices) told += c == Choice{Algorithm::stragglar, late};
      EXPECT_GE(told, 34) << "late " << late << " seed " << seed;
    }
  // And the visibility API names it.
  Job job(config8(), model_predictor(Costs{}), 9);
  for (int i = 0; i < 20; ++i) job.call(World{5, 0.3}, Costs{}, Noise{});
  EXPECT_EQ(job.rank0().late_rank(), 5);
  EXPECT_NEAR(job.rank0().delay_s(), 0.3, 0.01);
  EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar, 5}));
  EXPECT_NE(job.rank0().last_switch_evidence().find("rank 5 arrived last"), std::string::npos)
      << job.rank0().last_switch_evidence();
}

TEST(StragglerPolicy, NoDelayRunsTheFastestMeasuredCandidate) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const BenchRun run = run_bench(0.0, [](int) { return -1; }, seed);
    EXPECT_LE(run.auto_median, 1.05 * run.best_fixed_median) << "seed " << seed;
    int rhd = 0;
    for (const Choice& c : run.timed_choices) rhd += c.algorithm == Algorithm::rhd;
    EXPECT_GE(rhd, 30) << "seed " << seed;
  }
  // Another host where native is the fastest and has no prediction: it must be measured.
  Costs k;
  k.native = 0.120;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const BenchRun run = run_bench(0.0, [](int) { return -1; }, seed, k);
    EXPECT_EQ(run.best_fixed, "native");
    EXPECT_LE(run.auto_median, 1.05 * run.best_fixed_median) << "seed " << seed;
  }
}

// A native AllReduce whose ranks leave the call apart: its shortest in-call time (the first rank
// out) is well below the exposed time (the last one out). On one clock (shared_clock) the policy
// sees the exposed time and runs RHD, the fastest fixed entry; from in-call times alone it takes
// native for the fastest — the limit of a job without a shared clock (docs/auto.md "Measuring a
// call").
TEST(StragglerPolicy, OnOneClockRanksLeavingApartAreMeasuredByTheLastToLeave) {
  Costs k;
  k.native = 0.125;  // the first rank out: faster than rhd (0.151) and ring (0.178) ...
  Noise z;
  z.native_exit_spread_s = 0.100;  // ... the last: ~0.21 s, slower than both
  const auto runs = [](const BenchRun& run, Algorithm a) {  // in the last 20 timed calls
    return std::count_if(run.timed_choices.end() - 20, run.timed_choices.end(),
                         [a](const Choice& c) { return c.algorithm == a; });
  };
  int misled = 0;  // seeds in which in-call times alone settle on native
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    PolicyConfig clocked = config8();
    clocked.shared_clock = true;
    const BenchRun one_clock = run_bench(0.0, [](int) { return -1; }, seed, k, z, clocked);
    EXPECT_EQ(one_clock.best_fixed, "rhd") << "seed " << seed;
    EXPECT_LE(one_clock.auto_median, 1.05 * one_clock.best_fixed_median) << "seed " << seed;
    EXPECT_EQ(runs(one_clock, Algorithm::native), 0) << "seed " << seed;
    const BenchRun in_call_only = run_bench(0.0, [](int) { return -1; }, seed, k, z, config8());
    if (runs(in_call_only, Algorithm::native) >= 15 && in_call_only.auto_median > 1.2 * in_call_only.best_fixed_median)
      ++misled;
  }
  EXPECT_GE(misled, 3);  // what the shared clock fixes (the scenario is not too easy)
}

TEST(StragglerPolicy, DelaySweepStaysWithinFivePercentOfTheBestFixedEntry) {
  for (double d : {0.0, 0.005, 0.020, 0.060, 0.300})
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      const BenchRun run = run_bench(d, [](int) { return 7; }, seed);
      EXPECT_LE(run.auto_median, 1.05 * run.best_fixed_median)
          << "delay " << d << " seed " << seed << " best " << run.best_fixed;
    }
}

TEST(StragglerPolicy, UncalibratedModelOnlyCostsMeasurements) {
  // The model's absolute seconds 1000x off: it is used only in ratios, so the outcome holds.
  for (double d : {0.0, 0.060, 0.300}) {
    Job job(config8(), model_predictor(Costs{}, 1e-3), 5);
    std::vector<double> ex;
    for (int i = 0; i < 60; ++i) {
      CallResult r;
      job.call(World{4, d}, Costs{}, Noise{}, &r);
      if (i >= 20) ex.push_back(r.exposed);
    }
    const Choice inc = job.rank0().incumbent();
    if (d >= 0.06)
      EXPECT_EQ(inc, (Choice{Algorithm::stragglar, 4})) << d;
    else
      EXPECT_EQ(inc.algorithm, Algorithm::rhd) << d;
  }
}

TEST(StragglerPolicy, MovingStragglerIsFollowedWithinTwoPeriods) {
  // The benchmark's scenario: rank 7, then rank 2 from timed iteration 20.
  const int P = config8().period;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const BenchRun run = run_bench(0.3, [](int i) { return i < 20 ? 7 : 2; }, seed);
    int first = -1;
    for (int i = 20; i < 40 && first < 0; ++i)
      if (run.timed_choices[static_cast<std::size_t>(i)] == Choice{Algorithm::stragglar, 2}) first = i;
    ASSERT_GE(first, 0) << "seed " << seed;
    EXPECT_LE(first - 20, 2 * P) << "seed " << seed;
    for (int i = 20 + 2 * P; i < 40; ++i)
      EXPECT_EQ(run.timed_choices[static_cast<std::size_t>(i)], (Choice{Algorithm::stragglar, 2})) << i;
  }
  // Whatever the move's position within an exchange window, and with GPU-like lags (the bound
  // then grows by the lags).
  for (int lag = 0; lag <= 2; ++lag)
    for (int offset = 0; offset < 2 * P; ++offset) {
      Job job(config8(), model_predictor(Costs{}), static_cast<std::uint64_t>(100 + offset), lag, lag);
      const int move = 30 + offset;
      int followed = -1;
      for (int i = 0; i < move + 4 * P; ++i) {
        const Choice c = job.call(World{i < move ? 6 : 1, 0.2}, Costs{}, Noise{});
        if (i >= move && followed < 0 && c == Choice{Algorithm::stragglar, 1}) followed = i;
      }
      ASSERT_GE(followed, 0) << "offset " << offset << " lag " << lag;
      EXPECT_LE(followed - move, 2 * P + 2 * lag) << "offset " << offset << " lag " << lag;
      EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar, 1}));
      EXPECT_NE(job.rank0().last_switch_evidence().find("straggler moved from rank 6 to rank 1"), std::string::npos)
          << job.rank0().last_switch_evidence();
    }
}

TEST(StragglerPolicy, SettledJobsExchangeOncePerBlockAndGoBackToEveryCallAtAChange) {
  // The host engines' form (auto_runner.cpp): decide after every call while converging, every P
  // calls once settled (one exchange per block on the critical path instead of P). A straggler
  // that moves is still followed within two blocks, and the window is back to one call by then.
  const int P = config8().period;
  for (std::uint64_t seed = 1; seed <= 5; ++seed)
    for (int offset = 0; offset < P; ++offset) {
      PolicyConfig cfg = config8();
      cfg.settled_exchange_every = P;
      Job job(cfg, model_predictor(Costs{}), seed * 100 + static_cast<std::uint64_t>(offset));
      const int move = 40 + offset;
      int settled_at = -1, followed = -1;
      for (int i = 0; i < move + 4 * P; ++i) {
        const Choice c = job.call(World{i < move ? 6 : 1, 0.2}, Costs{}, Noise{});
        if (i < move && settled_at < 0 && job.rank0().window_calls() == P) settled_at = i;
        if (i >= move && followed < 0 && c == Choice{Algorithm::stragglar, 1}) followed = i;
      }
      ASSERT_GE(settled_at, 0) << "seed " << seed << ": never settled in " << move << " calls on one straggler";
      EXPECT_LE(settled_at, 4 * P) << "seed " << seed;
      ASSERT_GE(followed, 0) << "seed " << seed << " offset " << offset;
      EXPECT_LE(followed - move, 2 * P) << "seed " << seed << " offset " << offset;
      EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar, 1}))
          << "seed " << seed << " offset " << offset << ": " << job.rank0().last_switch_evidence();
      EXPECT_EQ(job.rank0().slots_per_rank(), P + 1);  // the same array at every exchange
    }
  // A settled window is not allowed shorter than the converging one, nor longer than a block.
  PolicyConfig bad = config8();
  bad.settled_exchange_every = bad.period + 1;
  EXPECT_THROW(StragglerPolicy(bad, model_predictor(Costs{})), Error);
}

// ---- hysteresis and exploration ---------------------------------------------------------------

TEST(StragglerPolicy, NoFlappingUnderNoiseBetweenNearlyEqualCandidates) {
  // ring and rhd within 1% of each other, heavy noise: the choice may settle on either but must
  // not keep switching; neither may the straggler given to StragglAR, with nobody late.
  Costs k;
  k.ring = 0.150;
  k.rhd = 0.1515;
  Noise z;
  z.sigma = 0.06;
  z.outlier_p = 0.1;
  z.arrival_jitter_s = 2e-3;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    Job job(config8(), model_predictor(k), seed);
    int switches = 0, retargets = 0;
    Choice last = job.rank0().incumbent();
    Choice last_current = job.rank0().current();
    for (int i = 0; i < 1000; ++i) {
      job.call(World{}, k, z);
      if (!(job.rank0().incumbent() == last)) ++switches, last = job.rank0().incumbent();
      if (job.rank0().current().algorithm == Algorithm::stragglar &&
          last_current.algorithm == Algorithm::stragglar && job.rank0().current().straggler != last_current.straggler)
        ++retargets;
      last_current = job.rank0().current();
    }
    EXPECT_LE(switches, 6) << "seed " << seed << " (200 decisions)";
    EXPECT_EQ(retargets, 0) << "seed " << seed;
    EXPECT_NE(job.rank0().incumbent().algorithm, Algorithm::stragglar);
  }
}

TEST(StragglerPolicy, ClearWinnerIsKeptUnderHeavyNoise) {
  Costs k;  // rhd is 15% faster than ring, 20% than native and StragglAR (no delay)
  Noise z;
  z.sigma = 0.08;  // heavy: two or three early samples can all be outliers, so convergence may
  z.outlier_p = 0.15;  // take a few refreshes; once there, the winner is never left
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Job job(config8(), model_predictor(k), seed);
    int explored = 0, after = 0, converged = -1;
    for (int i = 0; i < 500; ++i) {
      const Choice c = job.call(World{}, k, z);
      const bool on_rhd = job.rank0().incumbent().algorithm == Algorithm::rhd;
      if (on_rhd && converged < 0) converged = i;
      if (converged >= 0) {
        ASSERT_TRUE(on_rhd) << "seed " << seed << " left rhd at call " << i << ": "
                            << job.rank0().last_switch_evidence();
        ++after;
        explored += c.algorithm != Algorithm::rhd;
      }
    }
    EXPECT_GE(converged, 0) << "seed " << seed;
    EXPECT_LE(converged, 100) << "seed " << seed;
    // Exploration stays a small minority of calls (a median never sees it).
    EXPECT_LE(explored, after / 10) << "seed " << seed;
  }
}

TEST(StragglerPolicy, RandomStragglerEveryCallIsNotChasedAndExplorationStaysBounded) {
  // A different rank late by 60 ms at every call: no rank is late in most calls of a window, so
  // StragglAR would be told the wrong rank most of the time — the baselines win. Now and then a
  // rank is late in 3 of 5 calls by chance (about one window in eight) and StragglAR gets a
  // probe; with the refresh of the others that stays near a tenth of the calls.
  const Costs k;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Job job(config8(), model_predictor(k), seed);
    int explored = 0;
    for (int i = 0; i < 300; ++i) {
      const Choice c = job.call(World{static_cast<int>(job.rng()() % 8), 0.060}, k, Noise{});
      if (i >= 30) explored += !(c == job.rank0().incumbent());
    }
    EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::rhd) << "seed " << seed;
    EXPECT_LE(explored, 270 * 15 / 100) << "seed " << seed;
  }
}

// ---- scores --------------------------------------------------------------------------------

TEST(StragglerPolicy, ScoresAreFractionsAndTheLateRankScoresHighest) {
  const Costs k;
  for (double d : {0.02, 0.06, 0.3}) {
    Job job(config8(), model_predictor(k), 3);
    for (int i = 0; i < 25; ++i) job.call(World{5, d}, k, Noise{});
    const std::vector<double>& s = job.rank0().scores();
    ASSERT_EQ(s.size(), 8u);
    for (double v : s) EXPECT_TRUE(v >= 0 && v <= 1) << v;
    EXPECT_EQ(std::max_element(s.begin(), s.end()) - s.begin(), 5) << d;
    for (int r = 0; r < 8; ++r)
      if (r != 5) {
        EXPECT_LT(s[static_cast<std::size_t>(r)], 0.02) << "rank " << r << " delay " << d;
      }
    EXPECT_GT(s[5], 0.1) << d;
    EXPECT_EQ(job.rank0().late_rank(), 5);
  }
  Job quiet(config8(), model_predictor(k), 4);
  EXPECT_EQ(quiet.rank0().scores(), std::vector<double>(8, 0.0));  // before any exchange
  for (int i = 0; i < 25; ++i) quiet.call(World{}, k, Noise{});
  for (double v : quiet.rank0().scores()) EXPECT_TRUE(v >= 0 && v < 0.02) << v;
  EXPECT_EQ(quiet.rank0().late_rank(), -1);
}

// ---- shapes of jobs and candidate lists ------------------------------------------------------

TEST(StragglerPolicy, StartsWithTheModelsBestWithoutASurveyAndRespectsTheList) {
  PolicyConfig c = config8();
  c.candidates = {Algorithm::rhd, Algorithm::stragglar, Algorithm::ring};  // no native engine
  {
    // No survey: the calls before the first decision run the model's best at no delay.
    StragglerPolicy p(c, model_predictor(Costs{}));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(p.begin_call(), (Choice{Algorithm::ring, -1}));
  }
  Job job(c, model_predictor(Costs{}), 11);
  for (int i = 0; i < 200; ++i) {
    const Choice ch = job.call(World{i < 100 ? -1 : 2, i < 100 ? 0.0 : 0.3}, Costs{}, Noise{});
    EXPECT_NE(ch.algorithm, Algorithm::native);
    if (ch.algorithm == Algorithm::stragglar) {
      EXPECT_GE(ch.straggler, 0);
    } else {
      EXPECT_EQ(ch.straggler, -1);
    }
  }
}

TEST(StragglerPolicy, OneRankAndPeriodOneWork) {
  PolicyConfig c = config8();
  c.nranks = 1;
  Job one(c, model_predictor(Costs{}), 1);
  for (int i = 0; i < 20; ++i) one.call(World{}, Costs{}, Noise{});
  EXPECT_EQ(one.rank0().late_rank(), -1);
  EXPECT_EQ(one.rank0().scores(), std::vector<double>(1, 0.0));

  c = config8();
  c.period = 1;  // decide after every call
  Job every(c, model_predictor(Costs{}), 2);
  for (int i = 0; i < 60; ++i) every.call(World{4, 0.3}, Costs{}, Noise{});
  EXPECT_EQ(every.rank0().incumbent(), (Choice{Algorithm::stragglar, 4}));
  EXPECT_EQ(every.rank0().decisions(), 60);
}

// STRAGGLAR_DEBUG=TRACE: every decision says what it saw and planned; without keep_trace nothing
// is built (a configuration seen before allocates nothing).
TEST(StragglerPolicy, DecisionTraceOnlyWhenAskedNamingEveryCandidate) {
  PolicyConfig c = config8();
  c.keep_trace = true;
  Job traced(c, model_predictor(Costs{}), 3);
  for (int i = 0; i < 6; ++i) traced.call(World{5, 0.3}, Costs{}, Noise{});
  const std::string t = traced.rank0().last_decision_trace();
  EXPECT_NE(t.find("calls 5..5: incumbent stragglar(straggler 5)"), std::string::npos) << t;
  EXPECT_NE(t.find("late rank 5"), std::string::npos) << t;
  for (Algorithm a : c.candidates) EXPECT_NE(t.find(std::string(" ") + to_string(a) + " "), std::string::npos) << t;
  c.keep_trace = false;
  Job quiet(c, model_predictor(Costs{}), 3);
  for (int i = 0; i < 6; ++i) quiet.call(World{5, 0.3}, Costs{}, Noise{});
  EXPECT_TRUE(quiet.rank0().last_decision_trace().empty());
}

// ---- arrival patterns (bench/patterns/ replays the same kinds on real backends) ------------

TEST(StragglerPolicy, EveryArrivalPatternStaysNearTheBestFixedEntry) {
  // Totals over 24 calls (one call per line after the first call and 2 warm-ups, as
  // bench/patterns/run.sh runs them); every rank decides the same (Job checks it call by call).
  // 300 ms and 60 ms delays: far beyond and about the ReduceScatter's length. Over 4 seeds per
  // kind: the mean ratio to the best fixed entry within 5% and every seed within 10%, except a
  // random rank per call (the known miss, docs/auto.md "What it cannot do": a chance majority of
  // one rank makes auto try StragglAR told it for a few calls; per-seed bound 1.13, docs/auto.md
  // "The first calls"). Deciding every P calls reacts later: the bounds are wider there
  // (docs/auto.md "The exchange").
  for (int every : {1, 0})  // decide after every call (the host engines), every P calls (lag engines)
    for (double d : {0.300, 0.060})
      for (const char* kind : kPatternKinds) {
        const bool random = std::string(kind) == "random-rank";
        double sum = 0;
        for (std::uint64_t seed = 1; seed <= 4; ++seed) {
          const PatternRun run = run_pattern(make_pattern(kind, 8, 24, d, seed), seed, every);
          const double ratio = run.auto_total / run.best_fixed_total;
          sum += ratio;
          EXPECT_LE(ratio, every == 1 ? (random ? 1.13 : 1.10) : (random ? 1.20 : 1.12))
              << kind << " delay " << d << " seed " << seed << " best " << run.best_fixed << " exchange_every " << every;
        }
        EXPECT_LE(sum / 4, every == 1 ? (random ? 1.10 : 1.05) : (random ? 1.15 : 1.10))
            << kind << " delay " << d << " exchange_every " << every;
      }
}

TEST(StragglerPolicy, AStragglerLateInSomeCallsOnlyIsJudgedOnBothRegimes) {
  // A host where the model favours StragglAR told one of two alternating stragglers (its
  // mixture 0.135 s against RHD's 0.200), but StragglAR runs 2-2.5x slower than the model says
  // whenever the other rank is late: in truth RHD is the best fixed entry. Each regime is judged
  // at its own level, not by one lower quartile over both (docs/auto.md "Estimates", where the
  // figures are). A guard against that bias, not the 5 % target: the estimate near RHD's flips
  // with the persistence of an odd window.
  Costs vm;
  vm.rs = 0.150, vm.rest = 0.060, vm.rhd = 0.200, vm.ring = 0.220, vm.native = 0.250;
  for (double told_wrong : {2.0, 2.5})
    for (const char* kind : {"alternating", "random-rank"}) {
      vm.told_wrong = told_wrong;
      double sum = 0;
      for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        const PatternRun run = run_pattern(make_pattern(kind, 8, 24, 0.300, seed), seed, 1, vm);
        sum += run.auto_total / run.best_fixed_total;
      }
      EXPECT_LE(sum / 8, 1.21 + (std::string(kind) == "alternating" ? 0.03 : 0.0)) << kind << " told_wrong " << told_wrong;
    }
}

TEST(StragglerPolicy, GpuEnginesStartWithNativeAndLeaveItOnlyForAMeasuredGain) {
  // The NCCL engine's form: times read 2 calls late, the exchange decided 2 calls after it
  // begins, one decision per P calls, and start_with_native (ncclAllReduce first). 24 calls.
  // (a) Costs shaped like a first GPU run's (docs/gpu.md: native far ahead of every schedule
  // beside an 800 ms straggler): native from the first call, the schedules probed a few times,
  // ≤ 1.20× per seed.
  Costs sockets;
  sockets.rs = 0.150, sockets.rest = 0.197, sockets.ring = 0.217, sockets.rhd = 0.195, sockets.native = 0.091;
  double sum = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const PatternRun run = run_pattern(make_pattern("fixed-rank2", 8, 24, 0.8, seed), seed, 0, sockets, Noise{}, 2, true);
    EXPECT_EQ(run.best_fixed, "native");
    EXPECT_LE(run.auto_total / run.best_fixed_total, 1.20) << "seed " << seed;
    EXPECT_EQ(run.choices.front().algorithm, Algorithm::native) << "seed " << seed;
    EXPECT_EQ(run.choices.back().algorithm, Algorithm::native) << "seed " << seed;
    sum += run.auto_total / run.best_fixed_total;
  }
  EXPECT_LE(sum / 8, 1.17);
  // (b) Native faster than every schedule with nobody late, StragglAR faster beside a 300 ms
  // straggler (an NVLink-like shape): StragglAR told the late rank is still found, and nobody
  // late stays on native.
  Costs nvlink;
  nvlink.native = 0.120;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const PatternRun late = run_pattern(make_pattern("fixed-rank2", 8, 24, 0.3, seed), seed, 0, nvlink, Noise{}, 2, true);
    EXPECT_EQ(late.best_fixed, "stragglar");
    EXPECT_EQ(late.choices.back(), (Choice{Algorithm::stragglar, 2})) << "seed " << seed;
    EXPECT_LE(late.auto_total / late.best_fixed_total, 1.10) << "seed " << seed;
    const PatternRun none = run_pattern(make_pattern("none", 8, 24, 0.3, seed), seed, 0, nvlink, Noise{}, 2, true);
    EXPECT_EQ(none.best_fixed, "native");
    EXPECT_EQ(none.choices.back().algorithm, Algorithm::native) << "seed " << seed;
    EXPECT_LE(none.auto_total / none.best_fixed_total, 1.08) << "seed " << seed;
  }
}

TEST(StragglerPolicy, AColdFirstCallDoesNotRuleNativeOut) {
  // Native is the fastest here, but the configuration's first call (the only one that measures
  // it unasked) pays first-use costs: 3x (NCCL connects its channels on the first collective; on
  // MPI the library's first touch of a size). That measurement alone must not rule it out: it is
  // measured again (docs/auto.md "The first calls") and chosen. Host engines (decide every call)
  // and lag engines (record 2 calls and decide 1 call late, every P calls).
  Costs fast_native;
  fast_native.native = 0.120;
  Costs cold = fast_native;
  cold.native = 3 * fast_native.native;
  for (int lag : {0, 1})
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      PolicyConfig cfg = config8();
      cfg.first_call_synchronised = true;
      cfg.exchange_every = lag ? 0 : 1;
      Job job(cfg, model_predictor(fast_native), seed, lag ? 2 : 0, lag);
      Noise z;
      z.outlier_p = 0;  // this is about the first call; slow outliers are the next test's subject
      job.call(World{}, cold, z);  // the configuration's first call: native, cold
      int native = 0;
      for (int i = 0; i < 40; ++i) native += job.call(World{}, fast_native, z).algorithm == Algorithm::native && i >= 15;
      EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::native) << "seed " << seed << " lag " << lag;
      EXPECT_GE(native, 22) << "seed " << seed << " lag " << lag;  // of the last 25 calls
    }
}

TEST(StragglerPolicy, WithoutNativeInTheFirstCallNativesFirstRunIsColdAndMeasuredAgain) {
  // The MPI engine's form (first_call_measures_native false): the configuration's first call runs
  // the model's best, so a configuration called once never pays native's first run at its size.
  // Native is measured when the probes reach it, that first run 3x slow (MPI_Iallreduce's first
  // touch of its temporaries), which must not rule it out: it is measured again and chosen.
  Costs fast_native;
  fast_native.native = 0.120;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    PolicyConfig cfg = config8();
    cfg.first_call_synchronised = true;
    cfg.first_call_measures_native = false;
    cfg.exchange_every = 1;
    Job job(cfg, model_predictor(fast_native), seed);
    Noise z;
    z.outlier_p = 0;
    int native_runs = 0, native_late = 0, first_native_call = -1;
    for (int i = 0; i < 40; ++i) {
      Costs now = fast_native;
      if (native_runs == 0) now.native = 3 * fast_native.native;  // native's first run
      const bool native = job.call(World{}, now, z).algorithm == Algorithm::native;
      if (native && native_runs == 0) first_native_call = i;
      native_runs += native;
      native_late += native && i >= 15;
    }
    EXPECT_GT(first_native_call, 0) << "seed " << seed << ": the first call ran native";
    EXPECT_LE(first_native_call, cfg.period) << "seed " << seed << ": native measured within a block";
    EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::native) << "seed " << seed;
    EXPECT_GE(native_late, 22) << "seed " << seed;  // of the last 25 calls
  }
}

TEST(StragglerPolicy, OneSlowRunDoesNotRuleOutACandidateTheModelRanksLevelWithTheBest) {
  // Nobody late; the model cannot tell Ring from RHD (both 0.170 s) and Ring is in fact the
  // fastest (0.130 against RHD's 0.151), but Ring's one run is slow (1.4×: a loaded host's
  // draw, or its first messages of those sizes) — slower than RHD by more than the noise. It
  // gets a second run before it is ruled out, and auto ends on Ring (docs/auto.md "Exploration",
  // "One run is not a verdict", where the traced run is).
  Costs k;
  k.ring = 0.130;
  const Predictor level = [k](const Choice& c, double d) {
    if (c.algorithm == Algorithm::ring || c.algorithm == Algorithm::rhd) return 0.170;
    return model_predictor(k)(c, d);
  };
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    PolicyConfig cfg = config8();
    cfg.first_call_synchronised = true;
    cfg.exchange_every = 1;
    Job job(cfg, level, seed);
    Noise z;
    z.outlier_p = 0;  // the one slow run is the test's own
    int ring_runs = 0, ring_late = 0;
    for (int i = 0; i < 40; ++i) {
      Costs now = k;
      if (ring_runs == 0) now.ring = 1.4 * k.ring;  // Ring's first run
      const bool ring = job.call(World{}, now, z).algorithm == Algorithm::ring;
      ring_runs += ring;
      ring_late += ring && i >= 15;
    }
    EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::ring) << "seed " << seed;
    EXPECT_GE(ring_late, 22) << "seed " << seed;  // of the last 25 calls
  }
}

TEST(StragglerPolicy, AStragglerThatDoesNotPersistIsNotFollowed) {
  // Two ranks late together, every rank a little late: no rank is late in most calls, so
  // StragglAR is never told a rank on a guess (it runs only as a bounded exploration). A random
  // rank per call: StragglAR runs in a minority of calls (chance majorities; the known miss).
  for (const char* kind : {"random-rank", "two-late", "imbalance"})
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      const PatternRun run = run_pattern(make_pattern(kind, 8, 60, 0.300, seed), seed);
      int stragglar = 0;
      for (const Choice& c : run.choices) stragglar += c.algorithm == Algorithm::stragglar;
      EXPECT_LE(stragglar, std::string(kind) == "random-rank" ? 60 * 3 / 10 : 60 / 10) << kind << " seed " << seed;
    }
}

// ---- several late ranks ---------------------------------------------------------------------

TEST(StragglerPolicy, RanksLateTogetherEveryCallConvergeOnStragglarKWithThatSet) {
  // Ranks 6 and 7 late together by 300 ms in every call: the set {6,7} is learned (identical on
  // every rank: Job checks it after every decision) and stragglar-k told it runs from then on.
  for (int every : {1, 0})
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      PolicyConfig cfg = config8();
      cfg.exchange_every = every;
      cfg.first_call_synchronised = true;
      Job job(cfg, model_predictor_k(Costs{}), seed);
      job.call(World{}, Costs{}, Noise{});
      int k_calls = 0;
      for (int i = 0; i < 40; ++i) {
        const Choice c = job.call(late_together({6, 7}, 0.300), Costs{}, Noise{});
        if (i >= 20) {
          k_calls += c.algorithm == Algorithm::stragglar_k;
          if (c.algorithm == Algorithm::stragglar_k) {
            EXPECT_EQ(to_vector(c.late), (std::vector<int>{6, 7}));
          }
        }
      }
      const std::vector<int> set{6, 7};
      EXPECT_EQ(to_vector(job.rank0().target_set()), set) << "seed " << seed << " every " << every;
      EXPECT_EQ(to_vector(job.rank0().late_set()), set) << "seed " << seed << " every " << every;
      EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar_k, -1, set})) << "seed " << seed << " every " << every;
      EXPECT_GE(k_calls, 18) << "seed " << seed << " every " << every;  // exploration aside
    }
}

TEST(StragglerPolicy, OneLateRankStillPicksStragglarWhenStragglarKIsACandidate) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    PolicyConfig cfg = config8();
    cfg.first_call_synchronised = true;
    Job job(cfg, model_predictor_k(Costs{}), seed);
    job.call(World{}, Costs{}, Noise{});
    int k_calls = 0;
    for (int i = 0; i < 40; ++i) k_calls += job.call(World{3, 0.300}, Costs{}, Noise{}).algorithm == Algorithm::stragglar_k;
    EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::stragglar, 3})) << "seed " << seed;
    EXPECT_TRUE(job.rank0().target_set().empty()) << "seed " << seed;  // no set of 2+ was ever late together
    EXPECT_EQ(k_calls, 0) << "seed " << seed;
  }
}

TEST(StragglerPolicy, RandomLatePairsAreNotChased) {
  // A different random pair late in every call: no set is late in most of the last P calls, so
  // stragglar-k is not told one on a guess (a chance majority at most costs a bounded probe).
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    PolicyConfig cfg = config8();
    cfg.first_call_synchronised = true;
    Job job(cfg, model_predictor_k(Costs{}), seed);
    std::mt19937_64 pick(seed * 7919);
    job.call(World{}, Costs{}, Noise{});
    int k_calls = 0;
    for (int i = 0; i < 60; ++i) {
      const int a = static_cast<int>(pick() % 8);
      int b = static_cast<int>(pick() % 7);
      if (b >= a) ++b;
      k_calls += job.call(late_together({a, b}, 0.300), Costs{}, Noise{}).algorithm == Algorithm::stragglar_k;
    }
    EXPECT_LE(k_calls, 60 / 10) << "seed " << seed;
    EXPECT_NE(job.rank0().incumbent().algorithm, Algorithm::stragglar_k) << "seed " << seed;
  }
}

TEST(StragglerPolicy, HierarchicalOnlyWhenTheLateSetIsOneKnownHost) {
  // hierarchical modelled (and simulated) faster than stragglar-k here. Hosts of 2 ranks: {6,7}
  // is host 3, hierarchical is chosen. Hosts unknown (0) or of 4 ranks: it never runs.
  Costs fast_h;
  fast_h.rest_h = 0.095;
  for (int rph : {2, 0, 4}) {
    PolicyConfig cfg = config8();
    cfg.first_call_synchronised = true;
    cfg.ranks_per_host = rph;
    Job job(cfg, model_predictor_k(fast_h), 3);
    job.call(World{}, fast_h, Noise{});
    int h_calls = 0;
    for (int i = 0; i < 40; ++i) h_calls += job.call(late_together({6, 7}, 0.300), fast_h, Noise{}).algorithm == Algorithm::hierarchical;
    if (rph == 2) {
      EXPECT_EQ(job.rank0().incumbent(), (Choice{Algorithm::hierarchical, -1, std::vector<int>{6, 7}}));
    } else {
      EXPECT_EQ(h_calls, 0) << "ranks_per_host " << rph;
      EXPECT_EQ(job.rank0().incumbent().algorithm, Algorithm::stragglar_k) << "ranks_per_host " << rph;
    }
  }
}

TEST(StragglerPolicy, LateSetsLearnedAreBounded) {
  // The late pair moves every 8 calls, through 6 different pairs; with max_late_sets 3 at most
  // three are learned (plans and simulations per set are bounded), and every rank agrees.
  PolicyConfig cfg = config8();
  cfg.first_call_synchronised = true;
  cfg.max_late_sets = 3;
  Job job(cfg, model_predictor_k(Costs{}), 5);
  job.call(World{}, Costs{}, Noise{});
  std::vector<std::vector<int>> targets;
  const std::vector<std::vector<int>> pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {1, 2}, {3, 4}};
  for (const auto& pair : pairs)
    for (int i = 0; i < 8; ++i) {
      job.call(late_together(pair, 0.300), Costs{}, Noise{});
      const std::vector<int> t = to_vector(job.rank0().target_set());
      if (!t.empty() && std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    }
  EXPECT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets.front(), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace stragglar::detail

namespace stragglar::detail {
namespace {
using namespace policy_job;

// ---- a load that drifts ------------------------------------------------------------------------

TEST(StragglerPolicy, ADriftingLoadWithNobodyLateStaysNearTheBestFixedEntry) {
  // Nobody late; Ring 10 % faster than RHD, native in between; the model says Ring and RHD are
  // equal (the α-β model: the same bytes) and has nothing for native. Heavy per-call noise on a
  // drifting load, 24 timed calls after the first call and 2 warm-ups (bench/patterns/run.sh).
  // The best fixed entry is the lowest of three noisy totals, each with a drift of its own, so
  // even Ring run once more is above it (the floor of any policy here, checked below). With three
  // candidates within 11 % and noise of 8–10 %, 24 calls cannot tell them apart (docs/auto.md,
  // the drifting-load study, has the figures and the changes tried against it).
  Costs k;
  k.ring = 0.100;
  k.rhd = 0.111;
  k.native = 0.106;
  Noise z;
  z.sigma = 0.08;
  z.outlier_p = 0.10;
  z.outlier_factor = 1.4;
  const Predictor equal = [](const Choice& c, double d) {
    switch (c.algorithm) {
      case Algorithm::stragglar: return std::max(0.12 - d, 0.0) + 0.09;
      case Algorithm::ring: return 0.1005;
      case Algorithm::rhd: return 0.1000;
      default: return kNaN;
    }
  };
  double sum = 0, floor_sum = 0;
  int on_ring = 0;
  constexpr int kSeeds = 40;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    PolicyConfig cfg = config8();
    cfg.settled_exchange_every = cfg.period;  // as the runtime sets it (auto_runner.cpp)
    cfg.first_call_synchronised = true;
    Job job(cfg, equal, seed);
    Drift drift;
    double auto_total = 0;
    for (int i = 0; i < 3; ++i) job.call(World{}, drift.next(k, job.rng()), z);
    for (int i = 0; i < 24; ++i) {
      CallResult res;
      job.call(World{}, drift.next(k, job.rng()), z, &res);
      auto_total += res.exposed;
    }
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    const auto fixed_total = [&](Algorithm a) {
      Drift own;
      double total = 0;
      for (int i = 0; i < 24; ++i) total += simulate_call(Choice{a, -1}, 8, World{}, own.next(k, rng), z, rng).exposed;
      return total;
    };
    const double best = std::min({fixed_total(Algorithm::ring), fixed_total(Algorithm::rhd), fixed_total(Algorithm::native)});
    sum += auto_total / best;
    floor_sum += fixed_total(Algorithm::ring) / best;
    on_ring += job.rank0().incumbent().algorithm == Algorithm::ring;
  }
  EXPECT_LE(sum / kSeeds, 1.09) << "Ring alone: " << floor_sum / kSeeds;
  EXPECT_GE(floor_sum / kSeeds, 1.0);  // the selection the best fixed entry gets for free
  EXPECT_GE(on_ring, kSeeds / 2);
}

TEST(StragglerPolicy, NativeMeasuredLevelWithTheBestScheduleIsChosen) {
  // Native a little faster than RHD, calls varying by ~10 %, nobody persistently late: native
  // measured once within the noise gets a second run, and measured native replaces a schedule
  // without the noise term of the margin (docs/auto.md "Choice and hysteresis", rule 2). Here
  // native is 7 % faster than RHD, σ 6 %.
  Costs vm;
  vm.native = 0.151 * 0.93;
  Noise z;
  z.sigma = 0.06;
  for (const char* kind : {"imbalance", "none"}) {
    double sum = 0;
    int native_calls = 0;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      const PatternRun run = run_pattern(make_pattern(kind, 8, 24, 0.100, seed), seed, 1, vm, z);
      EXPECT_EQ(run.best_fixed, "native") << kind << " seed " << seed;
      sum += run.auto_total / run.best_fixed_total;
      for (const Choice& c : run.choices) native_calls += c.algorithm == Algorithm::native;
    }
    EXPECT_GE(native_calls, 136) << kind << " (of 192 calls)";
    EXPECT_LE(sum / 8, 1.04) << kind;
  }
  // Where native is slower than RHD by more than the noise it stays a minority (the margin
  // still guards RHD against a lucky pair of native runs: ClearWinnerIsKeptUnderHeavyNoise).
  vm.native = 0.151 * 1.07;
  int native_calls = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed)
    for (const Choice& c : run_pattern(make_pattern("none", 8, 24, 0.100, seed), seed, 1, vm, z).choices)
      native_calls += c.algorithm == Algorithm::native;
  EXPECT_LE(native_calls, 48) << "of 192 calls";
}

}  // namespace
}  // namespace stragglar::detail
