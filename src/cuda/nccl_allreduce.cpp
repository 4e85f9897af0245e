// The NCCL front-end: stragglar::nccl_allreduce on an ncclComm_t (include/stragglar/nccl.hpp).
//
// Thin by design: everything but the engine lives in the runtime core (runtime/session.hpp).
// Here: per communicator an NcclEngine — NcclTransport and CudaDevice on the caller's stream,
// the agreement as one small ncclAllReduce(max) polled with a timeout, ncclAllReduce as
// `native` — plus what only a GPU front-end has: the device guard, the hand-off between
// streams and the asynchronous-error check.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "nccl_front.hpp"
#include "nccl_transport.hpp"
#include "runtime/env.hpp"
#include "runtime/session.hpp"
#include "stragglar/nccl.hpp"

namespace stragglar {
namespace {

constexpr const char* kApi = "stragglarNcclAllReduce";

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    STRAGGLAR_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) STRAGGLAR_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// The NCCL errors a call must not ignore: a failed peer, a failed earlier kernel.
void check_async(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  STRAGGLAR_NCCL_CHECK(ncclCommGetAsyncError(comm, &r));
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw Error(r == ncclRemoteError ? ErrorCode::RemoteError : ErrorCode::SystemError,
              std::string("NCCL reports an asynchronous error on this communicator: ") + ncclGetErrorString(r) +
                  " (ncclCommGetAsyncError)");
}

class NcclEngine final : public detail::Engine {
 public:
  NcclEngine(ncclComm_t comm, int device, double timeout_s)
      : comm_(comm), device_id_(device), timeout_s_(timeout_s), transport_(comm, nullptr, timeout_s),
        device_(nullptr, device) {
    STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&call_done_, cudaEventDisableTiming));
    STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&agreed_, cudaEventDisableTiming));
  }
  ~NcclEngine() override {
    if (pending_) return;  // a timed-out agreement may still write these: keep them
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    if (dev_ != nullptr) (void)cudaFree(dev_);
    (void)cudaEventDestroy(call_done_);
    (void)cudaEventDestroy(agreed_);
  }
  NcclEngine(const NcclEngine&) = delete;
  NcclEngine& operator=(const NcclEngine&) = delete;

  Transport& transport() override { return transport_; }
  Device& device() override { return device_; }
  int device_id() const { return device_id_; }
  // A broken stream may never finish: its kernels and receives still target scratch.
  bool writes_may_be_pending() const override { return true; }

  // Calls may come on different streams and share scratch: a new stream first waits for the
  // end of the previous call, recorded on that call's own stream when it ended (so a stream the
  // caller has destroyed since is never touched).
  void begin_call(cudaStream_t stream) {
    if (have_last_ && stream != last_stream_) STRAGGLAR_CUDA_CHECK(cudaStreamWaitEvent(stream, call_done_, 0));
    transport_.set_stream(stream);
    device_.set_stream(stream);
  }
  void end_call(cudaStream_t stream) {
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(call_done_, stream));
    last_stream_ = stream;
    have_last_ = true;
  }
  void end_call_noexcept(cudaStream_t stream) noexcept {
    if (cudaEventRecord(call_done_, stream) == cudaSuccess) {
      last_stream_ = stream;
      have_last_ = true;
    }
  }

  // One ncclAllReduce(max) of int64 on the call's stream, through engine-owned pinned and
  // device memory, polled with the timeout (the host never blocks without bound).
  void agree_max(std::span<std::int64_t> values, double timeout_s) override {
    if (pending_) throw Error(ErrorCode::Internal, "NcclEngine: an earlier agreement is still pending");
    const std::size_t bytes = values.size() * sizeof(std::int64_t);
    if (values.size() > capacity_) {
      if (host_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFreeHost(host_));
      if (dev_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(dev_));
      host_ = dev_ = nullptr;
      capacity_ = 0;
      STRAGGLAR_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), bytes));
      STRAGGLAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_), bytes));
      capacity_ = values.size();
    }
    const cudaStream_t stream = transport_.stream();
    std::copy(values.begin(), values.end(), host_);
    pending_ = true;
    STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, stream));
    cuda::settle_nccl(comm_, ncclAllReduce(dev_, dev_, values.size(), ncclInt64, ncclMax, comm_, stream),
                      "ncclAllReduce (argument check)", timeout_s);
    STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(host_, dev_, bytes, cudaMemcpyDeviceToHost, stream));
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(agreed_, stream));
    const auto start = std::chrono::steady_clock::now();
    for (unsigned polls = 0;; ++polls) {
      const cudaError_t q = cudaEventQuery(agreed_);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) cuda::throw_cuda(q, "cudaEventQuery (argument check)");
      check_async(comm_);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
        throw Error(ErrorCode::Timeout,
                    "the ncclAllReduce of the argument check did not complete within " + std::to_string(timeout_s) +
                        " s (STRAGGLAR_TIMEOUT_S): a peer is later than the timeout, stopped, died, or called "
                        "with different arguments (or earlier work on this stream never ends); abort the "
                        "communicator (ncclCommAbort)");
      if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    pending_ = false;
    std::copy(host_, host_ + values.size(), values.begin());
  }

  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op) override {
    cuda::settle_nccl(comm_, ncclAllReduce(sendbuf, recvbuf, count, to_nccl(t), to_nccl(op), comm_, transport_.stream()),
                      "ncclAllReduce (native)", timeout_s_);
  }

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
  bool pending_ = false;
};

