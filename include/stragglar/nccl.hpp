// stragglar over NCCL — the C++ API (C: stragglar_nccl.h).
//
//   stragglar::Options opts;            // algorithm auto: finds the late rank itself
//   opts.algorithm = stragglar::Algorithm::stragglar; opts.straggler = 7;   // or name it
//   stragglar::nccl_allreduce(sendbuf, recvbuf, count, DataType::float32, ReduceOp::sum,
//                             comm, stream, opts);   // enqueued on `stream`, returns at once
//
// Every algorithm runs the runtime core's one path (docs/runtime.md): synthesize → verify (once
// per process) → compile for this rank → executor, here over NCCL point-to-point (one
// ncclGroupStart/End per round) and CUDA reduction kernels on the same stream. Nothing waits
// on the host: the straggler's stream reaches its calls later, and the others' ReduceScatter
// runs meanwhile (paper §3).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

// AllReduce of `count` elements of device memory across `comm`, enqueued on `stream`. In
// place when sendbuf == recvbuf; any count. Collective: every rank passes the same count,
// dtype, op and options; the first call of a configuration on a communicator checks that with
// one small ncclAllReduce on `stream`, waited for with a timeout (STRAGGLAR_TIMEOUT_S), and
// throws Error(Mismatch) on every rank on a disagreement, Error(InvalidUsage) on a rank whose
// arguments are invalid and Error(RemoteError) on the others. Later calls never wait on the
// host. An asynchronous NCCL error (ncclCommGetAsyncError), a timeout or a CUDA/NCCL failure
// breaks the communicator for stragglar: that call and every later one throw; release it with
// nccl_comm_abandon and abort the NCCL communicator (ncclCommAbort). Not thread-safe per comm.
void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                    ReduceOp op, ncclComm_t comm, cudaStream_t stream, const Options& opts = {});

// What algorithm = auto decided and saw on `comm` (docs/auto.md). Local.
StragglerReport nccl_straggler_report(ncclComm_t comm);

// Drops the cached state of `comm` (call before ncclCommDestroy; before ncclCommAbort,
// nccl_comm_abandon). No-op for an unknown comm. A communicator broken by a timeout keeps
// (leaks) the memory its pending GPU work may still write.
void nccl_comm_release(ncclComm_t comm);

// Drops the cached state of `comm` without freeing its GPU memory (it leaks): before
// ncclCommAbort, when GPU work on the communicator may never finish (a peer died, a collective
// hangs — what an abort is usually for). Freeing (cudaFree) would wait for that work, so a
// release there could hang the abort itself. No-op for an unknown comm.
void nccl_comm_abandon(ncclComm_t comm);

// NCCL ⟷ stragglar types. from_nccl throws Error(InvalidUsage) naming an unsupported value
// (e.g. ncclFloat8e4m3, ncclUint8, a ncclRedOpCreatePreMulSum op).
DataType from_nccl(ncclDataType_t t);
ReduceOp from_nccl(ncclRedOp_t op);
ncclDataType_t to_nccl(DataType t) noexcept;
ncclRedOp_t to_nccl(ReduceOp op) noexcept;

}  // namespace stragglar
