// StragglAR synthesis (paper §3, Algorithm 1, appendix; issues #2 and #5): every schedule
// passes the verifier, and the `allreduce` phase meets the round bound n + ⌈log2 n⌉ - 2.
#include <gtest/gtest.h>

#include <string>

#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar {
namespace {

int log2_ceil(int n) {
  int L = 0;
  while ((1 << L) < n) ++L;
  return L;
}

Schedule make(int n, int straggler, int pipeline = 1) {
  SynthOptions o;
  o.straggler = straggler;
  o.pipeline = pipeline;
  return synthesize(Algorithm::stragglar, n, o);
}

const Phase& phase(const Schedule& s, const std::string& name) {
  for (const Phase& p : s.phases)
    if (p.name == name) return p;
  throw std::runtime_error("no phase " + name);
}

int allreduce_rounds(const Schedule& s) { return static_cast<int>(phase(s, "allreduce").rounds.size()); }

// Shape every StragglAR schedule has, whatever the builder.
void expect_shape(const Schedule& s, int n, int straggler, int pipeline) {
  EXPECT_EQ(s.algorithm, "stragglar");
  EXPECT_EQ(s.nranks, n);
  ASSERT_TRUE(s.straggler.has_value());
  EXPECT_EQ(*s.straggler, straggler);
  EXPECT_EQ(s.nchunks, pipeline * (n - 1));
  EXPECT_EQ(s.ports, 1);
  ASSERT_EQ(s.phases.size(), 2u);
  EXPECT_EQ(s.phases[0].name, "reduce_scatter");
  EXPECT_FALSE(s.phases[0].waits_for_straggler);
  EXPECT_EQ(static_cast<int>(s.phases[0].rounds.size()), n > 2 ? n - 2 : 0);
  EXPECT_EQ(s.phases[1].name, "allreduce");
  EXPECT_TRUE(s.phases[1].waits_for_straggler);
  // Round r < K(n-1): the straggler and one other rank exchange chunk r with two reduces.
  const auto& rounds = s.phases[1].rounds;
  for (int r = 0; r < s.nchunks && r < static_cast<int>(rounds.size()); ++r) {
    int reduces = 0;
    for (const Transfer& t : rounds[r]) {
      if (t.op != TransferOp::reduce) continue;
      ++reduces;
      EXPECT_TRUE(t.src == straggler || t.dst == straggler) << "n=" << n << " round " << r;
      EXPECT_EQ(t.chunks, std::vector<int>{r}) << "n=" << n << " round " << r;
    }
    EXPECT_EQ(reduces, 2) << "n=" << n << " round " << r;
  }
}

void expect_valid(const Schedule& s, const std::string& what) {
  const VerifyReport r = verify(s);
  ASSERT_TRUE(r.ok) << what << ": " << r.message;
  // One chunk per transfer: every round costs exactly one chunk of bandwidth.
  for (const Phase& p : s.phases) {
    if (p.name != "allreduce") continue;
    for (const Round& round : p.rounds)
      for (const Transfer& t : round) ASSERT_EQ(t.chunks.size(), 1u) << what;
  }
}

TEST(StragglarSynth, EveryNUpTo64AndEveryStragglerPosition) {
  for (int n = 2; n <= 64; ++n)
    for (int straggler : {0, n / 2, n - 1}) {
      const Schedule s = make(n, straggler);
      const std::string what = "n=" + std::to_string(n) + " straggler=" + std::to_string(straggler);
      expect_shape(s, n, straggler, 1);
      expect_valid(s, what);
    }
}

TEST(StragglarSynth, PowersOfTwoMeetAlgorithm1Exactly) {
  for (int n = 2; n <= 512; n *= 2)
    for (int straggler : {0, n / 2, n - 1}) {
      const Schedule s = make(n, straggler);
      expect_valid(s, "n=" + std::to_string(n) + " straggler=" + std::to_string(straggler));
      EXPECT_EQ(allreduce_rounds(s), n + log2_ceil(n) - 2) << "n=" << n;
      EXPECT_EQ(allreduce_rounds(s), stragglar_round_bound(n)) << "n=" << n;
    }
}

TEST(StragglarSynth, N1024) {  // one case: the verifier's state is n·nchunks bitsets of n bits
  const Schedule s = make(1024, 1023);
  expect_valid(s, "n=1024");
  EXPECT_EQ(allreduce_rounds(s), 1024 + 10 - 2);
}

TEST(StragglarSynth, N4IsThePaperFigure) {
  // The n = 4 schedule drawn in src/synth/stragglar_pow2.cpp (paper Fig. 3a).
  const Schedule s = make(4, 3);
  using T = Transfer;
  const auto R = TransferOp::reduce, C = TransferOp::copy;
  const std::vector<Round> expected = {
      {T{0, 3, {0}, R}, T{3, 0, {0}, R}},
      {T{0, 2, {0}, C}, T{1, 3, {1}, R}, T{3, 1, {1}, R}},
      {T{0, 1, {0}, C}, T{1, 0, {1}, C}, T{2, 3, {2}, R}, T{3, 2, {2}, R}},
      {T{1, 2, {1}, C}, T{2, 1, {2}, C}, T{3, 0, {2}, C}},
  };
  EXPECT_EQ(phase(s, "allreduce").rounds, expected);
}

TEST(StragglarSynth, EvenNVerifyAndNeverBeatTheBound) {
  // Issue #5 asks for the bound for every even n ≤ 256; today only 2^k and n = 6 reach it
  // (docs/schedules.md has the table). This pins validity and the measured small cases.
  for (int n = 2; n <= 128; n += 2)
    for (int straggler : {0, n - 1}) {
      const Schedule s = make(n, straggler);
      expect_valid(s, "n=" + std::to_string(n));
      EXPECT_GE(allreduce_rounds(s), stragglar_round_bound(n)) << "n=" << n;
    }
  EXPECT_EQ(allreduce_rounds(make(6, 5)), stragglar_round_bound(6));
  EXPECT_LE(allreduce_rounds(make(12, 11)), 15);  // the paper's method: 15
  EXPECT_LE(allreduce_rounds(make(14, 13)), 18);
}

TEST(StragglarSynth, OddNVerify) {
  for (int n = 3; n <= 65; n += 2)
    for (int straggler : {0, n / 2, n - 1}) {
      const Schedule s = make(n, straggler);
      expect_shape(s, n, straggler, 1);
      expect_valid(s, "n=" + std::to_string(n) + " straggler=" + std::to_string(straggler));
      EXPECT_GE(allreduce_rounds(s), stragglar_round_bound(n)) << "n=" << n;
    }
}

TEST(StragglarSynth, PipelinedSchedulesVerifyWithExpectedRounds) {
  for (int K = 1; K <= 8; ++K)
    for (int n : {4, 6, 8, 16, 24}) {
      for (int straggler : {0, n - 1}) {
        const Schedule s = make(n, straggler, K);
        const std::string what = "n=" + std::to_string(n) + " K=" + std::to_string(K);
        expect_shape(s, n, straggler, K);
        expect_valid(s, what);
        const int target = K * (n - 1) + log2_ceil(n) - 1;
        if ((n & (n - 1)) == 0) EXPECT_EQ(allreduce_rounds(s), target) << what;
        else EXPECT_GE(allreduce_rounds(s), target) << what;
      }
    }
}

TEST(StragglarSynth, RoundBound) {
  EXPECT_EQ(stragglar_round_bound(2), 1);
  EXPECT_EQ(stragglar_round_bound(4), 4);
  EXPECT_EQ(stragglar_round_bound(8), 9);
  EXPECT_EQ(stragglar_round_bound(12), 14);
  EXPECT_EQ(stragglar_round_bound(96), 101);
  EXPECT_THROW(stragglar_round_bound(1), Error);
}

TEST(StragglarSynth, PaperMatchingMethodVerifiesButMissesTheBound) {
  // The paper's appendix method (LEMON max-weight matching per round), kept as reference.
  for (int n : {6, 10, 12, 14, 20}) {
    Schedule s = make(n, n - 1);
    s.phases[1].rounds = detail::stragglar_matching_rounds(n, 1);
    expect_valid(s, "matching n=" + std::to_string(n));
    EXPECT_GE(allreduce_rounds(s), stragglar_round_bound(n));
  }
  Schedule s = make(14, 13);
  s.phases[1].rounds = detail::stragglar_matching_rounds(14, 1);
  EXPECT_GT(allreduce_rounds(s), stragglar_round_bound(14));  // the 14 → 17
}

TEST(StragglarSynth, ChoosePipeline) {
  const CostModel cost;  // α = 3 µs, 450 GiB/s
  EXPECT_EQ(choose_pipeline(8, 0, cost), 1);
  EXPECT_EQ(choose_pipeline(8, 64, cost), 1);  // latency-bound: no pipelining
  const std::size_t gib = std::size_t{1} << 30;
  const int K = choose_pipeline(8, gib, cost);
  EXPECT_GT(K, 1);
  // The anchor: n = 8, 1 GiB — auto-pipelined StragglAR ≥ 1.55× faster than ring
  // in exposed time (ring: 14α + 1.75 sβ; StragglAR K=1: 9α + 9/7 sβ).
  SynthOptions o;
  o.pipeline = kPipelineAuto;
  o.bytes = gib;
  const Schedule sar = synthesize(Algorithm::stragglar, 8, o);
  EXPECT_EQ(sar.nchunks, K * 7);
  expect_valid(sar, "auto pipeline");
  const double t_sar = lockstep_time_s(sar, gib, cost, /*waiting_phases_only=*/true);
  const double t_ring = lockstep_time_s(synthesize(Algorithm::ring, 8), gib, cost);
  EXPECT_NEAR(t_ring, 14 * cost.alpha_s + 1.75 * gib * cost.beta_s_per_byte, 1e-9);
  const double t_k1 = lockstep_time_s(make(8, 7, 1), gib, cost, true);
  EXPECT_NEAR(t_k1, 9 * cost.alpha_s + 9.0 / 7.0 * gib * cost.beta_s_per_byte, 1e-9);
  EXPECT_GE(t_ring / t_sar, 1.55) << "K=" << K;
}

TEST(StragglarSynth, RejectsBadOptions) {
  SynthOptions o;
  o.pipeline = -1;
  EXPECT_THROW(synthesize(Algorithm::stragglar, 8, o), Error);
  o.pipeline = 100000;
  EXPECT_THROW(synthesize(Algorithm::stragglar, 8, o), Error);
  try {
    o.pipeline = 5000;
    synthesize(Algorithm::stragglar, 8, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos) << e.what();
  }
  o = {};
  o.straggler = 8;
  EXPECT_THROW(synthesize(Algorithm::stragglar, 8, o), Error);
}

TEST(StragglarSynth, Deterministic) {
  for (int n : {12, 30, 33, 64})
    EXPECT_EQ(make(n, 3), make(n, 3)) << "n=" << n;
}

}  // namespace
}  // namespace stragglar
