// auto's timer on a GPU: CUDA events and a stream-ordered exchange (nccl_call_timer.hpp).
#include "nccl_call_timer.hpp"

#include <algorithm>

#include "cuda_check.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {

bool NcclCallTimer::busy() const noexcept {
  const bool exchanging = exchange_pending_ && cudaEventQuery(exchanged_) != cudaSuccess;
  const bool timing = timed_ > 0 && cudaEventQuery(ends_[(timed_ - 1) % kTimers]) != cudaSuccess;
  cuda::clear_not_ready();  // not the caller's error
  // A timed-out agreement of the engine (a new configuration's first call, this timer just made)
  // may never finish: cudaFree would wait for it.
  return exchanging || timing || engine_pending_;
}

NcclCallTimer::~NcclCallTimer() {
  // Work of ours the stream has not finished (an exchange begun and not ended, a peer that died
  // after the last call) may still use these, and cudaFree would wait for it without bound: keep
  // them, and tell the engine to keep its own. (A broken session is never destroyed: its owner
  // leaks it, NcclSession::broken.)
  if (busy()) {
    ++left_busy_;
    return;
  }
  if (xhost_ != nullptr) (void)cudaFreeHost(xhost_);
  if (xdev_ != nullptr) (void)cudaFree(xdev_);
  for (int i = 0; i < kTimers; ++i) {
    if (starts_[i] != nullptr) (void)cudaEventDestroy(starts_[i]);
    if (ends_[i] != nullptr) (void)cudaEventDestroy(ends_[i]);
  }
  if (exchanged_ != nullptr) (void)cudaEventDestroy(exchanged_);
}

void NcclCallTimer::reserve_exchange(std::size_t values) {
  for (int i = 0; i < kTimers; ++i)
    if (starts_[i] == nullptr) {
      STRAGGLAR_CUDA_CHECK(cudaEventCreate(&starts_[i]));
      STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ends_[i]));
    }
  if (exchanged_ == nullptr) STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&exchanged_, cudaEventDisableTiming));
  if (values > xcapacity_) {
    if (xhost_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFreeHost(xhost_));
    if (xdev_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(xdev_));
    xhost_ = xdev_ = nullptr;
    xcapacity_ = 0;
    const std::size_t bytes = values * sizeof(std::int64_t);
    STRAGGLAR_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&xhost_), bytes));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&xdev_), bytes));
    xcapacity_ = values;
  }
}

void NcclCallTimer::time_begin() {
  if (timed_ - taken_ >= kTimers)
    throw Error(ErrorCode::Internal, "NcclCallTimer: more timed calls than the lag allows");
  const int i = timed_ % kTimers;
  if (starts_[i] == nullptr) throw Error(ErrorCode::Internal, "NcclCallTimer: reserve_exchange was not called");
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(starts_[i], transport_.stream()));
}

void NcclCallTimer::time_end() {
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(ends_[timed_ % kTimers], transport_.stream()));
  ++timed_;
}

CallTime NcclCallTimer::take_time(double timeout_s) {
  if (taken_ == timed_) throw Error(ErrorCode::Internal, "NcclCallTimer: no timed call to take");
  const int i = taken_ % kTimers;
  cuda::wait_event(comm_, ends_[i], timeout_s, cuda::deadline_after(timeout_s), "a timed call (auto's measurement)");
  float ms = 0;
  STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, starts_[i], ends_[i]));
  ++taken_;
  return CallTime{static_cast<double>(ms) * 1e-3, -1};
}

void NcclCallTimer::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
  const std::size_t bytes = values.size() * sizeof(std::int64_t);
  if (values.size() > xcapacity_ || exchanged_ == nullptr)
    throw Error(ErrorCode::Internal, "NcclCallTimer: an exchange larger than reserve_exchange made room for");
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
