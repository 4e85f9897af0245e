// One element of a typed host buffer, as a double: what tests, benchmarks and result checks
// use to fill inputs and read results in any dtype. Through memcpy, so any alignment is fine.
// Stores convert like a C cast (fp16/bf16 round to nearest even via float).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/float16.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

namespace detail {
template <class T>
T read_as(const void* buf, std::size_t i) {
  T x;
  std::memcpy(&x, static_cast<const std::byte*>(buf) + i * sizeof(T), sizeof(T));
  return x;
}
template <class T>
void write_as(void* buf, std::size_t i, T x) {
  std::memcpy(static_cast<std::byte*>(buf) + i * sizeof(T), &x, sizeof(T));
}
}  // namespace detail

inline double load_element(const void* buf, std::size_t i, DataType t) {
  switch (t) {
    case DataType::float32: return detail::read_as<float>(buf, i);
    case DataType::float64: return detail::read_as<double>(buf, i);
    case DataType::float16: return half_to_float(detail::read_as<std::uint16_t>(buf, i));
    case DataType::bfloat16: return bfloat16_to_float(detail::read_as<std::uint16_t>(buf, i));
    case DataType::int32: return detail::read_as<std::int32_t>(buf, i);
    case DataType::int64: return static_cast<double>(detail::read_as<std::int64_t>(buf, i));
  }
  return 0;
}

inline void store_element(void* buf, std::size_t i, DataType t, double v) {
  switch (t) {
    case DataType::float32: detail::write_as(buf, i, static_cast<float>(v)); break;
    case DataType::float64: detail::write_as(buf, i, v); break;
    case DataType::float16: detail::write_as(buf, i, float_to_half(static_cast<float>(v))); break;
    case DataType::bfloat16: detail::write_as(buf, i, float_to_bfloat16(static_cast<float>(v))); break;
    case DataType::int32: detail::write_as(buf, i, static_cast<std::int32_t>(v)); break;
    case DataType::int64: detail::write_as(buf, i, static_cast<std::int64_t>(v)); break;
  }
}

}  // namespace stragglar
