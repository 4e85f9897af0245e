// auto's timer on a GPU (runtime/call_timer.hpp; docs/auto.md "Lags"), the NCCL engine's
// (nccl_engine.hpp). A call's time is what its stream spent in it — CUDA events: a straggler's
// delay is often a kernel still running on its stream, invisible to the host — read
// kMeasurementLag calls later; the exchange is a stream-ordered ncclAllReduce whose result is read
// as late. So the host never waits for its GPU to catch up unless it is more than the lag ahead.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "nccl_transport.hpp"
#include "runtime/call_timer.hpp"

namespace stragglar::detail {

class NcclCallTimer final : public CallTimer {
 public:
  // Works on `transport`'s current stream (the call's); comm, transport, `engine_pending` (the
  // engine's timed-out agreement may still run on the stream) and `left_busy` (the engine's count
  // of timers destroyed with GPU work unfinished: the engine then keeps its own memory too)
  // outlive the timer.
  NcclCallTimer(ncclComm_t comm, NcclTransport& transport, const bool& engine_pending, int& left_busy)
      : comm_(comm), transport_(transport), engine_pending_(engine_pending), left_busy_(left_busy) {}
  ~NcclCallTimer() override;
  NcclCallTimer(const NcclCallTimer&) = delete;
  NcclCallTimer& operator=(const NcclCallTimer&) = delete;

  static constexpr int kMeasurementLag = 2;
  int measurement_lag() const override { return kMeasurementLag; }
  // Every event and the exchange's pinned and device buffers, made now (the configuration's
  // first call, on the communicator's device): later calls allocate nothing.
  void reserve_exchange(std::size_t values) override;
  void time_begin() override;
  void time_end() override;
  CallTime take_time(double timeout_s) override;
  bool entries_on_host_clock() const override { return false; }  // stream time: no shared clock
  void exchange_begin(std::span<std::int64_t> values, double timeout_s) override;
  void exchange_end(std::span<std::int64_t> values, double timeout_s) override;

 private:
  // Whether the stream may still run work that uses this timer's events or buffers.
  bool busy() const noexcept;

  ncclComm_t comm_;
  NcclTransport& transport_;
  const bool& engine_pending_;
  int& left_busy_;
  // Timing events of the calls not taken yet (a ring).
  static constexpr int kTimers = 8;
  cudaEvent_t starts_[kTimers] = {};
  cudaEvent_t ends_[kTimers] = {};
  int timed_ = 0;  // calls timed so far
  int taken_ = 0;  // calls whose time was taken
  // The exchange's own buffers.
  std::int64_t* xhost_ = nullptr;  // pinned
  std::int64_t* xdev_ = nullptr;
  std::size_t xcapacity_ = 0;
  cudaEvent_t exchanged_ = nullptr;
  bool exchange_pending_ = false;  // begun, not ended (or timed out): the stream may write xhost_/xdev_
};

}  // namespace stragglar::detail
