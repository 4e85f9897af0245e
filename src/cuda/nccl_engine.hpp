// The NCCL engine of the runtime core and the call protocol around it (internal): what the
// NCCL front-end (nccl_allreduce.cpp) keeps per ncclComm_t and what the PyTorch backend keeps
// per process group for CUDA tensors.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <span>

#include "cuda_device.hpp"
#include "nccl_transport.hpp"
#include "runtime/session.hpp"

namespace stragglar::detail {

// NcclTransport and CudaDevice on the call's stream; the agreement as one small
// ncclAllReduce(max) on engine-owned pinned/device memory, polled with the timeout and
// ncclCommGetAsyncError; ncclAllReduce as `native`.
class NcclEngine final : public Engine {
 public:
  NcclEngine(ncclComm_t comm, int device, double timeout_s);
  ~NcclEngine() override;
  NcclEngine(const NcclEngine&) = delete;
  NcclEngine& operator=(const NcclEngine&) = delete;

  Transport& transport() override { return transport_; }
  Device& device() override { return device_; }
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op) override;
  // A broken stream may never finish: its kernels and receives still target scratch.
  bool writes_may_be_pending() const override { return true; }

  // auto on a GPU: a call's time is what its stream spent in it (CUDA events: a straggler's
  // delay is often a kernel still running on its stream, invisible to the host), read
  // kMeasurementLag calls later; the exchange is a stream-ordered ncclAllReduce whose result is
  // read as late. So the host never waits for its GPU to catch up unless it is more than the
  // lag ahead (docs/auto.md "Lags").
  static constexpr int kMeasurementLag = 2;
  int measurement_lag() const override { return kMeasurementLag; }
  void time_begin() override;
  void time_end() override;
  double take_time() override;
  void exchange_begin(std::span<std::int64_t> values, double timeout_s) override;
  void exchange_end(std::span<std::int64_t> values, double timeout_s) override;

  ncclComm_t comm() const noexcept { return comm_; }
  int device_id() const noexcept { return device_id_; }
  // Seconds a stream-ordered NCCL call (native, the transport's rounds) and auto's measurement
  // may take; the torch backend sets its group's timeout here and on the Session.
  void set_timeout(double timeout_s) noexcept;
  // Before the Session frees its scratch (its destructor): frees then go on a stream of the
  // engine's own that first waits for the end of the last call, never on the last caller's
  // stream, which its owner may have destroyed since (cudaFreeAsync on it is undefined).
  void prepare_release() noexcept;
  // Calls may come on different streams and share scratch: a new stream first waits for the
  // end of the previous call, recorded on that call's own stream when it ended (so a stream
  // the caller has destroyed since is never touched).
  void begin_call(cudaStream_t stream);
  void end_call(cudaStream_t stream) noexcept;

 private:
  ncclComm_t comm_;
  int device_id_;
  double timeout_s_;
  NcclTransport transport_;
  CudaDevice device_;
  cudaEvent_t call_done_ = nullptr;
  cudaEvent_t agreed_ = nullptr;
  cudaStream_t last_stream_ = nullptr;
  bool have_last_ = false;
  std::int64_t* host_ = nullptr;  // pinned
  std::int64_t* dev_ = nullptr;
  std::size_t capacity_ = 0;
  bool pending_ = false;  // a timed-out agreement may still write host_/dev_
  cudaStream_t own_stream_ = nullptr;  // prepare_release()'s

  using Clock = std::chrono::steady_clock;
  static Clock::time_point deadline_after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // Polls `event` until it completes, checking NCCL's asynchronous errors, until `deadline`
  // (Error(Timeout) naming timeout_s); every not-ready poll's last error is cleared.
  void wait_event(cudaEvent_t event, double timeout_s, Clock::time_point deadline, const char* what);
  // auto: timing events of the calls not taken yet (a ring), the exchange's own buffers.
  static constexpr int kTimers = 8;
  cudaEvent_t starts_[kTimers] = {};
  cudaEvent_t ends_[kTimers] = {};
  int timed_ = 0;   // calls timed so far
  int taken_ = 0;   // calls whose time was taken
  std::int64_t* xhost_ = nullptr;  // pinned
  std::int64_t* xdev_ = nullptr;
  std::size_t xcapacity_ = 0;
  cudaEvent_t exchanged_ = nullptr;
  bool exchange_pending_ = false;  // begun, not ended (or timed out): the stream may write xhost_/xdev_
};

// An NcclEngine with its Session and the protocol every call follows: on the communicator's
// device, the asynchronous-error check, the stream hand-off, the core's allreduce, the launch
// check. Not thread-safe (one caller at a time, like the NCCL communicator).
class NcclSession {
 public:
  // Queries the communicator's device; `api`, `after_failure`: as Session's.
  NcclSession(ncclComm_t comm, double timeout_s, const char* api = "stragglarNcclAllReduce",
              const char* after_failure = "free it and create a new one");
  // Frees on a stream of the engine's own (NcclEngine::prepare_release). The caller makes the
  // communicator's device current (DeviceGuard), as for every CUDA call here.
  ~NcclSession();
  NcclSession(const NcclSession&) = delete;
  NcclSession& operator=(const NcclSession&) = delete;
  // A call on a stream that is being captured into a CUDA graph fails with InvalidUsage before
  // anything is enqueued and leaves the session usable: the argument agreement and the
  // timeouts wait on the host, which a graph cannot replay.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                 cudaStream_t stream, const Options& opts, PhaseSelection phases = PhaseSelection::all);
  // The timeout of the agreement, auto's exchange, and the engine's polling (torch: the group's).
  void set_timeout(double timeout_s);
  Session& session() noexcept { return session_; }
  NcclEngine& engine() noexcept { return engine_; }
  // A broken session's GPU work may never finish and still write its memory: its owner must
  // leak it (std::unique_ptr::release) instead of destroying it.
  bool broken() const noexcept { return session_.broken(); }

 private:
  const char* api_;
  NcclEngine engine_;
  Session session_;
};

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace stragglar::detail
