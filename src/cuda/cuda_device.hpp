// CudaDevice: device memory and reduction kernels on one CUDA device and stream (internal).
#pragma once
#include <cuda_runtime_api.h>

#include "runtime/device.hpp"

namespace stragglar {

// allocate/deallocate are stream-ordered (cudaMallocAsync/cudaFreeAsync from the device's
// default pool: no device-wide synchronisation); copy is cudaMemcpyAsync device-to-device;
// reduce and finish_average launch kernels (16-byte vector loads where dst and src share their
// alignment, scalar otherwise). Nothing synchronises the host.
class CudaDevice final : public Device {
 public:
  // `device` = -1: the current device. Queries the SM count once (it sizes the grids).
  explicit CudaDevice(cudaStream_t stream, int device = -1);
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) override;
  void finish_average(void* buf, std::size_t count, DataType t, int nranks) override;

  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }

 private:
  cudaStream_t stream_;
  int max_blocks_ = 1;
};

}  // namespace stragglar
