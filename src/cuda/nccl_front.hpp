// The NCCL front-end's call with a PhaseSelection (the GPU benchmark times the ideal case with
// it; users call stragglar::nccl_allreduce). Internal.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/executor.hpp"
#include "runtime/straggler_policy.hpp"
#include "stragglar/options.hpp"

namespace stragglar::detail {

void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts, PhaseSelection phases);

// What the most recent call on `comm` ran (the benchmark's per-iteration `choices`).
Choice nccl_last_choice(ncclComm_t comm);

}  // namespace stragglar::detail
