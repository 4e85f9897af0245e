// auto's timer on a GPU (runtime/call_timer.hpp; docs/auto.md "Lags"), the NCCL engine's
// (nccl_engine.hpp). A call's time is what its stream spent in it — CUDA events: a straggler's
// delay is often a kernel still running on its stream, invisible to the host — read
// kMeasurementLag calls later; the exchange is a stream-ordered ncclAllReduce whose result is read
// as late. So the host never waits for its GPU to catch up unless it is more than the lag ahead.
// Its events and buffers come from the engine's NcclTimerPool, which bounds them per communicator.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nccl_timer_pool.hpp"
#include "nccl_transport.hpp"
#include "runtime/call_timer.hpp"

namespace stragglar::detail {

class NcclCallTimer final : public CallTimer {
 public:
  // Works on `transport`'s current stream (the call's); comm, transport, `engine_pending` (the
  // engine's timed-out agreement may still run on the stream), `left_busy` (the engine's count
  // of timers destroyed with GPU work unfinished: the engine then keeps its own memory too),
  // `bounded` (whether its waits end after timeout_s or wait like NCCL,
  // NcclEngine::set_call_waits_bounded) and `pool` outlive the timer.
  NcclCallTimer(ncclComm_t comm, NcclTransport& transport, const bool& engine_pending, int& left_busy,
                const bool& bounded, NcclTimerPool& pool)
      : comm_(comm), transport_(transport), engine_pending_(engine_pending), left_busy_(left_busy), bounded_(bounded),
        pool_(pool) {}
  ~NcclCallTimer() override;
  NcclCallTimer(const NcclCallTimer&) = delete;
  NcclCallTimer& operator=(const NcclCallTimer&) = delete;

  static constexpr int kMeasurementLag = 2;
  int measurement_lag() const override { return kMeasurementLag; }
  // Every event and the exchange's pinned and device buffers, taken now (the configuration's
  // first call, on the communicator's device): later calls allocate nothing unless the pool
  // parked this timer meanwhile.
  void reserve_exchange(std::size_t values) override;
  void time_begin() override;
  void time_end() override;
  CallTime take_time(double timeout_s) override;
  bool entries_on_host_clock() const override { return false; }  // stream time: no shared clock
  void exchange_begin(std::span<std::int64_t> values, double timeout_s) override;
  void exchange_end(std::span<std::int64_t> values, double timeout_s) override;

  // NcclTimerPool: wait for the timed calls not taken yet and the exchange in flight (within
  // the transport's timeout when bounded), keep their results on the host, and hand the set back.
  void park();

 private:
  static constexpr int kTimers = NcclTimerResources::kTimers;
  // Whether the stream may still run work that uses this timer's events or buffers.
  bool busy() const noexcept;
  // Waits for `event` (the GPU work of an earlier call), within timeout_s when bounded_.
  void wait_for(cudaEvent_t event, double timeout_s, const char* what) const;
  // A set from the pool when parked (or never given one), and this timer the most recently used.
  NcclTimerResources& resources();

  ncclComm_t comm_;
  NcclTransport& transport_;
  const bool& engine_pending_;
  int& left_busy_;
  const bool& bounded_;
  NcclTimerPool& pool_;
  std::unique_ptr<NcclTimerResources> res_;  // null: parked (or before reserve_exchange)
  std::size_t values_ = 0;  // reserve_exchange's
  int timed_ = 0;  // calls timed so far
  int taken_ = 0;  // calls whose time was taken
  // Parked: the times of calls [taken_, parked_upto_) (ring index call % kTimers), the
  // exchange's result.
  std::array<CallTime, kTimers> parked_times_{};
  int parked_upto_ = 0;
  std::vector<std::int64_t> parked_exchange_;
  bool exchange_parked_ = false;
  bool exchange_pending_ = false;  // begun, not ended (or timed out): the stream may write the buffers
};

}  // namespace stragglar::detail
