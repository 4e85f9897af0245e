// CpuDevice: host memory and reduction loops (compiled with -O3; simple __restrict loops
// so GCC/Clang vectorise them).
#include "runtime/cpu_device.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "stragglar/error.hpp"
#include "runtime/numeric_rule.hpp"

namespace stragglar {
namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kHugePage = std::size_t{2} << 20;  // x86-64's transparent huge page

// The loops are built for the x86-64 baseline (SSE2) and for AVX2 and AVX-512, the best picked
// at load time (GCC/Clang function multiversioning): a float sum of 8 MiB takes 1.58 ms with
// SSE2, 1.27 with AVX2 and 1.13 with AVX-512 on this project's VM. Element-wise IEEE operations
// give the same bits at every width (no reassociation; -fno-trapping-math only).
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(__CUDACC__)
#define STRAGGLAR_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define STRAGGLAR_VECTOR_CLONES
#endif

// The operators are the numeric rule shared with the CUDA kernels (runtime/numeric_rule.hpp,
// docs/runtime.md "NaN and signed zero"): canonical NaN, IEEE 754-2019 minimum/maximum,
// wrapping integer sum/prod.
using numeric::Max;
using numeric::Min;
using numeric::Prod;
using numeric::Sum;

template <typename T, class Op>
STRAGGLAR_VECTOR_CLONES void loop(T* __restrict dst, const T* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

// fp16/bf16: widen a block to float, reduce, round back. Blocks keep the float loop
// vectorisable and the temporaries in L1.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float), class Op>
STRAGGLAR_VECTOR_CLONES void loop16(std::uint16_t* __restrict dst, const std::uint16_t* __restrict src, std::size_t n) {
  constexpr std::size_t kBlock = 512;
  alignas(kAlign) float a[kBlock];
  alignas(kAlign) float b[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = n - base < kBlock ? n - base : kBlock;
    for (std::size_t i = 0; i < m; ++i) a[i] = ToFloat(dst[base + i]);
    for (std::size_t i = 0; i < m; ++i) b[i] = ToFloat(src[base + i]);
    for (std::size_t i = 0; i < m; ++i) a[i] = Op::apply(a[i], b[i]);
    for (std::size_t i = 0; i < m; ++i) dst[base + i] = FromFloat(a[i]);
  }
}

template <typename T>
void reduce_typed(void* dst, const void* src, std::size_t n, ReduceOp op) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: loop<T, Sum>(d, s, n); return;
    case ReduceOp::prod: loop<T, Prod>(d, s, n); return;
    case ReduceOp::min: loop<T, Min>(d, s, n); return;
    case ReduceOp::max: loop<T, Max>(d, s, n); return;
  }
  throw Error(ErrorCode::InvalidUsage,
              "reduce: op " + std::to_string(static_cast<int>(op)) + " is not a ReduceOp");
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void reduce_16(void* dst, const void* src, std::size_t n, ReduceOp op) {
  auto* d = static_cast<std::uint16_t*>(dst);
  const auto* s = static_cast<const std::uint16_t*>(src);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: loop16<ToFloat, FromFloat, Sum>(d, s, n); return;
    case ReduceOp::prod: loop16<ToFloat, FromFloat, Prod>(d, s, n); return;
    case ReduceOp::min: loop16<ToFloat, FromFloat, Min>(d, s, n); return;
    case ReduceOp::max: loop16<ToFloat, FromFloat, Max>(d, s, n); return;
  }
  throw Error(ErrorCode::InvalidUsage,
              "reduce: op " + std::to_string(static_cast<int>(op)) + " is not a ReduceOp");
}

template <typename T>
void divide(void* buf, std::size_t n, int nranks) {
  T* __restrict b = static_cast<T*>(buf);
  for (std::size_t i = 0; i < n; ++i) b[i] = numeric::divide(b[i], nranks);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void divide16(void* buf, std::size_t n, int nranks) {
  auto* __restrict b = static_cast<std::uint16_t*>(buf);
  for (std::size_t i = 0; i < n; ++i) b[i] = FromFloat(numeric::divide(ToFloat(b[i]), nranks));
}

}  // namespace

