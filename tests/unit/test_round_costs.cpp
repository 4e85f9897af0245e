// Per-round host overhead in the simulator, and the measured table it reads (round_costs.hpp):
// hand-computed cases on ring at n = 2 (two rounds of α + β·s/2), the table's lookup, its JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "stragglar/error.hpp"
#include "stragglar/round_costs.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {
namespace {

constexpr double us = 1e-6;

// α = 1 µs, 1 GB/s: a ring round at n = 2 on 2000 bytes moves 1000 bytes, T = 1 + 1 = 2 µs.
CostModel two_us_rounds() { return CostModel{1 * us, 1e-9}; }

void expect_us(double got_s, double want_us, const std::string& what) {
  EXPECT_NEAR(got_s / us, want_us, 1e-9) << what;
}

TEST(SimulateRoundOverhead, HostBoundRoundsCostTheOverheadEach) {
  const Schedule ring = synthesize(Algorithm::ring, 2);
  const RoundOverhead h(5 * us);
  // round 1 enqueued at 5, runs 5..7; round 2 enqueued at 10, runs 10..12
  expect_us(lockstep_time_s(ring, 2000, two_us_rounds(), false, h), 12, "lockstep");
  const SimResult r = simulate(ring, 2000, two_us_rounds(), Delay{false, 0}, {1}, h);
  expect_us(r.time_s, 12, "event time");
  expect_us(r.exposed_s, 12, "event exposed");
}

TEST(SimulateRoundOverhead, OnlyTheFirstEnqueueShowsWhenRoundsAreLonger) {
  const Schedule ring = synthesize(Algorithm::ring, 2);
  const RoundOverhead h(1 * us);
  // round 1 enqueued at 1, runs 1..3; round 2 enqueued at 2 (already), runs 3..5: h + 2T
  expect_us(lockstep_time_s(ring, 2000, two_us_rounds(), false, h), 5, "lockstep");
  expect_us(simulate(ring, 2000, two_us_rounds(), Delay{false, 0}, {1}, h).time_s, 5, "event");
}

TEST(SimulateRoundOverhead, ALateRanksHostStartsAtItsArrival) {
  const Schedule ring = synthesize(Algorithm::ring, 2);
  // rank 1 arrives at 4: enqueues round 1 at 9, round 2 at 14; rank 0 at 5 and 10.
  // round 1 runs 9..11, round 2 14..16: time 16, exposed 16 - 4 = 12.
  const SimResult r = simulate(ring, 2000, two_us_rounds(), Delay{false, 4 * us}, {1}, RoundOverhead(5 * us));
  expect_us(r.time_s, 16, "time");
  expect_us(r.exposed_s, 12, "exposed");
  const EventResult e = simulate_events(ring, 2000, two_us_rounds(), {0, 4 * us}, RoundOverhead(5 * us));
  expect_us(e.finish_s[0], 16, "rank 0");
  expect_us(e.finish_s[1], 16, "rank 1");
}

TEST(SimulateRoundOverhead, NoneLeavesEveryResultAsItWas) {
  const CostModel paper{3e-6, 1.0 / (450.0 * 1073741824.0)};
  for (int n : {4, 7, 8}) {
    const Schedule s = synthesize(Algorithm::stragglar, n);
    for (Delay d : {Delay{true, 0}, Delay{false, 0}, Delay{false, 1e-3}}) {
      const SimResult a = simulate(s, 1 << 26, paper, d);
      const SimResult b = simulate(s, 1 << 26, paper, d, {n - 1}, RoundOverhead(0.0));
      EXPECT_EQ(a.time_s, b.time_s) << "n=" << n;
      EXPECT_EQ(a.exposed_s, b.exposed_s) << "n=" << n;
    }
    EXPECT_EQ(lockstep_time_s(s, 1 << 26, paper), lockstep_time_s(s, 1 << 26, paper, false, RoundOverhead(0.0)));
  }
}

TEST(SimulateRoundOverhead, TheStragglerOfStragglarPaysOnlyItsOwnRounds) {
  // Ideal delay: the others' ReduceScatter is hidden whatever it costs them; from the
  // straggler's arrival on, StragglAR at n = 4 runs 4 rounds (n + log2 n - 2) in which the
  // straggler takes part. With tiny messages (α = 0, 1 byte per chunk at 1 TB/s: ~0) each costs h.
  const Schedule s = synthesize(Algorithm::stragglar, 4);
  const CostModel free{0, 1e-12};
  const SimResult r = simulate(s, 3, free, Delay{true, 0}, {3}, RoundOverhead(10 * us));
  // the straggler enqueues its first round 10 µs after it arrives, then one every 10 µs
  EXPECT_NEAR(r.exposed_s / us, 10.0 * s.waiting_rounds(), 1e-3);
}

RoundCostTable small_table() {
  RoundCostTable t;
  t.device = "test device";
  t.transport = "test transport";
  auto row = [](const char* algo, int n, std::size_t bytes, double host_us) {
    RoundCostRow r;
    r.algorithm = algo;
    r.nranks = n;
    r.bytes = bytes;
    r.host_s = host_us * us;
    r.host_min_s = r.host_s;
    r.host_max_s = r.host_s;
    return r;
  };
  t.rows = {row("ring", 2, 1024, 10), row("ring", 2, 4096, 20), row("ring", 4, 1024, 30), row("ring", 4, 4096, 40),
            row("stragglar", 2, 1024, 100)};
  return t;
}

TEST(RoundCosts, LooksUpByAlgorithmInterpolatesInLogSizeAndInRanks) {
  const RoundOverhead h(small_table());
  expect_us(h.host_s("ring", 2, 1024), 10, "a measured point");
  expect_us(h.host_s("ring", 2, 2048), 15, "halfway in log2(bytes)");
  expect_us(h.host_s("ring", 3, 2048), 25, "halfway in n, then in size");
  expect_us(h.host_s("ring", 2, 512), 10, "below the smallest size: flat");
  expect_us(h.host_s("ring", 4, 1 << 30), 40, "above the largest size: flat");
  expect_us(h.host_s("ring", 8, 4096), 40, "beyond the largest n: flat");
  expect_us(h.host_s("stragglar", 4, 1024), 100, "the algorithm's own rows only");
  // rhd has no rows: every row, equal points averaged ((10 + 100) / 2 at n = 2, 1 KiB)
  expect_us(h.host_s("rhd", 2, 1024), 55, "pooled");
  expect_us(h.host_s("rhd", 2, 4096), 20, "pooled, one row there");
  expect_us(RoundOverhead(12 * us).host_s("anything", 64, 1), 12, "constant");
  expect_us(RoundOverhead().host_s("ring", 2, 1), 0, "none");
  EXPECT_FALSE(h.beyond_table("ring", 3, 2048));
  EXPECT_TRUE(h.beyond_table("ring", 8, 2048)) << "n above the measured 2..4";
  EXPECT_TRUE(h.beyond_table("ring", 2, 512)) << "below the smallest size";
  EXPECT_TRUE(h.beyond_table("stragglar", 4, 1024)) << "stragglar is measured at n = 2 only";
  EXPECT_FALSE(RoundOverhead(12 * us).beyond_table("ring", 1000, 1));
  EXPECT_TRUE(RoundOverhead().none());
  EXPECT_FALSE(h.none());
}

TEST(RoundCosts, TheSimulatorUsesTheTablesValueForTheSchedule) {
  // ring, n = 2, 1 KiB: 10 µs per round; with free transfers the two rounds end at 10 and 20 µs
  const Schedule ring = synthesize(Algorithm::ring, 2);
  const CostModel free{0, 1e-15};
  EXPECT_NEAR(simulate(ring, 1024, free, Delay{false, 0}, {1}, RoundOverhead(small_table())).time_s / us, 20, 1e-3);
}

TEST(RoundCosts, JsonRoundTripsEveryField) {
  RoundCostTable t = small_table();
  t.library = "NCCL 2.28.3";
  t.date = "2026-11-28T12:00:00Z";
  t.pipeline = 2;
  t.complete = false;
  t.rows[0].rounds = 15;
  t.rows[0].calls = 5;
  t.rows[0].gpu_s = 9000 * us;
  t.rows[0].host_call_s = 180 * us;
  t.rows[0].gpu_call_s = 135000 * us;
  t.rows[0].wrong = 3;
  t.rows[0].host_min_s = 8 * us;
  t.rows[0].host_max_s = 31 * us;
  RoundCostRow skipped;
  skipped.algorithm = "ring";
  skipped.nranks = 8;
  skipped.bytes = std::size_t{1} << 28;
  t.skipped.push_back(skipped);
  std::stringstream io;
  write_round_costs_json(io, t);
  const RoundCostTable back = read_round_costs_json(io, "test");
  EXPECT_EQ(back.device, t.device);
  EXPECT_EQ(back.transport, t.transport);
  EXPECT_EQ(back.library, t.library);
  EXPECT_EQ(back.date, t.date);
  EXPECT_EQ(back.pipeline, 2);
  EXPECT_FALSE(back.complete);
  ASSERT_EQ(back.rows.size(), t.rows.size());
  const RoundCostRow& r = back.rows[0];
  EXPECT_EQ(r.algorithm, "ring");
  EXPECT_EQ(r.nranks, 2);
  EXPECT_EQ(r.bytes, 1024u);
  EXPECT_EQ(r.rounds, 15);
  EXPECT_EQ(r.calls, 5);
  EXPECT_EQ(r.wrong, 3);
  expect_us(r.host_s, 10, "host");
  expect_us(r.host_min_s, 8, "min");
  expect_us(r.host_max_s, 31, "max");
  expect_us(r.gpu_s, 9000, "gpu");
  expect_us(r.host_call_s, 180, "host per call");
  expect_us(r.gpu_call_s, 135000, "gpu per call");
  EXPECT_LT(back.rows[1].gpu_s, 0) << "not measured stays not measured";
  ASSERT_EQ(back.skipped.size(), 1u);
  EXPECT_EQ(back.skipped[0].bytes, std::size_t{1} << 28);
  // The readable table has a line per row and names what was not measured.
  const std::string table = format_round_costs(back);
  EXPECT_NE(table.find("stragglar"), std::string::npos);
  EXPECT_NE(table.find("incomplete"), std::string::npos);
  EXPECT_NE(table.find("ring/n=8/256 MiB"), std::string::npos) << table;
}

std::string read_error(const std::string& text) {
  std::istringstream in(text);
  try {
    (void)read_round_costs_json(in, "f.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    return e.what();
  }
  return "no error";
}

TEST(RoundCosts, BadInputSaysWhatWasExpected) {
  const std::string head = R"({"format": "stragglar-round-costs/1", "rows": [)";
  EXPECT_NE(read_error("nope").find("f.json: not JSON"), std::string::npos);
  EXPECT_NE(read_error(R"({"format": "x", "rows": []})").find("format 'x', expected 'stragglar-round-costs/1'"),
            std::string::npos);
  EXPECT_NE(read_error(R"({"format": "stragglar-round-costs/1"})").find("no \"rows\" array"), std::string::npos);
  EXPECT_NE(read_error(head + R"({"algorithm": "ring", "nranks": 2, "bytes": 1024}]})")
                .find("rows[0] has no \"host_us_per_round\""),
            std::string::npos);
  EXPECT_NE(read_error(head + R"({"algorithm": "ring", "nranks": 1, "bytes": 1024, "host_us_per_round": 1}]})")
                .find("rows[0].nranks = 1, expected an integer >= 2"),
            std::string::npos);
  EXPECT_NE(read_error(head + R"({"algorithm": "ring", "nranks": 2, "bytes": 0, "host_us_per_round": 1}]})")
                .find("rows[0].bytes = 0, expected a positive integer"),
            std::string::npos);
  EXPECT_NE(read_error(head + R"({"algorithm": "ring", "nranks": 2, "bytes": 8, "host_us_per_round": -1}]})")
                .find("rows[0].host_us_per_round = -1, expected >= 0"),
            std::string::npos);
  EXPECT_THROW(RoundOverhead(RoundCostTable{}), Error);
  EXPECT_THROW(RoundOverhead(-1e-6), Error);
  EXPECT_THROW((void)read_round_costs_file("/nonexistent/round-costs.json"), Error);
}

}  // namespace
}  // namespace stragglar
