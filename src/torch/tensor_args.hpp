// What of a c10d all_reduce the runtime core takes: dtype and op mapping, and the errors the
// backend raises in Python (torch.distributed.DistBackendError with the core's message).
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <exception>
#include <optional>
#include <string>

#include "stragglar/types.hpp"

namespace stragglar::torch_backend {

// The core's dtype for a torch dtype, or nullopt (then the inner backend reduces it).
inline std::optional<DataType> core_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DataType::float32;
    case at::kDouble: return DataType::float64;
    case at::kHalf: return DataType::float16;
    case at::kBFloat16: return DataType::bfloat16;
    case at::kInt: return DataType::int32;
    case at::kLong: return DataType::int64;
    default: return std::nullopt;
  }
}

// The core's op for a c10d op, or nullopt (BAND, BOR, BXOR, PREMUL_SUM: the inner backend).
inline std::optional<ReduceOp> core_op(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    default: return std::nullopt;
  }
}

// An error as torch.distributed raises it for a backend failure (DistBackendError, a
// RuntimeError): the message is the core's, unchanged.
inline std::exception_ptr dist_backend_error(const std::string& message) {
  return std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, message));
}

// The exception in flight (inside a catch block) as a DistBackendError, keeping c10 errors
// (they already map to Python exceptions) as they are.
inline std::exception_ptr current_as_dist_error() {
  try {
    throw;
  } catch (const c10::Error&) {
    return std::current_exception();
  } catch (const std::exception& e) {
    return dist_backend_error(e.what());
  } catch (...) {
    return dist_backend_error("stragglar: unknown exception");
  }
}

}  // namespace stragglar::torch_backend