struct CommState {
  NcclEngine engine;
  detail::Session session;
  CommState(ncclComm_t comm, int device, double timeout_s) : engine(comm, device, timeout_s), session(engine, kApi) {}
};

std::mutex g_mutex;
std::unordered_map<ncclComm_t, std::unique_ptr<CommState>>& states() {
  static auto* m = new std::unordered_map<ncclComm_t, std::unique_ptr<CommState>>();  // never destroyed: no CUDA calls at exit
  return *m;
}

CommState& state_for(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& m = states();
  auto it = m.find(comm);
  if (it != m.end()) return *it->second;
  int device = 0;
  STRAGGLAR_NCCL_CHECK(ncclCommCuDevice(comm, &device));
  DeviceGuard guard(device);
  return *m.emplace(comm, std::make_unique<CommState>(comm, device, detail::env().timeout_s)).first->second;
}

}  // namespace

namespace detail {
void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts, PhaseSelection phases) {
  require(comm != nullptr, std::string(kApi) + ": comm is a null ncclComm_t, expected a communicator");
  CommState& st = state_for(comm);
  DeviceGuard guard(st.engine.device_id());
  try {
    check_async(comm);
  } catch (const Error& e) {
    st.session.mark_broken(e);
  }
  st.engine.begin_call(stream);
  try {
    st.session.allreduce(sendbuf, recvbuf, count, dtype, op, opts, phases);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {  // a failed kernel launch
      const Error err(ErrorCode::SystemError, std::string(kApi) + ": " + cudaGetErrorName(e) + " (" +
                                                  cudaGetErrorString(e) + ")");
      st.session.mark_broken(err);
      throw err;
    }
  } catch (...) {
    st.engine.end_call_noexcept(stream);
    throw;
  }
  st.engine.end_call(stream);
}
}  // namespace detail

void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts) {
  detail::nccl_allreduce(sendbuf, recvbuf, count, dtype, op, comm, stream, opts, PhaseSelection::all);
}

void nccl_comm_release(ncclComm_t comm) {
  std::unique_ptr<CommState> victim;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = states().find(comm);
    if (it == states().end()) return;
    victim = std::move(it->second);
    states().erase(it);
  }
  DeviceGuard guard(victim->engine.device_id());
  if (victim->session.broken()) {
    (void)victim.release();  // pending GPU work may still write its memory
    return;
  }
  victim.reset();
}

}  // namespace stragglar
