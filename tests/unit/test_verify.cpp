// The verifier accepts a correct schedule and rejects planted faults with the right message.
#include <gtest/gtest.h>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/verify.hpp"

namespace stragglar {
namespace {

// A hand-made 2-rank, 1-chunk exchange: correct as it stands.
Schedule tiny() {
  Schedule s;
  s.algorithm = "tiny";
  s.nranks = 2;
  s.nchunks = 1;
  s.phases.push_back(Phase{"exchange", true, {Round{Transfer{0, 1, {0}, TransferOp::reduce}, Transfer{1, 0, {0}, TransferOp::reduce}}}});
  return s;
}

void expect_rejected(const Schedule& s, const std::string& needle) {
  const VerifyReport r = verify(s);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find(needle), std::string::npos) << "message: " << r.message;
  EXPECT_THROW(verify_or_throw(s), Error);
}

TEST(Verify, AcceptsACorrectSchedule) {
  const VerifyReport r = verify(tiny());
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.rounds_per_phase, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(r.beta_cost_total, 1.0);
}

TEST(Verify, RejectsDoubleCounting) {
  Schedule s = tiny();
  s.phases[0].rounds.push_back(Round{Transfer{0, 1, {0}, TransferOp::reduce}});
  expect_rejected(s, "phase 'exchange' (0) round 1 transfer 0 (0->1 reduce chunks [0]): double counting: rank 1 chunk 0 already holds the contributions of ranks {0,1}");
}

TEST(Verify, RejectsAMissingContribution) {
  Schedule s = tiny();
  s.phases[0].rounds[0].pop_back();  // rank 0 never receives rank 1's data
  expect_rejected(s, "incomplete result: after the last round rank 0 chunk 0 lacks the contributions of ranks {1}");
}

TEST(Verify, RejectsAPortViolation) {
  Schedule s;
  s.algorithm = "fan-in";
  s.nranks = 3;
  s.nchunks = 1;
  s.phases.push_back(Phase{"p", true, {Round{Transfer{0, 2, {0}, TransferOp::reduce}, Transfer{1, 2, {0}, TransferOp::reduce}}}});
  expect_rejected(s, "round 0 transfer 1 (1->2 reduce chunks [0]): port violation: rank 2 receives twice in one round (ports = 1)");
  s.ports = kAllPorts;  // the same round is legal with all ports; it is then only incomplete
  expect_rejected(s, "incomplete result");
}

TEST(Verify, RejectsTheStragglerInANoWaitPhase) {
  Schedule s = synthesize(Algorithm::stragglar, 4);
  ASSERT_FALSE(s.phases[0].waits_for_straggler);
  const int straggler = *s.straggler;
  s.phases[0].rounds[0].push_back(Transfer{straggler, (straggler + 1) % 4, {0}, TransferOp::reduce});
  expect_rejected(s, "straggler " + std::to_string(straggler) + " takes part in a phase that does not wait for it");
}

TEST(Verify, RejectsAChunkOutOfRange) {
  Schedule s = tiny();
  s.phases[0].rounds[0][0].chunks = {1};
  expect_rejected(s, "chunk 1 out of range [0, 1)");
}

TEST(Verify, RejectsTwoWritersWhenOneIsACopy) {
  Schedule s;
  s.algorithm = "two-writers";
  s.nranks = 3;
  s.nchunks = 1;
  s.ports = kAllPorts;
  s.phases.push_back(Phase{"p", true, {Round{Transfer{0, 2, {0}, TransferOp::copy}, Transfer{1, 2, {0}, TransferOp::reduce}}}});
  expect_rejected(s, "written by two transfers in one round and one of them is a copy");
}

TEST(Verify, RejectsBadHeaders) {
  Schedule s = tiny();
  s.straggler = 5;
  expect_rejected(s, "straggler = 5, expected a rank in [0, 2)");
  s = tiny();
  s.phases[0].rounds[0][0].dst = 7;
  expect_rejected(s, "rank out of range [0, 2)");
}

TEST(Verify, SummaryNamesPhasesAndCost) {
  const Schedule s = synthesize(Algorithm::ring, 4);
  const std::string line = summary(s, verify(s));
  EXPECT_EQ(line, "ring n=4 straggler=none chunks=4 ports=1: reduce_scatter 3 + allgather 3 rounds, beta cost 1.5 s");
}

}  // namespace
}  // namespace stragglar
