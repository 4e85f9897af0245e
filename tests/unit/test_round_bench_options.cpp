// The per-round benchmark's shared part (bench/rounds/round_bench_options.hpp): flags, the
// stopping rule, a point's samples summarised into a row.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "round_bench_options.hpp"

namespace stragglar::bench {
namespace {

struct Parsed {
  std::optional<int> code;
  RoundBenchOptions o;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args, int world = 8) {
  args.insert(args.begin(), "bench_nccl_rounds");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.code = parse_round_bench_flags(static_cast<int>(argv.size()), argv.data(), world, "bench_nccl_rounds",
                                   "ncclAllReduce", p.o, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(RoundBench, DefaultsAreEveryRankCountAndPowersOfFourFrom1KiBTo256MiB) {
  const Parsed p = parse({});
  ASSERT_FALSE(p.code.has_value()) << p.err;
  EXPECT_EQ(p.o.nranks, (std::vector<int>{2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(p.o.sizes.size(), 10u);
  EXPECT_EQ(p.o.sizes.front(), 1024u);
  EXPECT_EQ(p.o.sizes[1], 4096u);
  EXPECT_EQ(p.o.sizes.back(), std::size_t{256} << 20);
  EXPECT_EQ(p.o.algorithms, (std::vector<std::string>{"stragglar", "ring"}));
  EXPECT_EQ(p.o.iters, 5);
  EXPECT_TRUE(p.o.json.empty());
}

TEST(RoundBench, ListsRangesAndFlags) {
  const Parsed p = parse({"--nranks", "2-4,8", "--sizes", "1K,64K,256M", "--algo", "stragglar,ring,native", "-n", "3",
                          "--min-iters", "2", "--point-seconds", "0.25", "--deadline", "140", "--json", "out.json",
                          "-k", "2", "-w", "0"});
  ASSERT_FALSE(p.code.has_value()) << p.err;
  EXPECT_EQ(p.o.nranks, (std::vector<int>{2, 3, 4, 8}));
  EXPECT_EQ(p.o.sizes, (std::vector<std::size_t>{1024, 65536, std::size_t{256} << 20}));
  EXPECT_EQ(p.o.algorithms.back(), "native");
  EXPECT_EQ(p.o.iters, 3);
  EXPECT_EQ(p.o.min_iters, 2);
  EXPECT_DOUBLE_EQ(p.o.point_s, 0.25);
  EXPECT_DOUBLE_EQ(p.o.deadline_s, 140);
  EXPECT_EQ(p.o.json, "out.json");
  EXPECT_EQ(p.o.pipeline, 2);
  EXPECT_EQ(p.o.warmup, 0);
  const Parsed sweep = parse({"-b", "4K", "-e", "64K", "-f", "2"}, 2);
  ASSERT_FALSE(sweep.code.has_value()) << sweep.err;
  EXPECT_EQ(sweep.o.sizes, (std::vector<std::size_t>{4096, 8192, 16384, 32768, 65536}));
  EXPECT_EQ(sweep.o.nranks, (std::vector<int>{2}));
}

TEST(RoundBench, BadFlagsExit2NamingTheValue) {
  auto err_of = [](std::vector<std::string> args, int world = 8) {
    const Parsed p = parse(std::move(args), world);
    EXPECT_EQ(p.code, 2);
    return p.err;
  };
  EXPECT_NE(err_of({"--nranks", "2-9"}).find("9 ranks, expected 2..8 (the job has 8)"), std::string::npos);
  EXPECT_NE(err_of({"--nranks", "1"}).find("1 ranks, expected 2..8"), std::string::npos);
  EXPECT_NE(err_of({"--nranks", "x"}).find("'x' is not an integer"), std::string::npos);
  EXPECT_NE(err_of({"--nranks", "5-3"}).find("empty range"), std::string::npos);
  EXPECT_NE(err_of({}, 1).find("the job has 1 rank, expected at least 2"), std::string::npos);
  EXPECT_NE(err_of({"--sizes", "1K,6"}).find("size 6 = 6 bytes, expected a positive multiple of 4"), std::string::npos);
  EXPECT_NE(err_of({"--sizes", "1Q"}).find("1Q"), std::string::npos);
  EXPECT_NE(err_of({"-b", "1M", "-e", "1K"}).find("-b 1M is larger than -e 1K"), std::string::npos);
  EXPECT_NE(err_of({"-f", "1"}).find("expected a factor > 1"), std::string::npos);
  EXPECT_NE(err_of({"--algo", "fast"}).find("fast"), std::string::npos);
  EXPECT_NE(err_of({"--min-iters", "9"}).find("--min-iters 9: expected 1..--iters (5)"), std::string::npos);
  EXPECT_NE(err_of({"-n", "0"}).find("--iters 0: expected >= 1"), std::string::npos);
  EXPECT_NE(err_of({"--call-timeout", "0"}).find("--call-timeout"), std::string::npos);
  EXPECT_NE(err_of({"--no-such-flag"}).find("no-such-flag"), std::string::npos);
  const Parsed help = parse({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--deadline"), std::string::npos);
  EXPECT_NE(help.out.find("native (ncclAllReduce)"), std::string::npos);
  EXPECT_EQ(parse({"-n", "0"}).err.rfind("bench_nccl_rounds: ", 0), 0u) << "the tool's name first";
}

TEST(RoundBench, APointStopsAtItsCallsOrItsTimeOnceTheLeastRan) {
  RoundBenchOptions o;
  o.iters = 5;
  o.min_iters = 2;
  o.point_s = 0.5;
  EXPECT_TRUE(another_call(o, 0, 10));   // fewer than the least: always
  EXPECT_TRUE(another_call(o, 1, 10));
  EXPECT_FALSE(another_call(o, 2, 0.6));  // the least ran, the time is up
  EXPECT_TRUE(another_call(o, 2, 0.4));
  EXPECT_TRUE(another_call(o, 4, 0.1));
  EXPECT_FALSE(another_call(o, 5, 0.1));  // the most
}

TEST(RoundBench, PerRoundTimesAreEachRanksCallOverItsOwnRounds) {
  // Two ranks: rank 0 runs 10 rounds, rank 1 (StragglAR's straggler) 5. Host calls 100 and
  // 200 µs on rank 0 (10, 20 per round), 50 and 60 µs on rank 1 (10, 12 per round).
  PointSamples s;
  s.rounds = {10, 5};
  s.host_call = {{100e-6, 200e-6}, {50e-6, 60e-6}};
  s.gpu_call = {{1e-3, 3e-3}, {2e-3, 2e-3}};
  s.wrong = 0;
  const RoundCostRow r = summarize_point("stragglar", 2, 4096, s);
  EXPECT_EQ(r.rounds, 10);
  EXPECT_EQ(r.calls, 2);
  EXPECT_NEAR(r.host_s * 1e6, 11, 1e-9);  // median of 10, 20, 10, 12
  EXPECT_NEAR(r.host_min_s * 1e6, 10, 1e-9);
  EXPECT_NEAR(r.host_max_s * 1e6, 20, 1e-9);
  EXPECT_NEAR(r.host_call_s * 1e6, 80, 1e-9);  // median of 100, 200, 50, 60
  EXPECT_NEAR(r.gpu_s * 1e6, 350, 1e-9);       // median of 100, 300, 400, 400 µs per round
  EXPECT_NEAR(r.gpu_call_s * 1e3, 2, 1e-12);
  s.gpu_call.clear();
  EXPECT_LT(summarize_point("ring", 2, 4096, s).gpu_s, 0) << "no GPU samples: not measured";
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

}  // namespace
}  // namespace stragglar::bench
