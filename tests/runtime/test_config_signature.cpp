// The signature a configuration's first call agrees on (src/runtime/config_signature.*): encoded
// on each rank, reduced by an element-wise max as Engine::agree_max does, decoded.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "runtime/config_signature.hpp"
#include "runtime/late_set.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {
namespace {

ConfigSignature ring_float_sum(std::int64_t count = 1024) {
  ConfigSignature s;
  s[SignatureField::ok] = 1;
  s[SignatureField::algorithm] = static_cast<int>(Algorithm::ring);
  s[SignatureField::straggler] = 3;
  s[SignatureField::pipeline] = kPipelineAuto;
  s[SignatureField::resolved_k] = 2;
  s[SignatureField::count] = count;
  s[SignatureField::dtype] = static_cast<int>(DataType::float32);
  s[SignatureField::op] = static_cast<int>(ReduceOp::sum);
  s[SignatureField::phases] = 0;
  s[SignatureField::cost] = cost_fingerprint(CostModel{});
  s[SignatureField::stragglers] = static_cast<std::int64_t>(late_set_fingerprint({1, 2}) >> 2);
  return s;
}

// What every rank reads after agree_max over these ranks' vectors.
AgreedSignature agree(const std::vector<ConfigSignature>& sigs, std::vector<SignatureExtras> extras) {
  SignatureValues max{};
  max.fill(LLONG_MIN);
  for (std::size_t r = 0; r < sigs.size(); ++r) {
    extras[r].rank = static_cast<int>(r);
    const SignatureValues v = encode_signature(sigs[r], extras[r]);
    for (std::size_t i = 0; i < v.size(); ++i) max[i] = std::max(max[i], v[i]);
  }
  return decode_signature(max);
}

TEST(ConfigSignature, EqualSignaturesAgreeAndTakeTheLargestFreeTag) {
  const std::vector<ConfigSignature> sigs(4, ring_float_sum());
  std::vector<SignatureExtras> extras(4);
  for (int r = 0; r < 4; ++r) extras[static_cast<std::size_t>(r)].next_tag = 5 + (r == 2 ? 3 : 0);
  const AgreedSignature a = agree(sigs, extras);
  EXPECT_TRUE(a.every_rank_ok);
  EXPECT_EQ(a.failing_rank, -1);
  EXPECT_FALSE(a.mismatch);
  EXPECT_EQ(a.tag, 8);
  EXPECT_TRUE(a.warm_up_memory);
}

TEST(ConfigSignature, TheLowestFailingRankIsNamed) {
  std::vector<ConfigSignature> sigs(5, ring_float_sum());
  std::vector<SignatureExtras> extras(5);
  for (int r : {3, 1}) {
    sigs[static_cast<std::size_t>(r)][SignatureField::ok] = 0;
    extras[static_cast<std::size_t>(r)].failed = true;
  }
  const AgreedSignature a = agree(sigs, extras);
  EXPECT_FALSE(a.every_rank_ok);
  EXPECT_EQ(a.failing_rank, 1);
}

TEST(ConfigSignature, ARankWithoutWarmUpMemoryIsSeenByEveryRank) {
  const std::vector<ConfigSignature> sigs(3, ring_float_sum());
  std::vector<SignatureExtras> extras(3);
  extras[2].warm_up_memory = false;
  EXPECT_FALSE(agree(sigs, extras).warm_up_memory);
}

TEST(ConfigSignature, TheFirstDifferingFieldIsNamedWithItsRangeAndThisRanksValue) {
  std::vector<ConfigSignature> sigs(3, ring_float_sum());
  sigs[1][SignatureField::dtype] = static_cast<int>(DataType::float64);
  sigs[2][SignatureField::op] = static_cast<int>(ReduceOp::max);  // later in the order: not named
  const AgreedSignature a = agree(sigs, std::vector<SignatureExtras>(3));
  ASSERT_TRUE(a.mismatch);
  EXPECT_EQ(a.field, SignatureField::dtype);
  EXPECT_EQ(signature_mismatch_text("api", a, sigs[1], 1),
            "api: ranks disagree on dtype: values range from float to double (rank 1 passed double); "
            "every rank must pass the same arguments");
}

TEST(ConfigSignature, ValuesReadAsTheUserWroteThem) {
  EXPECT_EQ(signature_value_text(SignatureField::algorithm, static_cast<int>(Algorithm::ring)), "ring");
  EXPECT_EQ(signature_value_text(SignatureField::algorithm, 999), "999");  // not an algorithm
  EXPECT_EQ(signature_value_text(SignatureField::op, static_cast<int>(ReduceOp::avg)), "avg");
  EXPECT_EQ(signature_value_text(SignatureField::pipeline, kPipelineAuto), "auto");
  EXPECT_EQ(signature_value_text(SignatureField::pipeline, 3), "3");
  EXPECT_EQ(signature_value_text(SignatureField::phases, 2), "waiting_only");
  EXPECT_EQ(signature_value_text(SignatureField::count, -5), "-5");
}

TEST(ConfigSignature, ExtremeValuesRoundTrip) {
  // Every field is carried as (v, -v): the extremes that fit both ways agree exactly.
  std::vector<ConfigSignature> sigs(2, ring_float_sum());
  for (ConfigSignature& s : sigs) {
    s[SignatureField::count] = LLONG_MAX;
    s[SignatureField::cost] = -LLONG_MAX;
  }
  EXPECT_FALSE(agree(sigs, std::vector<SignatureExtras>(2)).mismatch);
  sigs[1][SignatureField::count] = LLONG_MAX - 1;
  const AgreedSignature a = agree(sigs, std::vector<SignatureExtras>(2));
  ASSERT_TRUE(a.mismatch);
  EXPECT_EQ(a.field, SignatureField::count);
  EXPECT_EQ(a.lowest, LLONG_MAX - 1);
  EXPECT_EQ(a.highest, LLONG_MAX);
}

TEST(ConfigSignature, CostModelsDifferInTheirFingerprint) {
  CostModel a, b;
  b.alpha_s = a.alpha_s * 2;
  EXPECT_NE(cost_fingerprint(a), cost_fingerprint(b));
  EXPECT_EQ(cost_fingerprint(a), cost_fingerprint(CostModel{}));
  EXPECT_GE(cost_fingerprint(b), 0);  // >> 1: its negation fits
}

}  // namespace
}  // namespace stragglar::detail
