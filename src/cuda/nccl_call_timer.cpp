// auto's timer on a GPU: CUDA events and a stream-ordered exchange (nccl_call_timer.hpp).
#include "nccl_call_timer.hpp"

#include <algorithm>

#include "cuda_check.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {

bool NcclCallTimer::busy() const noexcept {
  if (res_ == nullptr) return false;  // parked: nothing of ours in flight
  const bool exchanging = exchange_pending_ && !exchange_parked_ && cudaEventQuery(res_->exchanged) != cudaSuccess;
  const bool timing = timed_ > 0 && cudaEventQuery(res_->ends[(timed_ - 1) % kTimers]) != cudaSuccess;
  cuda::clear_not_ready();  // not the caller's error
  // A timed-out agreement of the engine (a new configuration's first call, this timer just made)
  // may never finish: cudaFree would wait for it.
  return exchanging || timing || engine_pending_;
}

NcclCallTimer::~NcclCallTimer() {
  // Work of ours the stream has not finished (an exchange begun and not ended, a peer that died
  // after the last call) may still use the set, and freeing it would wait for that work without
  // bound: keep it, and tell the engine to keep its own. (A broken session is never destroyed:
  // its owner leaks it, NcclSession::broken.)
  if (res_ != nullptr && busy()) {
    ++left_busy_;
    (void)res_.release();
    pool_.give_back(this, nullptr);
    return;
  }
  pool_.give_back(this, std::move(res_));
}

void NcclCallTimer::wait_for(cudaEvent_t event, double timeout_s, const char* what) const {
  cuda::wait_event(comm_, event, timeout_s,
                   bounded_ ? cuda::deadline_after(timeout_s) : cuda::Clock::time_point::max(), what);
}

NcclTimerResources& NcclCallTimer::resources() {
  if (res_ == nullptr) res_ = pool_.take(this, values_);
  else pool_.used(this);
  return *res_;
}

void NcclCallTimer::reserve_exchange(std::size_t values) {
  values_ = std::max(values_, values);
  parked_exchange_.reserve(values_);  // park() allocates nothing
  if (res_ != nullptr && res_->xcapacity < values_) pool_.give_back(this, std::move(res_));  // idle: recycled
  (void)resources();
}

void NcclCallTimer::park() {
  if (res_ == nullptr) {
    pool_.give_back(this, nullptr);  // not a holder (the pool's loop must always progress)
    return;
  }
  const double timeout_s = transport_.timeout();
  for (int c = std::max(taken_, parked_upto_); c < timed_; ++c) {
    const int i = c % kTimers;
    wait_for(res_->ends[i], timeout_s, "a timed call (auto's measurement, parked)");
    float ms = 0;
    STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, res_->starts[i], res_->ends[i]));
    parked_times_[static_cast<std::size_t>(i)] = CallTime{static_cast<double>(ms) * 1e-3, -1};
  }
  parked_upto_ = timed_;
  if (exchange_pending_ && !exchange_parked_) {
    wait_for(res_->exchanged, timeout_s, "the ncclAllReduce of auto's exchange (parked)");
    parked_exchange_.assign(res_->xhost, res_->xhost + values_);
    exchange_parked_ = true;
  }
  pool_.give_back(this, std::move(res_));
}

void NcclCallTimer::time_begin() {
  if (timed_ - taken_ >= kTimers)
    throw Error(ErrorCode::Internal, "NcclCallTimer: more timed calls than the lag allows");
  if (values_ == 0 && res_ == nullptr) throw Error(ErrorCode::Internal, "NcclCallTimer: reserve_exchange was not called");
  NcclTimerResources& r = resources();
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(r.starts[timed_ % kTimers], transport_.stream()));
}

void NcclCallTimer::time_end() {
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(res_->ends[timed_ % kTimers], transport_.stream()));
  ++timed_;
}

CallTime NcclCallTimer::take_time(double timeout_s) {
  if (taken_ == timed_) throw Error(ErrorCode::Internal, "NcclCallTimer: no timed call to take");
  const int i = taken_ % kTimers;
  if (taken_ < parked_upto_) {  // timed before the timer was parked
    ++taken_;
    return parked_times_[static_cast<std::size_t>(i)];
  }
  NcclTimerResources& r = *res_;  // timed after the last park: this set holds the events
  wait_for(r.ends[i], timeout_s, "a timed call (auto's measurement)");
  float ms = 0;
  STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, r.starts[i], r.ends[i]));
  ++taken_;
  return CallTime{static_cast<double>(ms) * 1e-3, -1};
}

void NcclCallTimer::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
  const std::size_t bytes = values.size() * sizeof(std::int64_t);
  if (values.size() > values_)
    throw Error(ErrorCode::Internal, "NcclCallTimer: an exchange larger than reserve_exchange made room for");
  NcclTimerResources& r = resources();
  const cudaStream_t stream = transport_.stream();
  std::copy(values.begin(), values.end(), r.xhost);
  exchange_pending_ = true;  // from here on the stream may write the buffers: never free them under it
  exchange_parked_ = false;
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(r.xdev, r.xhost, bytes, cudaMemcpyHostToDevice, stream));
  cuda::settle_nccl(comm_, ncclAllReduce(r.xdev, r.xdev, values.size(), ncclInt64, ncclMax, comm_, stream),
                    "ncclAllReduce (auto's exchange)", timeout_s);
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(r.xhost, r.xdev, bytes, cudaMemcpyDeviceToHost, stream));
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(r.exchanged, stream));
}

void NcclCallTimer::exchange_end(std::span<std::int64_t> values, double timeout_s) {
  if (exchange_parked_) {
    std::copy(parked_exchange_.begin(), parked_exchange_.begin() + static_cast<std::ptrdiff_t>(values.size()),
              values.begin());
  } else {
    wait_for(res_->exchanged, timeout_s, "the ncclAllReduce of auto's exchange");
    std::copy(res_->xhost, res_->xhost + values.size(), values.begin());
  }
  exchange_pending_ = false;
  exchange_parked_ = false;
}

}  // namespace stragglar::detail
