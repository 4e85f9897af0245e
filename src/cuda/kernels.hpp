// Launchers of the GPU runtime's kernels (kernels.cu). Host-callable, enqueue on `stream`,
// never synchronise; a launch error is thrown as Error(SystemError) naming the kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "stragglar/types.hpp"

namespace stragglar::cuda {

// dst[i] = dst[i] op src[i] for i < count (avg reduces as sum). A scalar head up to dst's 16-byte
// boundary, 16-byte vectors (src read as aligned vectors and shifted when its alignment differs
// from dst's), a scalar tail; scalar throughout only for pointers not aligned to their element.
// Bit-identical at every alignment. `max_blocks` caps the grid (SMs × blocks per SM).
void launch_reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op,
                   cudaStream_t stream, int max_blocks);

// buf[i] /= nranks (integers: truncating division, as NCCL's ncclAvg).
void launch_finish_average(void* buf, std::size_t count, DataType t, int nranks,
                           cudaStream_t stream, int max_blocks);

// One thread spins on %globaltimer for `nanoseconds`: the straggler's delay in the GPU bench,
// stream-ordered so that the host never waits.
void launch_sleep(cudaStream_t stream, long long nanoseconds);

// Threads per block of every kernel here.
inline constexpr int kThreadsPerBlock = 512;

}  // namespace stragglar::cuda
