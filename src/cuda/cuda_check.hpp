// Return-code checks for the GPU runtime: every CUDA and NCCL call goes through one of these
// and a failure becomes Error(SystemError) naming the call, the code and its string.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "stragglar/error.hpp"

namespace stragglar::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call) {
  throw Error(ErrorCode::SystemError, std::string(call) + " failed: " + cudaGetErrorName(e) +
                                          " (" + cudaGetErrorString(e) + ")");
}
[[noreturn]] inline void throw_nccl(ncclResult_t r, const char* call) {
  throw Error(ErrorCode::SystemError, std::string(call) + " failed: ncclResult " +
                                          std::to_string(static_cast<int>(r)) + " (" +
                                          ncclGetErrorString(r) + ")");
}

}  // namespace stragglar::cuda

#define STRAGGLAR_CUDA_CHECK(call)                                      \
  do {                                                                  \
    cudaError_t stragglar_e_ = (call);                                  \
    if (stragglar_e_ != cudaSuccess) ::stragglar::cuda::throw_cuda(stragglar_e_, #call); \
  } while (0)

#define STRAGGLAR_NCCL_CHECK(call)                                      \
  do {                                                                  \
    ncclResult_t stragglar_r_ = (call);                                 \
    if (stragglar_r_ != ncclSuccess) ::stragglar::cuda::throw_nccl(stragglar_r_, #call); \
  } while (0)
