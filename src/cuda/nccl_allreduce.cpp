// The NCCL front-end: stragglar::nccl_allreduce on an ncclComm_t (include/stragglar/nccl.hpp).
//
// Thin by design: the runtime core (runtime/session.hpp) does the work, the NCCL engine and
// its call protocol live in nccl_engine.{hpp,cpp}. Here: one NcclSession per communicator,
// created on its first call, dropped by nccl_comm_release.
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cuda_check.hpp"
#include "nccl_engine.hpp"
#include "nccl_front.hpp"
#include "runtime/env.hpp"
#include "stragglar/nccl.hpp"

namespace stragglar {
namespace {

std::mutex g_mutex;
std::unordered_map<ncclComm_t, std::unique_ptr<detail::NcclSession>>& sessions() {
  // Never destroyed: no CUDA calls at exit.
  static auto* m = new std::unordered_map<ncclComm_t, std::unique_ptr<detail::NcclSession>>();
  return *m;
}

// NCCL's API exposes no identity of a communicator but its address, which a new communicator
// may reuse once one is destroyed: stragglarNcclCommRelease before ncclCommDestroy (Abandon
// before ncclCommAbort) is
// the way out (docs/gpu.md). A reuse that forgot it is caught where the shape differs (a live
// communicator's rank, size and device never change): the stale session is dropped (leaked: its
// communicator is gone) and a fresh one made.
//
// A broken session's communicator is often in NCCL's error state after the failure (2.28 refuses
// even ncclCommUserRank on it: "Attempt to use communicator before the previous operation
// returned ncclSuccess"); then the session is returned as it is, so that the call fails with the
// first error (a timeout, say), not with the query's.
detail::NcclSession& session_for(ncclComm_t comm) {
  require(comm != nullptr, "stragglarNcclAllReduce: comm is a null ncclComm_t, expected a communicator");
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& m = sessions();
  auto it = m.find(comm);
  int rank = 0, nranks = 0, device = 0;
  ncclResult_t q = ncclCommUserRank(comm, &rank);
  if (q == ncclSuccess) q = ncclCommCount(comm, &nranks);
  if (q == ncclSuccess) q = ncclCommCuDevice(comm, &device);
  if (q != ncclSuccess) {
    if (it != m.end() && it->second->broken()) return *it->second;  // fails with its first error
    const Error e = cuda::nccl_error(q, "ncclCommUserRank/ncclCommCount/ncclCommCuDevice(comm)");
    // A communicator in error (ncclCommGetAsyncError says so; a query also fails while an
    // operation is still in progress, which breaks nothing): its GPU work may never finish, so
    // the session is broken, and released by leaking it (nccl_comm_release).
    ncclResult_t async = ncclSuccess;
    if (it != m.end() && ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress)
      it->second->session().mark_broken(e);
    throw e;
  }
  if (it != m.end()) {
    detail::NcclSession& known = *it->second;
    if (known.session().rank() == rank && known.session().nranks() == nranks && known.engine().device_id() == device)
      return known;
    (void)it->second.release();
    m.erase(it);
  }
  auto session = std::make_unique<detail::NcclSession>(comm, detail::env().timeout_s);
  // auto's per-call waits wait as long as ncclAllReduce would (docs/gpu.md "Timeouts").
  session->engine().set_call_waits_bounded(false);
  return *m.emplace(comm, std::move(session)).first->second;
}

}  // namespace

namespace detail {
void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts, PhaseSelection phases) {
  session_for(comm).allreduce(sendbuf, recvbuf, count, dtype, op, stream, opts, phases);
}
}  // namespace detail

void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts) {
  detail::nccl_allreduce(sendbuf, recvbuf, count, dtype, op, comm, stream, opts, PhaseSelection::all);
}

StragglerReport nccl_straggler_report(ncclComm_t comm) { return session_for(comm).session().auto_report(); }

namespace detail {
Choice nccl_last_choice(ncclComm_t comm) { return session_for(comm).session().last_choice(); }
}  // namespace detail

void nccl_comm_abandon(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = sessions().find(comm);
  if (it == sessions().end()) return;
  (void)it->second.release();  // its GPU work may never finish: nothing is freed (nccl.hpp)
  sessions().erase(it);
}

void nccl_comm_release(ncclComm_t comm) {
  std::unique_ptr<detail::NcclSession> victim;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = sessions().find(comm);
    if (it == sessions().end()) return;
    victim = std::move(it->second);
    sessions().erase(it);
  }
  if (victim->broken()) {
    (void)victim.release();  // pending GPU work may still write its memory
    return;
  }
  try {
    detail::DeviceGuard guard(victim->engine().device_id());
    victim.reset();
  } catch (...) {
    // The device cannot be made current (a sticky CUDA error): freeing on another device is
    // wrong, so the session is left (leaked) and the error goes to the caller.
    (void)victim.release();
    throw;
  }
}

}  // namespace stragglar
