// stragglar::allreduce over MPI — the C++ API (docs/design.md "Public API"; C: stragglar_mpi.h).
//
//   stragglar::Options opts;            // algorithm auto: finds the late rank itself
//   opts.algorithm = stragglar::Algorithm::stragglar; opts.straggler = 3;   // or name it
//   stragglar::allreduce(sendbuf_or_MPI_IN_PLACE, recvbuf, count, DataType::float32,
//                        ReduceOp::sum, MPI_COMM_WORLD, opts);
//
// Every algorithm runs the runtime core's one path (docs/runtime.md): synthesize → verify (once
// per process) → compile for this rank → executor over MPI point-to-point and host loops.
// `native` calls MPI_Allreduce instead (the baseline a user already has).
#pragma once
#include <mpi.h>

#include <cstddef>

#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

// AllReduce of `count` elements across `comm` (an intracommunicator). In place when
// sendbuf == recvbuf or sendbuf == MPI_IN_PLACE; any count, no padding. Collective: every rank
// passes the same count, dtype, op and options. The first call of each such configuration on a
// communicator checks that across ranks (one small MPI_Iallreduce): a disagreement gives
// Error(Mismatch) on every rank, an invalid argument on one rank Error(InvalidUsage) there and
// Error(RemoteError) on the others, buffers untouched. A peer that does not answer within
// STRAGGLAR_TIMEOUT_S gives Error(Timeout); after a timeout or a transport error the
// communicator is broken for stragglar and every later call on it fails at once (free it).
void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
               ReduceOp op, MPI_Comm comm, const Options& opts = {});

// What algorithm = auto decided and saw on `comm` (docs/auto.md). Local (no communication);
// active = false before the first auto call on this communicator (always on one rank).
StragglerReport straggler_report(MPI_Comm comm);

}  // namespace stragglar
