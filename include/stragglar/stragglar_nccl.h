/* stragglar over NCCL — C API beside ncclAllReduce (C++: stragglar/nccl.hpp).
 *
 *   stragglar_options o; stragglar_options_init(&o); o.straggler = 7;
 *   if (stragglarNcclAllReduce(sendbuf, recvbuf, count, ncclFloat32, ncclSum, comm, stream, &o)
 *       != stragglar_success)
 *     fprintf(stderr, "%s\n", stragglar_last_error());
 *
 * Same arguments and semantics as ncclAllReduce plus the options: in place when
 * sendbuff == recvbuff; any count (no padding asked); fully stream-ordered and asynchronous —
 * the call enqueues NCCL point-to-point calls and reduction kernels on `stream` and returns
 * without waiting for the GPU, so the ranks that are not late start StragglAR's
 * ReduceScatter as soon as their streams reach it. Types: ncclFloat32, ncclFloat64,
 * ncclFloat16, ncclBfloat16, ncclInt32, ncclInt64; ops: ncclSum, ncclProd, ncclMin, ncclMax,
 * ncclAvg. algorithm = stragglar_algo_native calls ncclAllReduce.
 *
 * The first call of a configuration (count, type, op, algorithm, straggler, pipeline) on a
 * communicator checks that every rank passed the same one (a small ncclAllReduce on `stream`,
 * polled with the STRAGGLAR_TIMEOUT_S timeout, once) and returns stragglar_mismatch on every
 * rank if not; a rank whose arguments are invalid gets stragglar_invalid_usage and the others
 * stragglar_remote_error. An asynchronous NCCL error, a timeout or a CUDA/NCCL failure breaks
 * the communicator for stragglar: every later call returns that error at once (then release it
 * and ncclCommAbort it). Per-communicator state (plans, scratch) is cached; call
 * stragglarNcclCommRelease before ncclCommDestroy. Blocking and non-blocking communicators;
 * a communicator must not be used concurrently from two threads. */
#ifndef STRAGGLAR_NCCL_H_
#define STRAGGLAR_NCCL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

#include "stragglar/stragglar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* opts == NULL: defaults (stragglar_options_init). Bad arguments are rejected before any data
 * moves (stragglar_invalid_usage, message naming the value in stragglar_last_error()). */
stragglar_result stragglarNcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream, const stragglar_options* opts);

/* Frees the cached state of `comm` (plans, scratch). Call before ncclCommDestroy(comm);
 * a later stragglarNcclAllReduce on the same handle starts afresh. */
stragglar_result stragglarNcclCommRelease(ncclComm_t comm);

/* Forgets the cached state of `comm` without freeing its GPU memory (it leaks). Call before
 * ncclCommAbort(comm): GPU work on an aborted communicator may never finish, and freeing would
 * wait for it. */
stragglar_result stragglarNcclCommAbandon(ncclComm_t comm);

/* What auto decided and saw on `comm` (see stragglar_straggler_report in stragglar.h). Local. */
stragglar_result stragglarNcclStragglerReport(ncclComm_t comm, stragglar_straggler_report* report, double* scores,
                                              int nscores);

#ifdef __cplusplus
}
#endif

#endif /* STRAGGLAR_NCCL_H_ */
