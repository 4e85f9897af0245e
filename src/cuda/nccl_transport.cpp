// NcclTransport: one round = one NCCL group of point-to-point calls on the caller's stream.
#include "nccl_transport.hpp"

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

#include "cuda_check.hpp"

namespace stragglar {

namespace cuda {
void settle_nccl(ncclComm_t comm, ncclResult_t r, const char* call, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned polls = 0; r == ncclInProgress; ++polls) {  // a non-blocking communicator still enqueueing
    if (const ncclResult_t q = ncclCommGetAsyncError(comm, &r); q != ncclSuccess) throw_nccl(q, "ncclCommGetAsyncError");
    if (r != ncclInProgress) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
      throw Error(ErrorCode::Timeout, std::string(call) + " still in progress after " + std::to_string(timeout_s) +
                                          " s (STRAGGLAR_TIMEOUT_S) on a non-blocking communicator");
    // Enqueueing usually settles within microseconds; a communicator still connecting (the first
    // call, NCCL_RUNTIME_CONNECT) may take seconds: spin briefly, then back off to 50 us.
    if (polls < 64) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (r == ncclRemoteError)
    throw Error(ErrorCode::RemoteError, std::string(call) + " failed: a remote rank failed (ncclRemoteError: " +
                                            ncclGetErrorString(r) + ")");
  if (r != ncclSuccess) throw_nccl(r, call);
}

void check_async(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  STRAGGLAR_NCCL_CHECK(ncclCommGetAsyncError(comm, &r));
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw Error(r == ncclRemoteError ? ErrorCode::RemoteError : ErrorCode::SystemError,
              std::string("NCCL reports an asynchronous error on this communicator: ") + ncclGetErrorString(r) +
                  " (ncclCommGetAsyncError)");
}

void wait_event(ncclComm_t comm, cudaEvent_t event, double timeout_s, Clock::time_point deadline, const char* what) {
  for (unsigned polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(event);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) throw_cuda(q, what);
    clear_not_ready();
    check_async(comm);
    if (Clock::now() > deadline)
      throw Error(ErrorCode::Timeout,
                  std::string(what) + " did not complete within " + std::to_string(timeout_s) +
                      " s (STRAGGLAR_TIMEOUT_S): a peer is later than the timeout, stopped, died, or called "
                      "with different arguments (or earlier work on this stream never ends); abort the "
                      "communicator (ncclCommAbort)");
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}
}  // namespace cuda

NcclTransport::NcclTransport(ncclComm_t comm, cudaStream_t stream, double timeout_s)
    : comm_(comm), stream_(stream), timeout_s_(timeout_s) {
  require(comm != nullptr, "NcclTransport: null ncclComm_t");
  STRAGGLAR_NCCL_CHECK(ncclCommUserRank(comm, &rank_));
  STRAGGLAR_NCCL_CHECK(ncclCommCount(comm, &nranks_));
}

void NcclTransport::exchange(std::span<const Message> sends, std::span<const Message> recvs) {
  // Both peers of a transfer post it in the same round, i.e. the same group, so NCCL pairs them;
  // the order inside a group does not matter.
  STRAGGLAR_NCCL_CHECK(ncclGroupStart());
  try {
    for (const Message& m : recvs) {
      if (m.bytes == 0) continue;
      STRAGGLAR_NCCL_CHECK(ncclRecv(m.data, m.bytes, ncclUint8, m.peer, comm_, stream_));
    }
    for (const Message& m : sends) {
      if (m.bytes == 0) continue;
      STRAGGLAR_NCCL_CHECK(ncclSend(m.data, m.bytes, ncclUint8, m.peer, comm_, stream_));
    }
  } catch (...) {
    (void)ncclGroupEnd();  // leave NCCL's group depth balanced; the first error is the one reported
    throw;
  }
  cuda::settle_nccl(comm_, ncclGroupEnd(), "ncclGroupEnd", timeout_s_);
}

}  // namespace stragglar
