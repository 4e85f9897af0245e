// Device: where buffers live and how they are reduced (CPU loops, CUDA kernels on a stream).
#pragma once
#include <cstddef>

#include "stragglar/types.hpp"

namespace stragglar {

class Device {
 public:
  virtual ~Device() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // dst[i] = dst[i] op src[i] for i < count; avg reduces as sum (see finish_average).
  virtual void reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) = 0;
  // buf[i] /= nranks, the last step of ReduceOp::avg (integers: truncating division, as NCCL).
  virtual void finish_average(void* buf, std::size_t count, DataType t, int nranks) = 0;
};

}  // namespace stragglar
