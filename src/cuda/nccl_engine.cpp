// The NCCL engine and its call protocol (nccl_engine.hpp).
#include "nccl_engine.hpp"

#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "stragglar/nccl.hpp"

namespace stragglar::detail {
namespace {

int device_of(ncclComm_t comm) {
  require(comm != nullptr, "stragglarNcclAllReduce: comm is a null ncclComm_t, expected a communicator");
  int device = 0;
  STRAGGLAR_NCCL_CHECK(ncclCommCuDevice(comm, &device));
  return device;
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  STRAGGLAR_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) STRAGGLAR_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() {
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

// ---- NcclEngine ---------------------------------------------------------------------------------
NcclEngine::NcclEngine(ncclComm_t comm, int device, double timeout_s)
    : comm_(comm), device_id_(device), transport_(comm, nullptr, timeout_s), device_(nullptr, device) {
  // Events belong to the device current at their creation: the communicator's, not the caller's.
  DeviceGuard guard(device);
  STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&call_done_, cudaEventDisableTiming));
  STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&agreed_, cudaEventDisableTiming));
}

NcclEngine::~NcclEngine() {
  // The frees of the Session's scratch were enqueued there; they still run after this.
  if (own_stream_ != nullptr) (void)cudaStreamDestroy(own_stream_);
  // A timed-out agreement may still write these, or a timer's unfinished work says the stream
  // has not finished (cudaFree would wait for it without bound): keep them.
  if (pending_ || timers_left_busy_ > 0) {
    timer_pool_.leak();
    return;
  }
  if (host_ != nullptr) (void)cudaFreeHost(host_);
  if (dev_ != nullptr) (void)cudaFree(dev_);
  (void)cudaEventDestroy(call_done_);
  (void)cudaEventDestroy(agreed_);
}

void NcclEngine::prepare_release() noexcept {
  if (cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking) == cudaSuccess) {
    if (have_last_) (void)cudaStreamWaitEvent(own_stream_, call_done_, 0);
    device_.set_stream(own_stream_);
    return;
  }
  own_stream_ = nullptr;  // no stream to be had: wait on the host, then free on the legacy stream
  if (have_last_) (void)cudaEventSynchronize(call_done_);
  device_.set_stream(nullptr);
}

void NcclEngine::begin_call(cudaStream_t stream) {
  // Always, even on what looks like the last call's stream: a handle equal to the last one may
  // be a new stream the driver gave a destroyed one's address, while the old stream's work still
  // uses the scratch. On the same stream the wait is already satisfied by stream order.
  if (have_last_) STRAGGLAR_CUDA_CHECK(cudaStreamWaitEvent(stream, call_done_, 0));
  transport_.set_stream(stream);
  device_.set_stream(stream);
}

void NcclEngine::end_call(cudaStream_t stream) noexcept {
  if (cudaEventRecord(call_done_, stream) == cudaSuccess) have_last_ = true;
}

// One ncclAllReduce(max) of int64 on the call's stream, through engine-owned pinned and device
// memory, polled with the timeout (the host never blocks without bound).
void NcclEngine::agree_max(std::span<std::int64_t> values, double timeout_s) {
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
  const cuda::Clock::time_point deadline = cuda::deadline_after(timeout_s);  // one for the whole agreement
  std::copy(values.begin(), values.end(), host_);
  pending_ = true;
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, stream));
  cuda::settle_nccl(comm_, ncclAllReduce(dev_, dev_, values.size(), ncclInt64, ncclMax, comm_, stream),
                    "ncclAllReduce (argument check)", timeout_s);
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(host_, dev_, bytes, cudaMemcpyDeviceToHost, stream));
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(agreed_, stream));
  cuda::wait_event(comm_, agreed_, timeout_s, deadline, "the ncclAllReduce of the argument check");
  pending_ = false;
  std::copy(host_, host_ + values.size(), values.begin());
}

void NcclEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op,
                                  std::optional<NativeBound>, bool /*keep_buffer: never, BuffersOnError::undefined*/) {
  cuda::settle_nccl(comm_, ncclAllReduce(sendbuf, recvbuf, count, to_nccl(t), to_nccl(op), comm_, transport_.stream()),
                    "ncclAllReduce (native)", transport_.timeout());
}

// ---- NcclSession ----------------------------------------------------------------------------------
NcclSession::NcclSession(ncclComm_t comm, double timeout_s, const char* api, const char* after_failure)
    : api_(api), engine_(comm, device_of(comm), timeout_s), session_(engine_, api, after_failure) {
  session_.set_timeout(timeout_s);  // the engine's transport's too
}

NcclSession::~NcclSession() { engine_.prepare_release(); }

namespace {
// Graph capture cannot hold a call that waits on the host (the agreement, the polled timeouts):
// refuse it up front, on every rank that captures, without breaking anything.
void refuse_capture(cudaStream_t stream, const char* api) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &capture);
  if (e == cudaSuccess && capture == cudaStreamCaptureStatusNone) return;
  throw Error(ErrorCode::InvalidUsage,
              std::string(api) + ": the stream is being captured into a CUDA graph (cudaStreamIsCapturing: " +
                  (e != cudaSuccess ? cudaGetErrorName(e)
                                    : capture == cudaStreamCaptureStatusActive ? "active" : "invalidated") +
                  "); stragglar's calls wait on the host (argument agreement, timeouts) and cannot be captured: "
                  "call it outside the capture (ncclAllReduce can be captured)");
}
}  // namespace

void NcclSession::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                            cudaStream_t stream, const Options& opts, PhaseSelection phases) {
  DeviceGuard guard(engine_.device_id());
  refuse_capture(stream, api_);
  try {
    cuda::check_async(engine_.comm());
  } catch (const Error& e) {
    session_.mark_broken(e);  // the call below then fails with it
  }
  engine_.begin_call(stream);
  try {
    // Kernel launches are checked by their own status (kernels.cu), and a failure there breaks
    // the session like any engine failure; no cudaGetLastError() here, which would also read
    // errors left by the caller's own calls or by a not-ready poll.
    session_.allreduce(sendbuf, recvbuf, count, dtype, op, opts, phases);
  } catch (...) {
    engine_.end_call(stream);
    throw;
  }
  engine_.end_call(stream);
}

}  // namespace stragglar::detail
