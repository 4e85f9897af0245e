// NcclTransport: one round = one NCCL group of point-to-point calls on the caller's stream.
#include <string>

#include "cuda_check.hpp"
#include "stragglar/nccl.hpp"

namespace stragglar {
namespace {

// ncclGroupEnd on a non-blocking communicator may answer ncclInProgress; wait for the
// enqueue (not for the transfers) to finish, as NCCL's docs prescribe.
void group_end(ncclComm_t comm) {
  ncclResult_t r = ncclGroupEnd();
  while (r == ncclInProgress) {
    const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
    if (q != ncclSuccess) cuda::throw_nccl(q, "ncclCommGetAsyncError");
  }
  if (r != ncclSuccess) cuda::throw_nccl(r, "ncclGroupEnd");
}

}  // namespace

NcclTransport::NcclTransport(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
  require(comm != nullptr, "NcclTransport: null ncclComm_t");
  STRAGGLAR_NCCL_CHECK(ncclCommUserRank(comm, &rank_));
  STRAGGLAR_NCCL_CHECK(ncclCommCount(comm, &nranks_));
}

void NcclTransport::exchange(std::span<const Message> sends, std::span<const Message> recvs) {
  // Receives first, then sends; NCCL matches them pairwise inside the group, so the order
  // inside a group does not matter for correctness — only that both peers post the pair in
  // the same group (they do: a round's transfer is one group on both ends).
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
  group_end(comm_);
}

}  // namespace stragglar
