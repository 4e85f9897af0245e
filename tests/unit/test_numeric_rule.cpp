// The numeric rule shared by host and device (src/runtime/numeric_rule.hpp; docs/runtime.md
// "NaN and signed zero"), on the host: the bits it promises for NaN, ±0, min/max, the fp16/bf16
// conversions and avg's division, and that the CPU device's reduce follows it. The CUDA kernels
// compile the same header (tests/gpu/test_cuda_device compares them with the CPU device on a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/numeric_rule.hpp"

using namespace stragglar;
namespace nr = stragglar::numeric;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kNegNaNPayload = nr::float_from_bits(0xffc01234u);  // negative, with a payload
const double kNaN64 = std::numeric_limits<double>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::uint64_t bits(double x) { return nr::bits_of(x); }
std::uint32_t bits(float x) { return nr::bits_of(x); }

TEST(NumericRule, CanonicalNaNBitsOfEveryFloatType) {
  EXPECT_EQ(bits(nr::quiet_nan<float>()), 0x7fc00000u);
  EXPECT_EQ(bits(nr::quiet_nan<double>()), 0x7ff8000000000000ull);
  // Whatever NaN goes in (sign, payload), every float op gives the canonical one.
  for (float nan : {kNaN, -kNaN, kNegNaNPayload}) {
    EXPECT_EQ(bits(nr::sum(nan, 1.0f)), 0x7fc00000u);
    EXPECT_EQ(bits(nr::sum(1.0f, nan)), 0x7fc00000u);
    EXPECT_EQ(bits(nr::prod(nan, -2.0f)), 0x7fc00000u);
    EXPECT_EQ(bits(nr::min(nan, -kInf)), 0x7fc00000u);
    EXPECT_EQ(bits(nr::max(kInf, nan)), 0x7fc00000u);
    EXPECT_EQ(bits(nr::divide(nan, 3)), 0x7fc00000u);
  }
  // inf - inf and 0 × inf make a NaN of the hardware's choice: canonical too.
  EXPECT_EQ(bits(nr::sum(kInf, -kInf)), 0x7fc00000u);
  EXPECT_EQ(bits(nr::prod(0.0f, kInf)), 0x7fc00000u);
  EXPECT_EQ(bits(nr::sum(kNaN64, -kNaN64)), 0x7ff8000000000000ull);
  EXPECT_EQ(bits(nr::max(-kNaN64, 1.0)), 0x7ff8000000000000ull);
}

