// NcclTransport: one round = one NCCL group of point-to-point calls on a stream (internal).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

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

  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }
  void set_timeout(double timeout_s) noexcept { timeout_s_ = timeout_s; }
  cudaStream_t stream() const noexcept { return stream_; }

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
}  // namespace cuda

}  // namespace stragglar
