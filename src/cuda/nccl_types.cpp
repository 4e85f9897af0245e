// NCCL ⟷ stragglar types (include/stragglar/nccl.hpp).
#include <string>

#include "stragglar/nccl.hpp"

namespace stragglar {

DataType from_nccl(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return DataType::float32;
    case ncclFloat64: return DataType::float64;
    case ncclFloat16: return DataType::float16;
    case ncclBfloat16: return DataType::bfloat16;
    case ncclInt32: return DataType::int32;
    case ncclInt64: return DataType::int64;
    default: break;
  }
  const char* name = "an unknown value";
  switch (t) {
    case ncclInt8: name = "ncclInt8"; break;
    case ncclUint8: name = "ncclUint8"; break;
    case ncclUint32: name = "ncclUint32"; break;
    case ncclUint64: name = "ncclUint64"; break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case ncclFloat8e4m3: name = "ncclFloat8e4m3"; break;
    case ncclFloat8e5m2: name = "ncclFloat8e5m2"; break;
#endif
    default: break;
  }
  throw Error(ErrorCode::InvalidUsage,
              "unsupported ncclDataType_t " + std::to_string(static_cast<int>(t)) + " (" + name +
                  "); expected ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclInt32 or ncclInt64");
}

ReduceOp from_nccl(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return ReduceOp::sum;
    case ncclProd: return ReduceOp::prod;
    case ncclMin: return ReduceOp::min;
    case ncclMax: return ReduceOp::max;
    case ncclAvg: return ReduceOp::avg;
    default: break;
  }
  throw Error(ErrorCode::InvalidUsage,
              "unsupported ncclRedOp_t " + std::to_string(static_cast<int>(op)) +
                  " (custom ops such as ncclRedOpCreatePreMulSum are not supported); expected "
                  "ncclSum, ncclProd, ncclMin, ncclMax or ncclAvg");
}

ncclDataType_t to_nccl(DataType t) noexcept {
  switch (t) {
    case DataType::float32: return ncclFloat32;
    case DataType::float64: return ncclFloat64;
    case DataType::float16: return ncclFloat16;
    case DataType::bfloat16: return ncclBfloat16;
    case DataType::int32: return ncclInt32;
    case DataType::int64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t to_nccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
  }
  return ncclSum;
}

}  // namespace stragglar
