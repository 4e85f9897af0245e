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
inline Error nccl_error(ncclResult_t r, const char* call) {
  return Error(ErrorCode::SystemError, std::string(call) + " failed: ncclResult " + std::to_string(static_cast<int>(r)) +
                                           " (" + ncclGetErrorString(r) + ")");
}
[[noreturn]] inline void throw_nccl(ncclResult_t r, const char* call) { throw nccl_error(r, call); }

// After a cudaEventQuery/cudaStreamQuery poll answered cudaErrorNotReady: that answer is also
// left as the thread's last error (as torch's CUDAEvent::query notes), where the caller's next
// cudaGetLastError() would read it as a failure of its own; take it back out. Only a
// cudaErrorNotReady is taken: any other error there is the caller's to see.
inline void clear_not_ready() noexcept {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
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
