// The NCCL front-end's call with a PhaseSelection (the GPU benchmark times the ideal case with
// it; users call stragglar::nccl_allreduce). Internal.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/executor.hpp"
#include "stragglar/options.hpp"

namespace stragglar::detail {

void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
                    ncclComm_t comm, cudaStream_t stream, const Options& opts, PhaseSelection phases);

}  // namespace stragglar::detail
