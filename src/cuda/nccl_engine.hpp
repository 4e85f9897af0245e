// The NCCL engine of the runtime core and the call protocol around it (internal): what the
// NCCL front-end (nccl_allreduce.cpp) keeps per ncclComm_t and what the PyTorch backend keeps
// per process group for CUDA tensors.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

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

  // Polls `event` until it completes, checking NCCL's asynchronous errors, within timeout_s.
  void wait_event(cudaEvent_t event, double timeout_s, const char* what);
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
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                 cudaStream_t stream, const Options& opts, PhaseSelection phases = PhaseSelection::all);
  Session& session() noexcept { return session_; }
  NcclEngine& engine() noexcept { return engine_; }
  // A broken session's GPU work may never finish and still write its memory: its owner must
  // leak it (std::unique_ptr::release) instead of destroying it.
  bool broken() const noexcept { return session_.broken(); }

 private:
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
