#include "stragglar/types.hpp"

#include <string>

#include "stragglar/error.hpp"

namespace stragglar {

std::size_t size_of(DataType t) noexcept {
  switch (t) {
    case DataType::float16:
    case DataType::bfloat16: return 2;
    case DataType::float32:
    case DataType::int32: return 4;
    case DataType::float64:
    case DataType::int64: return 8;
  }
  return 0;
}

const char* to_string(DataType t) noexcept {
  switch (t) {
    case DataType::float32: return "float";
    case DataType::float64: return "double";
    case DataType::float16: return "half";
    case DataType::bfloat16: return "bfloat16";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
  }
  return "?";
}

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}

DataType parse_dtype(std::string_view name) {
  // nccl-tests names first, then the common aliases.
  if (name == "float" || name == "float32" || name == "fp32" || name == "f32") return DataType::float32;
  if (name == "double" || name == "float64" || name == "fp64" || name == "f64") return DataType::float64;
  if (name == "half" || name == "float16" || name == "fp16" || name == "f16") return DataType::float16;
  if (name == "bfloat16" || name == "bf16") return DataType::bfloat16;
  if (name == "int32" || name == "int" || name == "i32") return DataType::int32;
  if (name == "int64" || name == "i64") return DataType::int64;
  throw Error(ErrorCode::InvalidUsage,
              "unknown data type '" + std::string(name) +
                  "': expected one of float, double, half, bfloat16, int32, int64");
}

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "prod") return ReduceOp::prod;
  if (name == "min") return ReduceOp::min;
  if (name == "max") return ReduceOp::max;
  if (name == "avg") return ReduceOp::avg;
  throw Error(ErrorCode::InvalidUsage, "unknown reduction op '" + std::string(name) +
                                           "': expected one of sum, prod, min, max, avg");
}

}  // namespace stragglar
