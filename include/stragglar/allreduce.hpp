// stragglar::allreduce over MPI — the C++ API (DESIGN.md "Public API"; C: stragglar_mpi.h).
//
//   stragglar::Options opts;            // StragglAR, straggler n-1, pipeline auto
//   opts.straggler = 3;
//   stragglar::allreduce(MPI_IN_PLACE_or_sendbuf, recvbuf, count, DataType::float32,
//                        ReduceOp::sum, MPI_COMM_WORLD, opts);
//
// Every algorithm runs the same path: synthesize → verify (once, when it enters the cache) →
// compile for this rank → Executor over MpiTransport + CpuDevice. `native` calls
// MPI_Allreduce instead (the baseline a user already has).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "stragglar/cost_model.hpp"
#include "stragglar/error.hpp"
#include "stragglar/executor.hpp"
#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

struct Options {
  Algorithm algorithm = Algorithm::stragglar;
  // true: MPI_Allreduce (fp16/bf16 through a user MPI_Op; avg = sum, then divide).
  // `algorithm`, `straggler` and `pipeline` are then only checked for agreement.
  bool native = false;
  int straggler = -1;               // the rank expected last; -1 = n-1
  int pipeline = kPipelineAuto;     // StragglAR chunks per rank K; kPipelineAuto = cost model
  // Cost model for pipeline == kPipelineAuto; nullopt = STRAGGLAR_ALPHA_US /
  // STRAGGLAR_BANDWIDTH_GBPS when set, else CostModel{}.
  std::optional<CostModel> cost;
  // Benchmarks only (ideal-case timing): run part of the schedule. With waiting_only the call
  // continues an earlier no_wait_only call on recvbuf: sendbuf is not read again.
  PhaseSelection phases = PhaseSelection::all;
};

// "stragglar", "ring", "rhd", "allpairs", "broadcast" (alias "direct") or "native".
// Throws Error(InvalidUsage) naming the value and the accepted names.
Options options_for(std::string_view algorithm_name);
// The name options_for accepts back ("native" or the algorithm's).
const char* algorithm_name(const Options& opts) noexcept;

// AllReduce of `count` elements across `comm` (an intracommunicator). In place when
// sendbuf == recvbuf (or sendbuf == MPI_IN_PLACE); any count, no padding. Collective: every
// rank passes the same count, dtype, op and options, else every rank gets Error(Mismatch) on
// the first call of that configuration (later calls are not re-checked: a mismatch then ends
// in Error(Timeout), never in mixed data). A peer that stops answering gives Error(Timeout)
// after STRAGGLAR_TIMEOUT_S seconds; the communicator is unusable for stragglar afterwards.
// Bad arguments give Error(InvalidUsage) with the buffers untouched.
void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
               ReduceOp op, MPI_Comm comm, const Options& opts = {});

// The verified schedule allreduce() runs for these options on `nranks` ranks and a buffer of
// `bytes` (pipeline auto resolved); cached. Throws Error(InvalidUsage) for `native`.
std::shared_ptr<const Schedule> schedule_for(const Options& opts, int nranks, std::size_t bytes);

// The pipelining factor K allreduce() uses (1 for everything but StragglAR).
int resolve_pipeline(const Options& opts, int nranks, std::size_t bytes);

}  // namespace stragglar