TEST(NumericRule, MinMaxAreIeeeMinimumMaximum) {
  EXPECT_EQ(bits(nr::min(0.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(bits(nr::min(-0.0f, 0.0f)), 0x80000000u);
  EXPECT_EQ(bits(nr::max(0.0f, -0.0f)), 0x00000000u);
  EXPECT_EQ(bits(nr::max(-0.0f, 0.0f)), 0x00000000u);
  EXPECT_EQ(bits(nr::min(-0.0, 0.0)), 0x8000000000000000ull);
  EXPECT_EQ(bits(nr::max(0.0, -0.0)), 0ull);
  EXPECT_EQ(nr::min(-kInf, 3.0f), -kInf);
  EXPECT_EQ(nr::max(-kInf, 3.0f), 3.0f);
  EXPECT_EQ(nr::min(2.5, -7.0), -7.0);
  EXPECT_EQ(nr::max<std::int32_t>(-3, 4), 4);
  EXPECT_EQ(nr::min<std::int64_t>(std::numeric_limits<std::int64_t>::min(), 0),
            std::numeric_limits<std::int64_t>::min());
}

TEST(NumericRule, IntegersWrapAndAvgTruncates) {
  EXPECT_EQ(nr::sum<std::int32_t>(std::numeric_limits<std::int32_t>::max(), 1), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(nr::prod<std::int64_t>(std::numeric_limits<std::int64_t>::min(), -1), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(nr::divide<std::int32_t>(-7, 2), -3);
  EXPECT_EQ(nr::divide<std::int64_t>(7, 3), 2);
  EXPECT_EQ(nr::divide(7.0f, 2), 3.5f);
}

TEST(NumericRule, HalfAndBfloat16NaNAreTheDocumentedPatterns) {
  // Not CUDA's 0x7fff: the rule's canonical quiet NaN, from any float NaN of either sign.
  EXPECT_EQ(nr::float_to_half(nr::quiet_nan<float>()), 0x7e00u);
  EXPECT_EQ(nr::float_to_bfloat16(nr::quiet_nan<float>()), 0x7fc0u);
  EXPECT_EQ(nr::float_to_half(nr::sum(kNegNaNPayload, 1.0f)), 0x7e00u);
  EXPECT_EQ(nr::float_to_bfloat16(nr::prod(kNegNaNPayload, 1.0f)), 0x7fc0u);
  // Widening keeps NaN a NaN, so the op then makes it canonical.
  EXPECT_TRUE(std::isnan(nr::half_to_float(0xfe01u)));
  EXPECT_TRUE(std::isnan(nr::bfloat16_to_float(0xffc1u)));
  EXPECT_EQ(nr::float_to_half(nr::max(nr::half_to_float(0xfe01u), 1.0f)), 0x7e00u);
  // ±0, ±inf, the largest half, overflow, a subnormal: exact / round to nearest even.
  EXPECT_EQ(nr::float_to_half(-0.0f), 0x8000u);
  EXPECT_EQ(nr::float_to_half(-kInf), 0xfc00u);
  EXPECT_EQ(nr::float_to_half(65504.0f), 0x7bffu);
  EXPECT_EQ(nr::float_to_half(65520.0f), 0x7c00u);  // the tie above the largest half rounds to inf
  EXPECT_EQ(nr::float_to_half(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(nr::float_to_half(std::ldexp(1.0f, -25)), 0x0000u);  // a tie: to even (0)
  EXPECT_EQ(nr::float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);  // tie to even
  EXPECT_EQ(nr::float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);
}

// The CPU device reduces with the rule: a half/bf16 NaN result is 0x7e00 / 0x7fc0, min/max of
// ±0 are -0 / +0, whatever operand order.
TEST(NumericRule, CpuDeviceFollowsIt) {
  auto reduce16 = [](DataType t, ReduceOp op, std::uint16_t a, std::uint16_t b) {
    std::uint16_t d = a;
    cpu_reduce(&d, &b, 1, t, op);
    return d;
  };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    EXPECT_EQ(reduce16(DataType::float16, op, 0xfe01u, 0x3c00u), 0x7e00u) << to_string(op);
    EXPECT_EQ(reduce16(DataType::float16, op, 0x3c00u, 0x7d00u), 0x7e00u) << to_string(op);  // signalling-pattern NaN
    EXPECT_EQ(reduce16(DataType::bfloat16, op, 0xffc1u, 0x3f80u), 0x7fc0u) << to_string(op);
  }
  EXPECT_EQ(reduce16(DataType::float16, ReduceOp::min, 0x0000u, 0x8000u), 0x8000u);
  EXPECT_EQ(reduce16(DataType::bfloat16, ReduceOp::max, 0x8000u, 0x0000u), 0x0000u);
  std::vector<float> a = {kNegNaNPayload, -0.0f, 1.0f}, b = {1.0f, 0.0f, kInf};
  cpu_reduce(a.data(), b.data(), a.size(), DataType::float32, ReduceOp::max);
  EXPECT_EQ(bits(a[0]), 0x7fc00000u);
  EXPECT_EQ(bits(a[1]), 0u);
  EXPECT_EQ(a[2], kInf);
  std::uint16_t avg = 0xfe01u;  // a NaN input to avg's division comes out canonical
  cpu_finish_average(&avg, 1, DataType::float16, 4);
  EXPECT_EQ(avg, 0x7e00u);
}

}  // namespace
