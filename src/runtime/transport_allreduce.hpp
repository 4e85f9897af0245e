// A latency-bound AllReduce over any Transport: recursive doubling (Thakur, Rabenseifner and
// Gropp 2005, with their fold for n not a power of two). auto's bounded native runs it for tiny
// messages where the engine's own bounded AllReduce costs more than its blocking one
// (docs/auto.md "Small messages": Open MPI's MPI_Iallreduce of 8 B is ~1.8× MPI_Allreduce;
// this is within noise of it). log2(n) rounds of the whole message (+2 when n is not a power of
// two): for messages of a few KiB at most.
//
// Exact and identical on every rank: each pairwise combination computes lower-rank partial op
// higher-rank partial, so both partners hold the same bits, and ranks folded out receive the
// result. Timeouts and failures are the transport's (Error(Timeout), Error(RemoteError), ...).
#pragma once
#include <cstddef>

#include "runtime/device.hpp"
#include "runtime/transport.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

// Reduces `count` elements of `data` across the ranks of `transport` with `op` (avg reduces as
// sum: the caller finishes it). `data` and `spare` (count elements each) are engine-owned: a
// timed-out receive may still write either. Messages carry `tag`. Returns whichever of the two
// holds the result.
void* transport_allreduce(Transport& transport, Device& device, void* data, void* spare, std::size_t count,
                          DataType dtype, ReduceOp op, int tag);

}  // namespace stragglar::detail
