// StragglAR-k: k ranks late together. Every schedule verifies exactly, keeps every
// late rank out of the no-wait phase, stays within a fixed distance of the round bound, and
// the schedule format carries the set.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "stragglar/error.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar {
namespace {

Schedule stragglar_k(int n, std::vector<int> late, int pipeline = 1) {
  SynthOptions o;
  o.stragglers = std::move(late);
  o.pipeline = pipeline;
  return synthesize(Algorithm::stragglar_k, n, o);
}

std::vector<int> last_k(int n, int k) {
  std::vector<int> v;
  for (int r = n - k; r < n; ++r) v.push_back(r);
  return v;
}

// Checks what every StragglAR-k schedule must satisfy and returns its `allreduce` rounds.
int check(const Schedule& s, std::vector<int> late, const std::string& what) {
  std::sort(late.begin(), late.end());
  const VerifyReport r = verify(s);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
  EXPECT_EQ(s.late_ranks(), late) << what;
  EXPECT_EQ(s.phases.size(), 2U) << what;
  EXPECT_FALSE(s.phases.front().waits_for_straggler) << what;
  for (const Round& round : s.phases.front().rounds)
    for (const Transfer& t : round) {
      EXPECT_FALSE(std::binary_search(late.begin(), late.end(), t.src)) << what;
      EXPECT_FALSE(std::binary_search(late.begin(), late.end(), t.dst)) << what;
    }
  return static_cast<int>(s.phases.back().rounds.size());
}

// The builder's distance to the bound: the late ranks' first final chunk needs k-1 rounds
// (each collector takes one late contribution a round) and ⌈log2 n⌉ more to reach every rank;
// docs/algorithms.md "StragglAR-k" has the measured gaps.
int slack(int n, int k) { return k + 2 * detail::ceil_log2(n) + 2; }

TEST(StragglarK, EveryNAndKVerifyNearTheBound) {
  for (int n = 2; n <= 24; ++n)
    for (int k = 1; 2 * k <= n; ++k) {
      const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k);
      const Schedule s = stragglar_k(n, last_k(n, k));
      const int rounds = check(s, last_k(n, k), what);
      const int bound = stragglar_k_round_bound(n, k, s.nchunks);
      EXPECT_GE(rounds, bound) << what;
      EXPECT_LE(rounds, bound + slack(n, k)) << what;
    }
}

TEST(StragglarK, AnySetOfLateRanksAndPipelines) {
  struct Case {
    int n;
    std::vector<int> late;
    int pipeline;
  };
  const std::vector<Case> cases = {
      {8, {6, 7}, 1},          {8, {0, 7}, 3},           {10, {3, 7, 0}, 1},     {12, {1, 3, 5, 7, 9, 11}, 2},
      {16, {14, 15}, 4},       {16, {0, 1, 2, 3}, 2},    {32, {28, 29, 30, 31}, 1}, {33, {5, 6, 7}, 2},
      {64, last_k(64, 8), 1},  {64, last_k(64, 8), 2},
  };
  for (const Case& c : cases) {
    std::string what = "n=" + std::to_string(c.n) + " K=" + std::to_string(c.pipeline) + " late";
    for (int r : c.late) {
      what.push_back(' ');
      what.append(std::to_string(r));
    }
    const Schedule s = stragglar_k(c.n, c.late, c.pipeline);
    EXPECT_EQ(s.nchunks, c.pipeline * (c.n - static_cast<int>(c.late.size()))) << what;
    const int rounds = check(s, c.late, what);
    EXPECT_LE(rounds, stragglar_k_round_bound(c.n, static_cast<int>(c.late.size()), s.nchunks) +
                          slack(c.n, static_cast<int>(c.late.size())))
        << what;
  }
}

TEST(StragglarK, OneLateRankIsNamedAsAStraggler) {
  SynthOptions o;
  o.straggler = 3;
  const Schedule s = synthesize(Algorithm::stragglar_k, 8, o);
  EXPECT_EQ(s.straggler, 3);
  EXPECT_TRUE(s.stragglers.empty());
  check(s, {3}, "n=8 straggler 3");
}

