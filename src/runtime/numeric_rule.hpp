// The numeric rule of every reduction, one source for host and device (docs/runtime.md "NaN and
// signed zero"): the CPU device (cpu_device.cpp), the CUDA kernels (src/cuda/kernels.cu) and the
// tests all include this header, so every rank and engine ends with the same bits whatever order
// it combined operands in.
//
//   - a NaN result is the canonical quiet NaN: positive, zero payload (fp32 0x7fc00000, fp64
//     0x7ff8000000000000, fp16 0x7e00, bf16 0x7fc0). CUDA's own conversions and arithmetic give
//     another pattern (0x7fff, 0x7fffffff: PTX "canonical NaN"), so nothing here uses them;
//   - min/max are IEEE 754-2019 minimum/maximum: a NaN operand gives NaN, -0 < +0;
//   - integer sum/prod wrap around (two's complement) without signed-overflow UB;
//   - fp16/bf16 are widened to float, combined once and rounded back to nearest even: for + and
//     × that equals the native half/bf16 operation (double rounding is innocuous when
//     24 >= 2·11 + 2); avg divides once, in float for fp16/bf16 (integers truncate).
//
// Compiled by nvcc, every function is __host__ __device__; by a host compiler, plain inline.
// No std::bit_cast / numeric_limits (nvcc compiles the CUDA side as C++17 and device code cannot
// call non-constexpr host functions).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define STRAGGLAR_HD __host__ __device__ __forceinline__
#else
#define STRAGGLAR_HD inline
#endif

namespace stragglar {
namespace numeric {

// ---- bits ----------------------------------------------------------------------------------
STRAGGLAR_HD std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
STRAGGLAR_HD float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
STRAGGLAR_HD std::uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
STRAGGLAR_HD double double_from_bits(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// The canonical quiet NaNs.
inline constexpr std::uint32_t kFloatNaN = 0x7fc00000u;
inline constexpr std::uint64_t kDoubleNaN = 0x7ff8000000000000ull;
inline constexpr std::uint16_t kHalfNaN = 0x7e00u;
inline constexpr std::uint16_t kBfloat16NaN = 0x7fc0u;

template <typename T>
STRAGGLAR_HD T quiet_nan() {
  if constexpr (sizeof(T) == 4) return float_from_bits(kFloatNaN);
  else return double_from_bits(kDoubleNaN);
}

// ---- fp16 / bf16 <-> float, round to nearest even ------------------------------------------
// fp16 follows Fabian Giesen's public-domain half_to_float / float_to_half_fast3_rtne, written
// with selects instead of branches so that the CPU loops vectorise; subnormals, ±0 and ±inf are
// exact; a NaN becomes the canonical NaN of the target (sign kept: the operators below never
// produce a negative NaN, so results are canonical).
STRAGGLAR_HD float half_to_float(std::uint16_t h) {
  constexpr std::uint32_t shifted_exp = 0x7c00u << 13;  // exponent mask after the shift
  std::uint32_t o = (h & 0x7fffu) << 13;                // exponent and mantissa
  const std::uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;                              // rebias the exponent
  o += exp == shifted_exp ? (128u - 16u) << 23 : 0u;    // inf / NaN: extra exponent adjust
  // zero / subnormal: renormalise through the FPU (its operands and result are normal floats,
  // so flush-to-zero cannot change it)
  const std::uint32_t sub = bits_of(float_from_bits(o + (1u << 23)) - float_from_bits(113u << 23));
  o = exp == 0 ? sub : o;
  o |= static_cast<std::uint32_t>(h & 0x8000u) << 16;   // sign
  return float_from_bits(o);
}

STRAGGLAR_HD std::uint16_t float_to_half(float value) {
  constexpr std::uint32_t f32_infinity = 255u << 23;
  constexpr std::uint32_t f16_max = (127u + 16u) << 23;  // first float that overflows fp16
  constexpr std::uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  std::uint32_t f = bits_of(value);
  const std::uint32_t sign = f & 0x80000000u;
  f ^= sign;
  // NaN -> the canonical quiet NaN, overflow -> inf.
  const std::uint32_t inf_nan = f > f32_infinity ? kHalfNaN : 0x7c00u;
  // Result subnormal or zero: let the FPU round by adding a magic number whose ulp is the fp16
  // subnormal ulp (round to nearest even; a float subnormal input rounds to 0 either way).
  const std::uint32_t sub = bits_of(float_from_bits(f) + float_from_bits(denorm_magic)) - denorm_magic;
  // Normal: rebias, round half down, then ties to even through the mantissa's lowest kept bit.
  const std::uint32_t mant_odd = (f >> 13) & 1u;
  const std::uint32_t normal = (f + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + mant_odd) >> 13;
  const std::uint32_t o = f >= f16_max ? inf_nan : (f < (113u << 23) ? sub : normal);
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

STRAGGLAR_HD float bfloat16_to_float(std::uint16_t b) { return float_from_bits(static_cast<std::uint32_t>(b) << 16); }

STRAGGLAR_HD std::uint16_t float_to_bfloat16(float value) {
  std::uint32_t u = bits_of(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// ---- the operators (avg reduces as sum) ------------------------------------------------------
// T: float, double, int32_t, int64_t (fp16/bf16 are combined as float).
template <typename T>
STRAGGLAR_HD T canonical_nan(T r) {
  if constexpr (std::is_floating_point_v<T>) return r == r ? r : quiet_nan<T>();
  else return r;
}

// Equal operands that are not identical are +0 and -0: their bits' AND is +0 (max), OR is -0
// (min); identical operands give the operand back either way.
template <typename T>
STRAGGLAR_HD T signed_zero_merge(T a, T b, bool take_or) {
  const auto x = bits_of(a), y = bits_of(b);
  if constexpr (sizeof(T) == 4) return float_from_bits(take_or ? (x | y) : (x & y));
  else return double_from_bits(take_or ? (x | y) : (x & y));
}

template <typename T>
STRAGGLAR_HD T sum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return canonical_nan(a + b);
  }
}
template <typename T>
STRAGGLAR_HD T prod(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return canonical_nan(a * b);
  }
}
template <typename T>
STRAGGLAR_HD T min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return quiet_nan<T>();
    return a == b ? signed_zero_merge(a, b, true) : (b < a ? b : a);
  } else {
    return b < a ? b : a;
  }
}
template <typename T>
STRAGGLAR_HD T max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return quiet_nan<T>();
    return a == b ? signed_zero_merge(a, b, false) : (a < b ? b : a);
  } else {
    return a < b ? b : a;
  }
}
// avg's final step: x / n, integers truncating (as NCCL's ncclAvg), a NaN canonical (the
// division would keep the hardware's pattern).
template <typename T>
STRAGGLAR_HD T divide(T x, int n) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(x / static_cast<T>(n));
  else return canonical_nan(x / static_cast<T>(n));
}

// Functors of the operators, for loops and kernels templated on the operator.
struct Sum {
  template <typename T> STRAGGLAR_HD static T apply(T a, T b) { return sum(a, b); }
};
struct Prod {
  template <typename T> STRAGGLAR_HD static T apply(T a, T b) { return prod(a, b); }
};
struct Min {
  template <typename T> STRAGGLAR_HD static T apply(T a, T b) { return min(a, b); }
};
struct Max {
  template <typename T> STRAGGLAR_HD static T apply(T a, T b) { return max(a, b); }
};

}  // namespace numeric

// The conversions under their long-standing names (element.hpp, tests, the CPU device).
using numeric::bfloat16_to_float;
using numeric::float_to_bfloat16;
using numeric::float_to_half;
using numeric::half_to_float;

}  // namespace stragglar
