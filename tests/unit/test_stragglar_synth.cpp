// StragglAR synthesis (paper §3, Algorithm 1, appendix): every schedule
// passes the verifier, and the `allreduce` phase meets the round bound n + ⌈log2 n⌉ - 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"
#include "synth/stragglar_internal.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar {
namespace {

// Under AddressSanitizer (CI) the even-n sweep above n = 64 takes n ≡ 14 (mod 16) and 2^k only.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

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

// Rounds of the paper's public code, measured.
const std::map<int, int> kPaperRounds = {{12, 15}, {14, 17}, {20, 24}, {22, 26}, {26, 33},
                                         {28, 33}, {30, 36}, {48, 57}, {96, 108}};

// Issue #5: every even n ≤ 256 at the bound n + ⌈log2 n⌉ − 2 (docs/stragglar_rounds.csv).
TEST(StragglarSynth, EvenNUpTo256MeetTheBoundAndVerify) {
  // One synthesis per n (straggler n-1); straggler 0 is the same schedule relabeled, exactly
  // what synthesize() does.
  for (int n = 2; n <= 256; n += 2) {
    if (kSanitized && n > 64 && n % 16 != 14 && (n & (n - 1)) != 0) continue;
    const Schedule s = make(n, n - 1);
    const std::string what = "n=" + std::to_string(n);
    expect_valid(s, what);
    const int rounds = allreduce_rounds(s);
    EXPECT_EQ(rounds, stragglar_round_bound(n)) << what;
    if (auto it = kPaperRounds.find(n); it != kPaperRounds.end()) {
      EXPECT_LE(rounds, it->second) << what;
    }
    if (!kSanitized || n <= 128 || n % 16 == 14) {  // ASan run: relabeled copies for a subset
      const Schedule s0 = relabel(s, detail::straggler_relabeling(n, 0));
      expect_valid(s0, what + " straggler=0");
    }
  }
  EXPECT_EQ(make(30, 0), relabel(make(30, 29), detail::straggler_relabeling(30, 0)));
}

TEST(StragglarSynth, OddNVerify) {
  for (int n = 3; n <= 65; n += 2)
    for (int straggler : {0, n / 2, n - 1}) {
      const Schedule s = make(n, straggler);
      expect_shape(s, n, straggler, 1);
      expect_valid(s, "n=" + std::to_string(n) + " straggler=" + std::to_string(straggler));
      EXPECT_EQ(allreduce_rounds(s), stragglar_round_bound(n)) << "n=" << n;
    }
}

// The near-power-of-two builder itself (not only through the flow fallback) gives a schedule at
// the bound exactly for the n where its donor and recipient ranks are different ranks,
// 3n ≥ 2N + 3 − L (N = 2^L, L = ⌈log2 n⌉), except n = 3, 6, 11, 21 (measured: a matching fails
// in an early round; the flow reaches the bound there), and every one verifies.
TEST(StragglarSynth, NearPowerOfTwoBuilderReachesTheBound) {
  int built = 0;
  for (int n = 2; n <= 256; ++n) {
    const int L = log2_ceil(n), N = 1 << L;
    if (3 * n < 2 * N + 3 - L || n <= 3 || n == 6 || n == 11 || n == 21) {
      EXPECT_FALSE(detail::stragglar_near_pow2_rounds(n).has_value()) << "n=" << n;
      continue;
    }
    if (kSanitized && n > 64 && n % 2 == 1) continue;
    const std::string what = "n=" + std::to_string(n);
    auto rounds = detail::stragglar_near_pow2_rounds(n);
    ASSERT_TRUE(rounds.has_value()) << what;
    EXPECT_EQ(static_cast<int>(rounds->size()), stragglar_round_bound(n)) << what;
    if (N == n) {  // synthesize() uses Algorithm 1; the builder's schedule (N − n = 0) verifies too
      Schedule s = make(n, n - 1);
      s.phases.back().rounds = std::move(*rounds);
      expect_valid(s, what + " (builder)");
      continue;
    }
    const Schedule s = make(n, n - 1);
    EXPECT_EQ(phase(s, "allreduce").rounds, *rounds) << what;  // synthesize() uses it
    if (n % 2 == 1) expect_valid(s, what);  // even n (and straggler 0): EvenNUpTo256MeetTheBoundAndVerify
    ++built;
  }
  EXPECT_EQ(built, kSanitized ? 102 : 168);  // 7, 12..15, 22..31, 42..63, 84..127, 169..255 (odd > 64 skipped under ASan)
}

// Every odd n up to 255 at the bound too (Release only: ~100 schedules of up to 255 ranks).
TEST(StragglarSynth, OddNUpTo255MeetTheBound) {
  if (kSanitized) GTEST_SKIP() << "Release only (OddNVerify covers 3..65 under ASan)";
  for (int n = 67; n <= 255; n += 2) {
    const Schedule s = make(n, n - 1);
    EXPECT_EQ(allreduce_rounds(s), stragglar_round_bound(n)) << "n=" << n;
    expect_valid(s, "n=" + std::to_string(n));
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
        if ((n & (n - 1)) == 0 || n == 6 || (n == 24 && K <= 4)) {
          EXPECT_EQ(allreduce_rounds(s), target) << what;
        } else {  // n = 24, K = 5..8: one round above the target (measured)
          EXPECT_EQ(allreduce_rounds(s), target + 1) << what;
        }
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

  // With a reduction cost γ the straggler's rounds cost more per byte, so auto pipelines at
  // least as finely, and the chosen K is the best K of the model (checked against the simulator).
  CostModel with_gamma = cost;
  with_gamma.gamma_s_per_byte = cost.beta_s_per_byte;
  const int Kg = choose_pipeline(8, gib, with_gamma);
  EXPECT_GE(Kg, K);
  auto exposed = [&](int k) { return lockstep_time_s(make(8, 7, k), gib, with_gamma, true); };
  EXPECT_LE(exposed(Kg), exposed(Kg - 1) * (1 + 1e-12)) << "Kg=" << Kg;
  EXPECT_LE(exposed(Kg), exposed(Kg + 1) * (1 + 1e-12)) << "Kg=" << Kg;
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

// Regenerates kBestSeed of src/synth/stragglar_deadline.cpp (slow; run by hand with
// --gtest_also_run_disabled_tests --gtest_filter='*SeedSearch'): n, bound, best rounds, seed.
TEST(StragglarSynth, DISABLED_SeedSearch) {
  for (int n = 6; n <= 256; n += 2) {
    if ((n & (n - 1)) == 0) continue;
    const int bound = stragglar_round_bound(n);
    const int seeds = n <= 64 ? 64 : n <= 128 ? 32 : 8;
    int best = 1 << 30, best_seed = 0;
    for (int seed = 1; seed <= seeds && best > bound; ++seed)
      if (auto r = detail::stragglar_flow_attempt(n, 1, static_cast<std::uint64_t>(seed), best - 1)) {
        best = static_cast<int>(r->size());
        best_seed = seed;
      }
    std::printf("%d %d %d %d\n", n, bound, best, best_seed);
  }
}

TEST(StragglarSynth, Deterministic) {
  for (int n : {12, 30, 33, 64})
    EXPECT_EQ(make(n, 3), make(n, 3)) << "n=" << n;
}

}  // namespace
}  // namespace stragglar
