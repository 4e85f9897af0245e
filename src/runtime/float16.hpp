// IEEE half (fp16) and bfloat16 <-> float conversions, round-to-nearest-even, header-only.
//
// The runtime reduces fp16/bf16 by widening to float, applying the operator once and rounding
// back (one rounding per reduction step, as NCCL does). fp16 conversions follow Fabian
// Giesen's public-domain `half_to_float` / `float_to_half_fast3_rtne`; subnormals, ±0, ±inf
// are exact and NaNs stay NaN (quiet). bf16 keeps the top 16 bits of a float with
// round-to-nearest-even on the dropped 16, NaN kept quiet.
#pragma once
#include <bit>
#include <cstdint>

namespace stragglar {

// Both fp16 conversions are written with selects instead of branches so that the reduction
// loops (widen a block, reduce, narrow) vectorise.
inline float half_to_float(std::uint16_t h) noexcept {
  constexpr std::uint32_t shifted_exp = 0x7c00u << 13;  // exponent mask after the shift
  std::uint32_t o = (h & 0x7fffu) << 13;                // exponent and mantissa
  const std::uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;                              // rebias the exponent
  o += exp == shifted_exp ? (128u - 16u) << 23 : 0u;    // inf / NaN: extra exponent adjust
  // zero / subnormal: renormalise through the FPU
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(std::bit_cast<float>(o + (1u << 23)) -
                                                         std::bit_cast<float>(113u << 23));
  o = exp == 0 ? sub : o;
  o |= static_cast<std::uint32_t>(h & 0x8000u) << 16;   // sign
  return std::bit_cast<float>(o);
}

inline std::uint16_t float_to_half(float value) noexcept {
  constexpr std::uint32_t f32_infinity = 255u << 23;
  constexpr std::uint32_t f16_max = (127u + 16u) << 23;  // first float that overflows fp16
  constexpr std::uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = f & 0x80000000u;
  f ^= sign;
  // NaN -> quiet NaN, overflow -> inf.
  const std::uint32_t inf_nan = f > f32_infinity ? 0x7e00u : 0x7c00u;
  // Result subnormal or zero: let the FPU round by adding a magic number whose ulp is the
  // fp16 subnormal ulp (this rounds to nearest even).
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(f) + std::bit_cast<float>(denorm_magic)) -
      denorm_magic;
  // Normal: rebias, round half down, then ties to even through the mantissa's lowest kept bit.
  const std::uint32_t mant_odd = (f >> 13) & 1u;
  const std::uint32_t normal =
      (f + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + mant_odd) >> 13;
  const std::uint32_t o = f >= f16_max ? inf_nan : (f < (113u << 23) ? sub : normal);
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

inline float bfloat16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bfloat16(float value) noexcept {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace stragglar
