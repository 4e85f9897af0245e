// auto's timer on a GPU: CUDA events and a stream-ordered exchange (nccl_call_timer.hpp).
#include "nccl_call_timer.hpp"

#include <algorithm>

#include "cuda_check.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {

NcclCallTimer::~NcclCallTimer() {
  // An exchange begun and not ended (or timed out) may still write these: keep them. (A broken
  // session is never destroyed: its owner leaks it, NcclSession::broken.)
  if (exchange_pending_) return;
  if (xhost_ != nullptr) (void)cudaFreeHost(xhost_);
  if (xdev_ != nullptr) (void)cudaFree(xdev_);
  for (int i = 0; i < kTimers; ++i) {
    if (starts_[i] != nullptr) (void)cudaEventDestroy(starts_[i]);
    if (ends_[i] != nullptr) (void)cudaEventDestroy(ends_[i]);
  }
  if (exchanged_ != nullptr) (void)cudaEventDestroy(exchanged_);
}

void NcclCallTimer::time_begin() {
  if (timed_ - taken_ >= kTimers)
    throw Error(ErrorCode::Internal, "NcclCallTimer: more timed calls than the lag allows");
  const int i = timed_ % kTimers;
  if (starts_[i] == nullptr) {
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&starts_[i]));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ends_[i]));
  }
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(starts_[i], transport_.stream()));
}

void NcclCallTimer::time_end() {
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(ends_[timed_ % kTimers], transport_.stream()));
  ++timed_;
}

double NcclCallTimer::take_time(double timeout_s) {
  if (taken_ == timed_) throw Error(ErrorCode::Internal, "NcclCallTimer: no timed call to take");
  const int i = taken_ % kTimers;
  cuda::wait_event(comm_, ends_[i], timeout_s, cuda::deadline_after(timeout_s), "a timed call (auto's measurement)");
  float ms = 0;
  STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, starts_[i], ends_[i]));
  ++taken_;
  return static_cast<double>(ms) * 1e-3;
}

void NcclCallTimer::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
  const std::size_t bytes = values.size() * sizeof(std::int64_t);
  if (values.size() > xcapacity_) {
    if (xhost_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFreeHost(xhost_));
    if (xdev_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(xdev_));
    xhost_ = xdev_ = nullptr;
    xcapacity_ = 0;
    STRAGGLAR_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&xhost_), bytes));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&xdev_), bytes));
    xcapacity_ = values.size();
  }
  if (exchanged_ == nullptr) STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&exchanged_, cudaEventDisableTiming));
  const cudaStream_t stream = transport_.stream();
  std::copy(values.begin(), values.end(), xhost_);
  exchange_pending_ = true;  // from here on the stream may write xhost_/xdev_: never free them under it
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(xdev_, xhost_, bytes, cudaMemcpyHostToDevice, stream));
  cuda::settle_nccl(comm_, ncclAllReduce(xdev_, xdev_, values.size(), ncclInt64, ncclMax, comm_, stream),
                    "ncclAllReduce (auto's exchange)", timeout_s);
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(xhost_, xdev_, bytes, cudaMemcpyDeviceToHost, stream));
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(exchanged_, stream));
}

void NcclCallTimer::exchange_end(std::span<std::int64_t> values, double timeout_s) {
  cuda::wait_event(comm_, exchanged_, timeout_s, cuda::deadline_after(timeout_s),
                   "the ncclAllReduce of auto's exchange");
  exchange_pending_ = false;
  std::copy(xhost_, xhost_ + values.size(), values.begin());
}

}  // namespace stragglar::detail
