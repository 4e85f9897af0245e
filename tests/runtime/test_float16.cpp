// fp16/bf16 conversions (include/stragglar/runtime/float16.hpp): every half round-trips
// exactly; float -> half/bf16 rounds to nearest even, checked against exact double arithmetic.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

#include "runtime/float16.hpp"

using namespace stragglar;

namespace {
int failures = 0;
void fail(const char* what, float in, unsigned got, unsigned want) {
  if (failures++ < 10) std::printf("FAIL %s: %a -> 0x%04x, expected 0x%04x\n", what, static_cast<double>(in), got, want);
}

// Reference: x lies between the codes c and c+1 (same sign); nearest, ties to the even code.
template <float (*ToFloat)(std::uint16_t)>
std::uint16_t nearest(float x, unsigned c) {
  const double lo = ToFloat(static_cast<std::uint16_t>(c));
  const double hi = ToFloat(static_cast<std::uint16_t>(c + 1));
  const double dl = std::fabs(static_cast<double>(x) - lo), dh = std::fabs(hi - static_cast<double>(x));
  if (dl < dh) return static_cast<std::uint16_t>(c);
  if (dh < dl) return static_cast<std::uint16_t>(c + 1);
  return static_cast<std::uint16_t>((c & 1u) == 0 ? c : c + 1);
}
}  // namespace

int main() {
  // Round trips: every non-NaN half and bf16 code.
  for (unsigned c = 0; c < 65536; ++c) {
    const auto h = static_cast<std::uint16_t>(c);
    const float f = half_to_float(h);
    if (std::isnan(f)) {
      if (!std::isnan(half_to_float(float_to_half(f)))) fail("half NaN", f, float_to_half(f), c);
    } else if (float_to_half(f) != h) {
      fail("half round trip", f, float_to_half(f), c);
    }
    const float b = bfloat16_to_float(h);
    if (!std::isnan(b) && float_to_bfloat16(b) != h) fail("bf16 round trip", b, float_to_bfloat16(b), c);
  }
  // Rounding: midpoints and near-midpoints between neighbouring codes, plus overflow to inf.
  for (unsigned c = 0; c < 0x7bff; ++c) {
    const double lo = half_to_float(static_cast<std::uint16_t>(c));
    const double hi = half_to_float(static_cast<std::uint16_t>(c + 1));
    for (double t : {0.5, 0.25, 0.75, 0.4999, 0.5001}) {
      const float x = static_cast<float>(lo + (hi - lo) * t);
      const std::uint16_t want = nearest<half_to_float>(x, c);
      if (float_to_half(x) != want) fail("half rounding", x, float_to_half(x), want);
    }
  }
  for (unsigned c = 0; c < 0x7f7f; ++c) {
    const double lo = bfloat16_to_float(static_cast<std::uint16_t>(c));
    const double hi = bfloat16_to_float(static_cast<std::uint16_t>(c + 1));
    for (double t : {0.5, 0.25, 0.75}) {
      const float x = static_cast<float>(lo + (hi - lo) * t);
      const std::uint16_t want = nearest<bfloat16_to_float>(x, c);
      if (float_to_bfloat16(x) != want) fail("bf16 rounding", x, float_to_bfloat16(x), want);
    }
  }
  if (float_to_half(70000.0f) != 0x7c00) fail("half overflow", 70000.0f, float_to_half(70000.0f), 0x7c00);
  if (float_to_half(-1e-9f) != 0x8000) fail("half underflow", -1e-9f, float_to_half(-1e-9f), 0x8000);
  std::printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