TEST(StragglarK, BadSetsAreRefusedNamingTheValue) {
  auto message = [](Algorithm a, int n, std::vector<int> late) {
    SynthOptions o;
    o.stragglers = std::move(late);
    try {
      synthesize(a, n, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(Algorithm::stragglar_k, 8, {1, 2, 3, 4, 5}).find("at most n/2 = 4"), std::string::npos);
  EXPECT_NE(message(Algorithm::stragglar_k, 8, {1, 8}).find("rank 8"), std::string::npos);
  EXPECT_NE(message(Algorithm::stragglar_k, 8, {2, 2}).find("given twice"), std::string::npos);
  EXPECT_NE(message(Algorithm::stragglar, 8, {6, 7}).find("expected stragglar-k"), std::string::npos);
  EXPECT_NE(message(Algorithm::broadcast, 8, {6, 7}).find("expected stragglar-k"), std::string::npos);
  // A set of one is the straggler, for every algorithm that has one.
  SynthOptions one;
  one.stragglers = {2};
  EXPECT_EQ(synthesize(Algorithm::stragglar, 8, one).straggler, 2);
  // Algorithms that single out nobody ignore the set, as they ignore `straggler`.
  SynthOptions two;
  two.stragglers = {6, 7};
  EXPECT_TRUE(verify(synthesize(Algorithm::ring, 8, two)).ok);
}

TEST(StragglarK, JsonCarriesTheSetAndOldFilesStayValid) {
  const Schedule s = stragglar_k(10, {2, 5, 9});
  const std::string text = schedule_to_json(s);
  EXPECT_NE(text.find("\"stragglers\":[2,5,9]"), std::string::npos);
  EXPECT_NE(text.find("\"format\":\"stragglar-schedule/1\""), std::string::npos);
  EXPECT_EQ(schedule_from_json(text), s);
  // A single-straggler file has no "stragglers" key, as before.
  EXPECT_EQ(schedule_to_json(synthesize(Algorithm::stragglar, 8)).find("stragglers"), std::string::npos);

  auto rejected = [](const std::string& json) {
    try {
      schedule_from_json(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = R"({"format":"stragglar-schedule/1","algorithm":"x","nranks":4,)";
  EXPECT_NE(rejected(head + R"("straggler":3,"stragglers":[2,3],"nchunks":1,"ports":1,"phases":[]})").find("straggler: null"),
            std::string::npos);
  EXPECT_NE(rejected(head + R"("straggler":null,"stragglers":[2,2],"nchunks":1,"ports":1,"phases":[]})").find("distinct"),
            std::string::npos);
  EXPECT_NE(rejected(head + R"("straggler":null,"stragglers":[4,1],"nchunks":1,"ports":1,"phases":[]})").find("stragglers[0]"),
            std::string::npos);
  EXPECT_NE(rejected(head + R"("straggler":null,"stragglers":[1],"nchunks":1,"ports":1,"phases":[]})").find("at least two"),
            std::string::npos);
}

TEST(StragglarK, VerifierKeepsEveryLateRankOutOfTheNoWaitPhase) {
  Schedule s = stragglar_k(8, {5, 7});
  // Move one transfer of the ReduceScatter among the punctual ranks onto late rank 5.
  Transfer& t = s.phases.front().rounds.front().front();
  t.dst = 5;
  const VerifyReport r = verify(s);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.message.find("straggler 5 takes part in a phase that does not wait for it"), std::string::npos) << r.message;
}

// Issue #23's model targets (1 GiB, α = 3 µs, 450 GiB/s, ideal delay, one link class), the
// StragglAR-k K chosen by the model. Every algorithm runs with the same ranks late.
double speedup_over_ring(int n, int k) {
  const std::size_t bytes = std::size_t{1} << 30;
  const CostModel cost;
  const std::vector<int> late = last_k(n, k);
  SynthOptions o;
  o.stragglers = late;
  o.pipeline = kPipelineAuto;
  o.bytes = bytes;
  const Schedule sk = synthesize(Algorithm::stragglar_k, n, o);
  EXPECT_TRUE(verify(sk).ok);
  const double ring = simulate(synthesize(Algorithm::ring, n), bytes, cost, Delay{true, 0}, late).exposed_s;
  return ring / simulate(sk, bytes, cost, Delay{true, 0}, late).exposed_s;
}

TEST(StragglarK, ModelTargets) {
  EXPECT_GE(speedup_over_ring(16, 2), 1.4);  // target 1.4x: 1.53x
  EXPECT_GE(speedup_over_ring(64, 8), 1.5);  // target 1.5x: 1.508x (K = 2, late-rank merges)
}

TEST(StragglarK, LateSetDelaysEveryAlgorithm) {
  const Schedule ring = synthesize(Algorithm::ring, 8);
  const CostModel cost;
  const SimResult one = simulate(ring, 1 << 20, cost, Delay{false, 1e-3}, {7});
  const SimResult two = simulate(ring, 1 << 20, cost, Delay{false, 1e-3}, {3, 7});
  EXPECT_NEAR(one.exposed_s, two.exposed_s, 1e-12);  // ring waits for everyone either way
  EXPECT_THROW(simulate(ring, 1 << 20, cost, Delay{true, 0}, {8}), Error);
  EXPECT_THROW(simulate(ring, 1 << 20, cost, Delay{true, 0}, std::vector<int>{}), Error);
}

// ---- hierarchical: a late host ----------------------------------------------------------------

Schedule hierarchical(int n, std::vector<int> late) {
  SynthOptions o;
  o.stragglers = std::move(late);
  return synthesize(Algorithm::hierarchical, n, o);
}

TEST(Hierarchical, EveryHostShapeVerifies) {
  for (int n = 2; n <= 48; ++n)
    for (int k = 1; 2 * k <= n; ++k) {
      if (n % k) continue;
      for (int host = 0; host < n / k; host += std::max(1, n / k - 1)) {  // the first and the last host
        std::vector<int> late;
        for (int i = 0; i < k; ++i) late.push_back(host * k + i);
        const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " host=" + std::to_string(host);
        const Schedule s = hierarchical(n, late);
        const VerifyReport r = verify(s);
        ASSERT_TRUE(r.ok) << what << ": " << r.message;
        EXPECT_EQ(s.late_ranks(), late) << what;
        for (const Phase& p : s.phases)
          if (!p.waits_for_straggler)
            for (const Round& round : p.rounds)
              for (const Transfer& t : round) {
                EXPECT_FALSE(std::binary_search(late.begin(), late.end(), t.src)) << what;
                EXPECT_FALSE(std::binary_search(late.begin(), late.end(), t.dst)) << what;
              }
        // Exposed: (k-1) + StragglAR's allreduce over n/k hosts + (k-1) rounds.
        const int H = n / k;
        const int cross = H >= 2 ? stragglar_round_bound(H) : 0;
        EXPECT_EQ(s.waiting_rounds(), 2 * (k - 1) + cross) << what;
      }
    }
}

TEST(Hierarchical, RefusesASetThatIsNotAHost) {
  EXPECT_THROW(hierarchical(8, {5, 6}), Error);     // not aligned to a host of 2
  EXPECT_THROW(hierarchical(9, {6, 7}), Error);     // 2 does not divide 9
  EXPECT_THROW(hierarchical(8, {0, 1, 2, 3, 4}), Error);
  EXPECT_NO_THROW(hierarchical(8, {6, 7}));
}

// Where each wins: one link class, stragglar-k; inter-host links 10x slower,
// hierarchical. Both are told the same late host, every rank of it late.
TEST(Hierarchical, WinsWhereHostLinksAreSlow) {
  const int n = 16;
  const std::vector<int> late = {12, 13, 14, 15};
  const std::size_t bytes = std::size_t{256} << 20;
  CostModel flat;
  CostModel hosts = flat;
  hosts.ranks_per_host = 4;
  hosts.inter_beta_s_per_byte = 10 * flat.beta_s_per_byte;
  SynthOptions o;
  o.stragglers = late;
  o.pipeline = kPipelineAuto;
  o.bytes = bytes;
  const Schedule k = synthesize(Algorithm::stragglar_k, n, o);
  const Schedule h = synthesize(Algorithm::hierarchical, n, o);
  auto exposed = [&](const Schedule& s, const CostModel& c) { return simulate(s, bytes, c, Delay{true, 0}, late).exposed_s; };
  EXPECT_LT(exposed(k, flat), exposed(h, flat));
  EXPECT_LT(exposed(h, hosts), exposed(k, hosts));
}

TEST(Simulate, TwoLinkClassesChargeInterHostTransfers) {
  const Schedule ring = synthesize(Algorithm::ring, 8);
  CostModel flat;
  CostModel hosts = flat;
  hosts.ranks_per_host = 4;
  hosts.inter_beta_s_per_byte = 10 * flat.beta_s_per_byte;
  const std::size_t bytes = 8 << 20;
  // Every ring round crosses a host boundary (3->4 and 7->0), so each costs the slow link.
  const double chunk = static_cast<double>(bytes) / 8;
  EXPECT_NEAR(lockstep_time_s(ring, bytes, hosts), 14 * (flat.alpha_s + hosts.inter_beta_s_per_byte * chunk), 1e-12);
  EXPECT_GT(simulate(ring, bytes, hosts, Delay{true, 0}).time_s, simulate(ring, bytes, flat, Delay{true, 0}).time_s);
  hosts.inter_beta_s_per_byte = 0;
  EXPECT_THROW(lockstep_time_s(ring, bytes, hosts), Error);
}

}  // namespace
}  // namespace stragglar

namespace stragglar {
namespace {

// A host's ranks share its link: two ranks of host 0 sending to host 1 in one round take twice
// one rank's time; without hosts each rank has its own port, as in the paper's model.
TEST(Simulate, HostLinkIsSharedByItsRanks) {
  Schedule s;
  s.algorithm = "two-pairs";
  s.nranks = 4;
  s.nchunks = 4;
  s.phases.push_back({"cross", true, {Round{{0, 2, ChunkList{0}, TransferOp::copy}, {1, 3, ChunkList{1}, TransferOp::copy}}}});
  const std::size_t bytes = 4 << 20;
  const double chunk = static_cast<double>(bytes) / 4;
  CostModel flat;
  CostModel hosts = flat;
  hosts.ranks_per_host = 2;
  hosts.inter_beta_s_per_byte = 10 * flat.beta_s_per_byte;
  EXPECT_NEAR(lockstep_time_s(s, bytes, flat), flat.alpha_s + flat.beta_s_per_byte * chunk, 1e-12);
  EXPECT_NEAR(lockstep_time_s(s, bytes, hosts), flat.alpha_s + 2 * hosts.inter_beta_s_per_byte * chunk, 1e-12);
  const EventResult e = simulate_events(s, bytes, hosts, std::vector<double>(4, 0.0));
  EXPECT_NEAR(e.last_finish_s, flat.alpha_s + 2 * hosts.inter_beta_s_per_byte * chunk, 1e-12);
  // One rank per host: the host's link is the rank's, nothing changes.
  hosts.ranks_per_host = 1;
  EXPECT_NEAR(lockstep_time_s(s, bytes, hosts), flat.alpha_s + hosts.inter_beta_s_per_byte * chunk, 1e-12);
}

// StragglAR across hosts pipelined K-fold: K·(n−k) chunks, exact for every host shape.
TEST(Hierarchical, PipelinedVerifies) {
  for (int n : {4, 6, 8, 12, 16, 24})
    for (int k = 1; 2 * k <= n; ++k) {
      if (n % k) continue;
      std::vector<int> late;
      for (int i = 0; i < k; ++i) late.push_back(n - k + i);
      for (int K : {2, 3, 5}) {
        SynthOptions o;
        o.stragglers = late;
        o.pipeline = K;
        const Schedule s = synthesize(Algorithm::hierarchical, n, o);
        const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " K=" + std::to_string(K);
        const VerifyReport r = verify(s);
        ASSERT_TRUE(r.ok) << what << ": " << r.message;
        EXPECT_EQ(s.nchunks, K * (n - k)) << what;
        EXPECT_EQ(s.late_ranks(), late) << what;
      }
    }
}

// Slow links between hosts: the model pipelines the cross-host rounds (K > 1) and that is
// clearly faster than StragglAR's plain rounds; the auto K is what synthesize() builds.
TEST(Hierarchical, PipelineChosenWhereHostLinksAreSlow) {
  const std::vector<int> late = {6, 7};
  const std::size_t bytes = std::size_t{16} << 20;
  CostModel c;
  c.alpha_s = 50e-6;
  c.beta_s_per_byte = 1.0 / 3e9;
  c.ranks_per_host = 2;
  c.inter_beta_s_per_byte = 1.0 / 125e6;
  const int K = choose_hierarchical_pipeline(8, late, bytes, c);
  EXPECT_GE(K, 4);
  SynthOptions o;
  o.stragglers = late;
  o.pipeline = kPipelineAuto;
  o.bytes = bytes;
  o.cost = c;
  const Schedule chosen = synthesize(Algorithm::hierarchical, 8, o);
  EXPECT_EQ(chosen.nchunks, K * 6);
  o.pipeline = 1;
  const Schedule plain = synthesize(Algorithm::hierarchical, 8, o);
  auto exposed = [&](const Schedule& s) { return simulate(s, bytes, c, Delay{true, 0}, late).exposed_s; };
  EXPECT_LT(exposed(chosen), 0.85 * exposed(plain));
}

}  // namespace
}  // namespace stragglar
