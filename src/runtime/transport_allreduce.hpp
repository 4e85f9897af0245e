// A latency-bound AllReduce over any Transport, for auto's bounded native on tiny messages
// (docs/auto.md "Small messages": Open MPI's MPI_Iallreduce of 8 B is ~1.8× MPI_Allreduce).
// Up to kOneRoundMaxRanks ranks: one round in which every rank sends its data to every other and
// reduces the n contributions itself, in rank order. Beyond: recursive doubling (Thakur,
// Rabenseifner and Gropp 2005, with their fold for n not a power of two), log2(n) rounds (+2
// when n is not a power of two). For messages of a few KiB at most.
//
// Why one round: where ranks share cores (8 ranks on the 2-core VM) every round waits for a
// wake-up of its slowest peer; one round of n − 1 small messages measured 0.92–1.00× the time of
// MPI_Allreduce at 8 B–2 KiB on 8 ranks, recursive doubling 1.07–1.10× (docs/auto.md).
//
// Exact and identical on every rank: one round computes x0 op x1 op ... op x(n−1) in that order on
// every rank; in recursive doubling each pairwise combination computes lower-rank partial op
// higher-rank partial, so both partners hold the same bits, and ranks folded out receive the
// result. Timeouts and failures are the transport's (Error(Timeout), Error(RemoteError), ...).
#pragma once
#include <cstddef>

#include "runtime/device.hpp"
#include "runtime/transport.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

inline constexpr int kOneRoundMaxRanks = 16;

// The engine-owned memory transport_allreduce needs for `bytes` of data on `nranks` ranks: n
// slots of `bytes` up to kOneRoundMaxRanks ranks (every rank's contribution), else 2 (the
// running partial and a receive).
std::size_t transport_allreduce_staging_bytes(int nranks, std::size_t bytes);

// Reduces `count` elements across the ranks of `transport` with `op` (avg reduces as sum: the
// caller finishes it). `staging` (engine-owned, transport_allreduce_staging_bytes(nranks,
// count × element size) bytes) holds this rank's data at its start: a timed-out receive may
// still write anywhere in it. Messages carry `tag`. Returns where in `staging` the result is.
void* transport_allreduce(Transport& transport, Device& device, std::byte* staging, std::size_t count, DataType dtype,
                          ReduceOp op, int tag);

}  // namespace stragglar::detail
