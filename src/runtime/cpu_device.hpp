// CpuDevice: buffers in host memory, reductions as plain loops the compiler vectorises.
#pragma once
#include <cstddef>

#include "runtime/device.hpp"

namespace stragglar {

class CpuDevice final : public Device {
 public:
  // 64-byte aligned host memory; allocate(0) returns nullptr.
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  // dst and src must not overlap. fp16/bf16: widened to float, rounded back to nearest even.
  // Integer sum/prod wrap around (two's complement), as NCCL and MPI do in practice.
  void reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) override;
  void finish_average(void* buf, std::size_t count, DataType t, int nranks) override;
};

// Host memory of 2 MiB or more: advises the kernel to back [p, p + bytes) with transparent huge
// pages (far fewer page faults on first touch; no effect where the kernel has none).
void advise_huge_pages(void* p, std::size_t bytes) noexcept;
// Writes one byte per page: faults the memory in now rather than in a later, measured call.
void touch_pages(void* p, std::size_t bytes) noexcept;

// Readies the C library's allocator for a library that mallocs and frees `bytes` of temporaries
// in every call (MPI's non-blocking collectives do): with glibc, the first malloc of a new large
// size is an mmap of fresh pages and its free raises the dynamic mmap threshold above it; the
// next one extends the heap's top, fresh pages again; only the third reuses faulted memory. This
// makes those two mallocs now, outside any call, the second's memory advised to use huge pages,
// so the temporaries' first use is a heap reuse: one first touch, not two fresh allocations.
// Harmless elsewhere (two mallocs and frees).
void warm_allocator_for(std::size_t bytes) noexcept;

// The same loops, for callers that hold host pointers (MPI user operators, tests).
void cpu_reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op);
void cpu_finish_average(void* buf, std::size_t count, DataType t, int nranks);

}  // namespace stragglar
