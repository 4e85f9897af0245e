// NcclTransport: one round = one NCCL group of point-to-point calls on a stream (internal).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>

#include "runtime/transport.hpp"

namespace stragglar {

// exchange() enqueues one ncclGroupStart(); ncclRecv...; ncclSend...; ncclGroupEnd() on the
// stream and returns: no host synchronisation, no allocation. Zero-byte messages are skipped on
// both sides. NCCL matches point-to-point messages by order per peer, so there are no tags.
class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, cudaStream_t stream, double timeout_s);  // queries rank and size
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void exchange(std::span<const Message> sends, std::span<const Message> recvs) override;

  void set_timeout(double timeout_s) noexcept override { timeout_s_ = timeout_s; }
  // A broken stream may never finish: the receives enqueued on it (and the reduction kernels
  // after them) still target scratch.
  bool writes_may_be_pending() const override { return true; }

  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }
  cudaStream_t stream() const noexcept { return stream_; }
  // The session's timeout (set_timeout): the engine's own polls (agreement, native) wait as long.
  double timeout() const noexcept { return timeout_s_; }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  double timeout_s_;
  int rank_ = 0;
  int nranks_ = 0;
};

namespace cuda {
// After an NCCL call answered `r`: on a non-blocking communicator ncclInProgress means "still
// being enqueued" — poll ncclCommGetAsyncError until it settles, within timeout_s
// (Error(Timeout)); any other failure is Error(SystemError/RemoteError) naming `call`.
void settle_nccl(ncclComm_t comm, ncclResult_t r, const char* call, double timeout_s);

// The NCCL errors a call must not ignore: a failed peer, a failed earlier kernel
// (ncclCommGetAsyncError): Error(RemoteError/SystemError).
void check_async(ncclComm_t comm);

using Clock = std::chrono::steady_clock;
inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
// Polls `event` until it completes, checking `comm`'s asynchronous errors, until `deadline`
// (Error(Timeout) naming timeout_s); every not-ready poll's last error is cleared.
void wait_event(ncclComm_t comm, cudaEvent_t event, double timeout_s, Clock::time_point deadline, const char* what);
}  // namespace cuda

}  // namespace stragglar
