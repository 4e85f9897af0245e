// The NCCL engine of the runtime core and the call protocol around it (internal): what the
// NCCL front-end (nccl_allreduce.cpp) keeps per ncclComm_t and what the PyTorch backend keeps
// per process group for CUDA tensors.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <optional>
#include <span>

#include "cuda_device.hpp"
#include "nccl_call_timer.hpp"
#include "nccl_timer_pool.hpp"
#include "nccl_transport.hpp"
#include "runtime/engine.hpp"
#include "runtime/session.hpp"

namespace stragglar::detail {

// NcclTransport and CudaDevice on the call's stream; the agreement as one small
// ncclAllReduce(max) on engine-owned pinned/device memory, polled with the timeout and
// ncclCommGetAsyncError; ncclAllReduce as `native`; auto's timer on the stream (NcclCallTimer).
// Its waits use the session's timeout: passed per call, or the transport's (Transport::set_timeout).
class NcclEngine final : public Engine {
 public:
  // `timeout_s`: the transport's until the session sets its own.
  NcclEngine(ncclComm_t comm, int device, double timeout_s);
  ~NcclEngine() override;
  NcclEngine(const NcclEngine&) = delete;
  NcclEngine& operator=(const NcclEngine&) = delete;

  Transport& transport() override { return transport_; }
  Device& device() override { return device_; }
  void agree_max(std::span<std::int64_t> values, double timeout_s) override;
  // ncclAllReduce on the call's stream, polled with the transport's timeout: bounded already,
  // so auto's bound needs nothing more.
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op,
                        std::optional<NativeBound> bound, bool keep_buffer) override;
  // ncclAllReduce first (docs/gpu.md "First run: what it found").
  bool auto_starts_with_native() const override { return true; }
  // CUDA events, the exchange on the stream (lag 2).
  std::unique_ptr<CallTimer> make_timer() override {
    return std::make_unique<NcclCallTimer>(comm_, transport_, pending_, timers_left_busy_, call_waits_bounded_,
                                           timer_pool_);
  }
  // auto's waits for the GPU work of earlier calls (a call's end for its time, the exchange's
  // result) poll ncclCommGetAsyncError and, by default, end with Error(Timeout) after the
  // session's timeout (the PyTorch backend: the group's). false: no bound, as ncclAllReduce has
  // none (the NCCL front-end and the preload): a rank that is minutes late is waited for, and
  // only an NCCL error ends the wait. The first-call agreement stays bounded either way.
  void set_call_waits_bounded(bool bounded) noexcept { call_waits_bounded_ = bounded; }
  // A failed call's stream may never finish (a hung NCCL kernel): a restore enqueued after it
  // could not run, and the buffer stays a target. As NCCL: undefined after an error.
  BuffersOnError buffers_on_error() const override { return BuffersOnError::undefined; }

  ncclComm_t comm() const noexcept { return comm_; }
  int device_id() const noexcept { return device_id_; }
  // Before the Session frees its scratch (its destructor): frees then go on a stream of the
  // engine's own that first waits for the end of the last call, never on the last caller's
  // stream, which its owner may have destroyed since (cudaFreeAsync on it is undefined).
  void prepare_release() noexcept;
  // Calls may come on different streams and share scratch: every call's stream first waits for
  // the end of the previous call, recorded on that call's own stream when it ended (so a stream
  // the caller has destroyed since is never touched; stream handles are never compared).
  void begin_call(cudaStream_t stream);
  void end_call(cudaStream_t stream) noexcept;

 private:
  ncclComm_t comm_;
  int device_id_;
  NcclTransport transport_;
  CudaDevice device_;
  cudaEvent_t call_done_ = nullptr;
  cudaEvent_t agreed_ = nullptr;
  bool have_last_ = false;
  std::int64_t* host_ = nullptr;  // pinned
  std::int64_t* dev_ = nullptr;
  std::size_t capacity_ = 0;
  bool pending_ = false;  // a timed-out agreement may still write host_/dev_
  int timers_left_busy_ = 0;  // auto timers destroyed with GPU work unfinished (NcclCallTimer)
  bool call_waits_bounded_ = true;
  NcclTimerPool timer_pool_;  // auto timers' events and buffers, bounded (nccl_timer_pool.hpp)
  cudaStream_t own_stream_ = nullptr;  // prepare_release()'s
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
  // The timeout of every wait (torch: the group's) is the Session's: session().set_timeout.
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
