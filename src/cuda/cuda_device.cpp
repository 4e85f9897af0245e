// CudaDevice: stream-ordered memory, copies and the reduction kernels of kernels.cu.
#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "cuda_device.hpp"

namespace stragglar {

CudaDevice::CudaDevice(cudaStream_t stream, int device) : stream_(stream) {
  if (device < 0) STRAGGLAR_CUDA_CHECK(cudaGetDevice(&device));
  int sms = 0;
  STRAGGLAR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int threads_per_sm = 0;
  STRAGGLAR_CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm,
                                              cudaDevAttrMaxThreadsPerMultiProcessor, device));
  // Enough resident threads to fill every SM once; the grid-stride loops do the rest.
  max_blocks_ = sms * std::max(1, threads_per_sm / cuda::kThreadsPerBlock);
}

void* CudaDevice::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  STRAGGLAR_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream_));
  return p;
}

void CudaDevice::deallocate(void* p) noexcept {
  if (p != nullptr) (void)cudaFreeAsync(p, stream_);  // noexcept: nothing useful to throw here
}

void CudaDevice::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaDevice::reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) {
  cuda::launch_reduce(dst, src, count, t, op, stream_, max_blocks_);
}

void CudaDevice::finish_average(void* buf, std::size_t count, DataType t, int nranks) {
  require(nranks > 0, "finish_average: nranks " + std::to_string(nranks) + ", expected > 0");
  cuda::launch_finish_average(buf, count, t, nranks, stream_, max_blocks_);
}

}  // namespace stragglar
