// Bad input to synthesize() gets an Error that names the value and what was expected.
#include <gtest/gtest.h>

#include <string>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {
namespace {

void expect_error(auto&& fn, const std::string& needle) {
  try {
    fn();
    FAIL() << "expected an Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SynthesizeErrors, RankCountOutOfRange) {
  for (Algorithm a : scheduled_algorithms()) {
    expect_error([&] { synthesize(a, 1); }, "nranks = 1, expected 2 <= nranks <= 4096");
    expect_error([&] { synthesize(a, 4097); }, "nranks = 4097");
    expect_error([&] { synthesize(a, -3); }, "nranks = -3");
  }
}

TEST(SynthesizeErrors, StragglerOutOfRange) {
  SynthOptions o;
  o.straggler = 8;
  expect_error([&] { synthesize(Algorithm::stragglar, 8, o); }, "straggler = 8, expected a rank in [0, 8)");
  o.straggler = -1;
  expect_error([&] { synthesize(Algorithm::broadcast, 8, o); }, "straggler = -1");
}

TEST(SynthesizeErrors, UnknownAlgorithm) {
  expect_error([] { parse_algorithm("tree"); }, "unknown algorithm 'tree': expected one of stragglar, ring");
}

TEST(SynthesizeErrors, NegativePipeline) {
  SynthOptions o;
  o.pipeline = -2;
  expect_error([&] { synthesize(Algorithm::stragglar, 8, o); }, "pipeline = -2");
}

TEST(SynthesizeErrors, PipelineText) {
  EXPECT_EQ(parse_pipeline("auto"), kPipelineAuto);
  EXPECT_EQ(parse_pipeline("1"), 1);
  EXPECT_EQ(parse_pipeline("12"), 12);
  EXPECT_EQ(parse_pipeline("1024"), kMaxPipeline);
  for (const char* bad : {"0", "-3", "x", "3x", "", "99999999999", "1025"})
    expect_error([&] { parse_pipeline(bad); }, std::string("pipeline '") + bad + "': expected an integer K in [1, 1024] or auto");
}

}  // namespace
}  // namespace stragglar
