// CUDA side of the NCCL consumer: a kernel of the user's own and the C API, from a .cu file
// (nvcc compiles it as C++17; stragglar_nccl.h is C and fits any of them).
#include <stragglar/stragglar_nccl.h>

namespace {
__global__ void fill(float* data, size_t count, float value) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < count) data[i] = value;
}
}  // namespace

// Fills `data` with `value` on `stream`, then sums it across `comm` with StragglAR.
stragglar_result fill_and_reduce(float* data, size_t count, float value, ncclComm_t comm, cudaStream_t stream) {
  fill<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(data, count, value);
  stragglar_options opts;
  stragglar_options_init(&opts);
  return stragglarNcclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream, &opts);
}