void cpu_reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) {
  if (count == 0) return;
  switch (t) {
    case DataType::float32: reduce_typed<float>(dst, src, count, op); return;
    case DataType::float64: reduce_typed<double>(dst, src, count, op); return;
    case DataType::int32: reduce_typed<std::int32_t>(dst, src, count, op); return;
    case DataType::int64: reduce_typed<std::int64_t>(dst, src, count, op); return;
    case DataType::float16: reduce_16<half_to_float, float_to_half>(dst, src, count, op); return;
    case DataType::bfloat16:
      reduce_16<bfloat16_to_float, float_to_bfloat16>(dst, src, count, op);
      return;
  }
  throw Error(ErrorCode::InvalidUsage,
              "reduce: dtype " + std::to_string(static_cast<int>(t)) + " is not a DataType");
}

void cpu_finish_average(void* buf, std::size_t count, DataType t, int nranks) {
  if (nranks < 1)  // no string unless it fails: this runs on every avg call
    throw Error(ErrorCode::InvalidUsage, "finish_average: nranks = " + std::to_string(nranks) + ", expected at least 1");
  if (count == 0) return;
  switch (t) {
    case DataType::float32: divide<float>(buf, count, nranks); return;
    case DataType::float64: divide<double>(buf, count, nranks); return;
    case DataType::int32: divide<std::int32_t>(buf, count, nranks); return;
    case DataType::int64: divide<std::int64_t>(buf, count, nranks); return;
    case DataType::float16: divide16<half_to_float, float_to_half>(buf, count, nranks); return;
    case DataType::bfloat16:
      divide16<bfloat16_to_float, float_to_bfloat16>(buf, count, nranks);
      return;
  }
  throw Error(ErrorCode::InvalidUsage,
              "finish_average: dtype " + std::to_string(static_cast<int>(t)) +
                  " is not a DataType");
}

void* CpuDevice::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // From 2 MiB on, aligned to a huge page and advised to use them (transparent huge pages):
  // 512 times fewer page faults when it is first touched below.
  const std::size_t align = bytes >= kHugePage ? kHugePage : kAlign;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr)
    throw Error(ErrorCode::SystemError,
                "CpuDevice: could not allocate " + std::to_string(bytes) + " bytes");
  advise_huge_pages(p, rounded);
  // Fault every page in now: memory is allocated when a configuration is made (plans, scratch,
  // auto's staging), and its first touch would otherwise land in the first call that uses it
  // (first-use costs belong outside the measured calls: docs/runtime.md "First-call costs").
  touch_pages(p, rounded);
  return p;
}

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  if (bytes < kHugePage) return;
  // madvise takes whole pages: the 4 KiB pages inside [p, p + bytes). A kernel without
  // transparent huge pages ignores the advice (EINVAL), which is fine.
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + 4095) & ~std::uintptr_t{4095};
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~std::uintptr_t{4095};
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void touch_pages(void* p, std::size_t bytes) noexcept {
  const long page = sysconf(_SC_PAGESIZE);
  const std::size_t step = page > 0 ? static_cast<std::size_t>(page) : 4096;
  for (std::size_t off = 0; off < bytes; off += step) static_cast<volatile char*>(p)[off] = 0;
}

void warm_allocator_for(std::size_t bytes) noexcept {
  // glibc raises its threshold only up to 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit): larger
  // temporaries are fresh mappings in every call, which nothing done now can warm.
  constexpr std::size_t kMostWarmed = std::size_t{32} << 20;
  if (bytes == 0 || bytes >= kMostWarmed) return;
  // volatile: the compiler may not drop a malloc/free pair whose memory is never used.
  void* volatile first = std::malloc(bytes);
  std::free(first);
  // The heap's top it extends stays after the free (below glibc's trim threshold), advised to use
  // huge pages, for the temporaries' first use to fault in. Not touched now: faulting it in
  // before the configuration's agreement made that first call slower on a loaded host (every
  // rank's set-up waits for the slowest; docs/runtime.md "First-call costs").
  void* const second = std::malloc(bytes);
  if (second == nullptr) return;
  advise_huge_pages(second, bytes);
  std::free(second);
}

void CpuDevice::deallocate(void* p) noexcept { std::free(p); }

void CpuDevice::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  std::memcpy(dst, src, bytes);
}

void CpuDevice::reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) {
  cpu_reduce(dst, src, count, t, op);
}

void CpuDevice::finish_average(void* buf, std::size_t count, DataType t, int nranks) {
  cpu_finish_average(buf, count, t, nranks);
}

}  // namespace stragglar
