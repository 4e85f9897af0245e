// Element types and reduction operators shared by every runtime (values match stragglar.h).
#pragma once
#include <cstddef>
#include <string_view>

#include "stragglar/stragglar.h"

namespace stragglar {

enum class DataType { float32 = stragglar_float32, float64 = stragglar_float64,
                      float16 = stragglar_float16, bfloat16 = stragglar_bfloat16,
                      int32 = stragglar_int32, int64 = stragglar_int64 };
enum class ReduceOp { sum = stragglar_sum, prod = stragglar_prod, min = stragglar_min,
                      max = stragglar_max, avg = stragglar_avg };

std::size_t size_of(DataType t) noexcept;
const char* to_string(DataType t) noexcept;   // "float", "double", "half", "bfloat16", "int32", "int64" (nccl-tests names)
const char* to_string(ReduceOp op) noexcept;  // "sum", "prod", "min", "max", "avg"
DataType parse_dtype(std::string_view name);  // also accepts f32/fp32/float32, f16/fp16, bf16, ...
ReduceOp parse_reduce_op(std::string_view name);

}  // namespace stragglar
