// The NCCL engine and its call protocol (nccl_engine.hpp).
#include "nccl_engine.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "cuda_check.hpp"
#include "stragglar/nccl.hpp"

namespace stragglar::detail {
namespace {

// The NCCL errors a call must not ignore: a failed peer, a failed earlier kernel.
void check_async(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  STRAGGLAR_NCCL_CHECK(ncclCommGetAsyncError(comm, &r));
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw Error(r == ncclRemoteError ? ErrorCode::RemoteError : ErrorCode::SystemError,
              std::string("NCCL reports an asynchronous error on this communicator: ") + ncclGetErrorString(r) +
                  " (ncclCommGetAsyncError)");
}

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
    : comm_(comm), device_id_(device), timeout_s_(timeout_s), transport_(comm, nullptr, timeout_s),
      device_(nullptr, device) {
  // Events belong to the device current at their creation: the communicator's, not the caller's.
  DeviceGuard guard(device);
  STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&call_done_, cudaEventDisableTiming));
  STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&agreed_, cudaEventDisableTiming));
}

NcclEngine::~NcclEngine() {
  // The frees of the Session's scratch were enqueued there; they still run after this.
  if (own_stream_ != nullptr) (void)cudaStreamDestroy(own_stream_);
  if (pending_ || exchange_pending_) return;  // a timed-out agreement or exchange may still write these: keep them
  if (host_ != nullptr) (void)cudaFreeHost(host_);
  if (dev_ != nullptr) (void)cudaFree(dev_);
  if (xhost_ != nullptr) (void)cudaFreeHost(xhost_);
  if (xdev_ != nullptr) (void)cudaFree(xdev_);
  for (int i = 0; i < kTimers; ++i) {
    if (starts_[i] != nullptr) (void)cudaEventDestroy(starts_[i]);
    if (ends_[i] != nullptr) (void)cudaEventDestroy(ends_[i]);
  }
  if (exchanged_ != nullptr) (void)cudaEventDestroy(exchanged_);
  (void)cudaEventDestroy(call_done_);
  (void)cudaEventDestroy(agreed_);
}

void NcclEngine::set_timeout(double timeout_s) noexcept {
  timeout_s_ = timeout_s;
  transport_.set_timeout(timeout_s);
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

void NcclEngine::wait_event(cudaEvent_t event, double timeout_s, Clock::time_point deadline, const char* what) {
  for (unsigned polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(event);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cuda::throw_cuda(q, what);
    cuda::clear_not_ready();
    check_async(comm_);
    if (Clock::now() > deadline)
      throw Error(ErrorCode::Timeout,
                  std::string(what) + " did not complete within " + std::to_string(timeout_s) +
                      " s (STRAGGLAR_TIMEOUT_S): a peer is later than the timeout, stopped, died, or called "
                      "with different arguments (or earlier work on this stream never ends); abort the "
                      "communicator (ncclCommAbort)");
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// ---- auto: event timing and the stream-ordered exchange --------------------------------------------
void NcclEngine::time_begin() {
  if (timed_ - taken_ >= kTimers) throw Error(ErrorCode::Internal, "NcclEngine: more timed calls than the lag allows");
  const int i = timed_ % kTimers;
  if (starts_[i] == nullptr) {
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&starts_[i]));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&ends_[i]));
  }
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(starts_[i], transport_.stream()));
}

void NcclEngine::time_end() {
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(ends_[timed_ % kTimers], transport_.stream()));
  ++timed_;
}

double NcclEngine::take_time() {
  if (taken_ == timed_) throw Error(ErrorCode::Internal, "NcclEngine: no timed call to take");
  const int i = taken_ % kTimers;
  wait_event(ends_[i], timeout_s_, deadline_after(timeout_s_), "a timed call (auto's measurement)");
  float ms = 0;
  STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, starts_[i], ends_[i]));
  ++taken_;
  return static_cast<double>(ms) * 1e-3;
}

void NcclEngine::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
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

void NcclEngine::exchange_end(std::span<std::int64_t> values, double timeout_s) {
  wait_event(exchanged_, timeout_s, deadline_after(timeout_s), "the ncclAllReduce of auto's exchange");
  exchange_pending_ = false;
  std::copy(xhost_, xhost_ + values.size(), values.begin());
}

void NcclEngine::begin_call(cudaStream_t stream) {
  if (have_last_ && stream != last_stream_) STRAGGLAR_CUDA_CHECK(cudaStreamWaitEvent(stream, call_done_, 0));
  transport_.set_stream(stream);
  device_.set_stream(stream);
}

void NcclEngine::end_call(cudaStream_t stream) noexcept {
  if (cudaEventRecord(call_done_, stream) == cudaSuccess) {
    last_stream_ = stream;
    have_last_ = true;
  }
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
  const Clock::time_point deadline = deadline_after(timeout_s);  // one for the whole agreement
  std::copy(values.begin(), values.end(), host_);
  pending_ = true;
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, stream));
  cuda::settle_nccl(comm_, ncclAllReduce(dev_, dev_, values.size(), ncclInt64, ncclMax, comm_, stream),
                    "ncclAllReduce (argument check)", timeout_s);
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(host_, dev_, bytes, cudaMemcpyDeviceToHost, stream));
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(agreed_, stream));
  wait_event(agreed_, timeout_s, deadline, "the ncclAllReduce of the argument check");
  pending_ = false;
  std::copy(host_, host_ + values.size(), values.begin());
}

void NcclEngine::native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op) {
  cuda::settle_nccl(comm_, ncclAllReduce(sendbuf, recvbuf, count, to_nccl(t), to_nccl(op), comm_, transport_.stream()),
                    "ncclAllReduce (native)", timeout_s_);
}

// ---- NcclSession ----------------------------------------------------------------------------------
NcclSession::NcclSession(ncclComm_t comm, double timeout_s, const char* api, const char* after_failure)
    : api_(api), engine_(comm, device_of(comm), timeout_s), session_(engine_, api, after_failure) {
  session_.set_timeout(timeout_s);
}

NcclSession::~NcclSession() { engine_.prepare_release(); }

void NcclSession::set_timeout(double timeout_s) {
  session_.set_timeout(timeout_s);  // validates it
  engine_.set_timeout(timeout_s);
}

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
    check_async(engine_.comm());
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
