// CUDA kernels of the GPU runtime: element-wise reduce, the avg division and a GPU sleep.
//
// The reduce is memory bound (read dst and src, write dst), so what matters is wide, coalesced
// memory traffic: 16-byte loads (uint4) with four independent loads in flight per thread and a
// grid-stride loop over a grid capped at a few blocks per SM. At every alignment: a scalar head
// up to dst's 16-byte boundary, then vectors — src, if aligned differently, assembled from the
// two aligned vectors each one straddles (funnel shifts). Half and bfloat16 are combined in
// float and rounded once (runtime/numeric_rule.hpp: the CPU device's rule, one source).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.hpp"
#include "kernels.hpp"
#include "runtime/numeric_rule.hpp"

namespace stragglar::cuda {
namespace {

// ---- element types: load into a compute type, store back ------------------------------------
// fp16/bf16 go through the shared conversions (runtime/numeric_rule.hpp), not CUDA's: those
// give the NaN 0x7fff where the rule says 0x7e00 / 0x7fc0.
template <typename T>
struct Elem {
  using Acc = T;
  __device__ static Acc load(T x) { return x; }
  __device__ static T store(Acc x) { return x; }
};
template <>
struct Elem<__half> {
  using Acc = float;
  __device__ static float load(__half x) { return numeric::half_to_float(__half_as_ushort(x)); }
  __device__ static __half store(float x) { return __ushort_as_half(numeric::float_to_half(x)); }
};
template <>
struct Elem<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 x) { return numeric::bfloat16_to_float(__bfloat16_as_ushort(x)); }
  __device__ static __nv_bfloat16 store(float x) { return __ushort_as_bfloat16(numeric::float_to_bfloat16(x)); }
};

// ---- operators (avg reduces as sum): the CPU device's, from the same header ---------------
using numeric::Max;
using numeric::Min;
using numeric::Prod;
using numeric::Sum;

template <typename T, typename Op>
__device__ __forceinline__ T combine(T a, T b) {
  return Elem<T>::store(Op::apply(Elem<T>::load(a), Elem<T>::load(b)));
}

template <typename T, typename Op>
__device__ __forceinline__ void combine_vec(uint4& a, const uint4& b) {
  constexpr int V = 16 / sizeof(T);
  T* pa = reinterpret_cast<T*>(&a);
  const T* pb = reinterpret_cast<const T*>(&b);
#pragma unroll
  for (int k = 0; k < V; ++k) pa[k] = combine<T, Op>(pa[k], pb[k]);
}

// Words w..w+3 of x[0..7], each shifted right by `bits` with the next word's low bits coming in:
// __funnelshift_r(a, b, n) is the low 32 bits of (b:a) >> n, and n = 0 gives a.
template <int W>
__device__ __forceinline__ uint4 words_from(const unsigned (&x)[8], unsigned bits) {
  return make_uint4(__funnelshift_r(x[W], x[W + 1], bits), __funnelshift_r(x[W + 1], x[W + 2], bits),
                    __funnelshift_r(x[W + 2], x[W + 3], bits), __funnelshift_r(x[W + 3], x[W + 4], bits));
}

// The 16 bytes at byte `shift` (1..15) of the 32 in lo:hi (little-endian): a source vector
// that is not 16-byte aligned, from the two aligned vectors it straddles. `words` = shift / 4
// is uniform across the grid, so the switch does not diverge; `bits` = 8 · (shift % 4).
__device__ __forceinline__ uint4 straddled(const uint4& lo, const uint4& hi, unsigned words, unsigned bits) {
  const unsigned x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  switch (words) {
    case 0: return words_from<0>(x, bits);
    case 1: return words_from<1>(x, bits);
    case 2: return words_from<2>(x, bits);
    default: return words_from<3>(x, bits);
  }
}

// The vector part: nvec 16-byte vectors of dst (aligned) combined with the source vectors
// starting at byte `shift` of s (aligned). shift = 0: src is aligned like dst, one load each;
// otherwise each source vector comes from the two aligned ones it straddles — both hold bytes
// of the range, so nothing outside it is read, and the second is the next thread's first (an
// L1 hit): DRAM traffic stays one read of src.
template <typename T, typename Op, bool kShifted>
__device__ __forceinline__ void vector_part(uint4* __restrict__ d, const uint4* __restrict__ s, std::size_t nvec,
                                            unsigned shift) {
  constexpr int U = 4;  // independent 16-byte loads in flight per thread
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned words = shift / 4, bits = 8 * (shift % 4);
  auto source = [&](std::size_t v) {
    if constexpr (kShifted) return straddled(__ldg(&s[v]), __ldg(&s[v + 1]), words, bits);
    else return __ldg(&s[v]);
  };
  for (; i + (U - 1) * stride < nvec; i += U * stride) {
    uint4 a[U], b[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      a[k] = d[i + k * stride];
      b[k] = source(i + k * stride);
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      combine_vec<T, Op>(a[k], b[k]);
      d[i + k * stride] = a[k];
    }
  }
  for (; i < nvec; i += stride) {
    uint4 a = d[i];
    combine_vec<T, Op>(a, source(i));
    d[i] = a;
  }
}

// dst/src: the whole range. [0, head) scalar: dst + head is 16-byte aligned;
// [head, head + nvec·V) as 16-byte vectors of dst, src read from the aligned vectors at
// src + head − shift (shift: src + head's offset in its 16 bytes; kShifted = shift != 0, a
// kernel of its own so that the aligned one keeps its registers); [head + nvec·V, … + tail)
// scalar. Pointers not aligned to their element: head = count. Every element gets the same
// combine<T, Op> whatever the path: the result does not depend on alignment.
template <typename T, typename Op, bool kShifted>
__global__ void __launch_bounds__(kThreadsPerBlock)
reduce_kernel(T* __restrict__ dst, const T* __restrict__ src, std::size_t head,
              std::size_t nvec, std::size_t tail, unsigned shift) {
  constexpr int V = 16 / sizeof(T);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  for (std::size_t j = tid; j < head; j += stride) dst[j] = combine<T, Op>(dst[j], src[j]);

  if (nvec > 0)
    vector_part<T, Op, kShifted>(reinterpret_cast<uint4*>(dst + head),
                                 reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(src + head) - shift),
                                 nvec, shift);

  const std::size_t t0 = head + nvec * V;
  for (std::size_t j = tid; j < tail; j += stride)
    dst[t0 + j] = combine<T, Op>(dst[t0 + j], src[t0 + j]);
}

template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
average_kernel(T* buf, std::size_t count, int nranks) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    buf[i] = Elem<T>::store(numeric::divide(Elem<T>::load(buf[i]), nranks));
  }
}

__global__ void sleep_kernel(long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < nanoseconds);
}

int grid_for(std::size_t work_items, int max_blocks) {
  const std::size_t want = (work_items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<int>(std::clamp<std::size_t>(want, 1, static_cast<std::size_t>(std::max(max_blocks, 1))));
}

// Launches with the launch's own status (as NCCL does), never cudaGetLastError(): that also
// returns whatever an earlier call on this thread left there — e.g. the cudaErrorNotReady of
// any cudaEventQuery/cudaStreamQuery poll, the caller's or ours — and would turn it into a
// launch failure that breaks the communicator.
template <typename... Params, typename... Args>
void launch(const char* kernel, void (*fn)(Params...), int grid, int block, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(block));
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  const cudaError_t e = cudaLaunchKernelEx(&config, fn, args...);
  if (e != cudaSuccess) throw_cuda(e, kernel);
}

template <typename T, typename Op>
void reduce_typed(void* dst_v, const void* src_v, std::size_t count, cudaStream_t stream,
                  int max_blocks) {
  constexpr std::size_t V = 16 / sizeof(T);
  auto* dst = static_cast<T*>(dst_v);
  const auto* src = static_cast<const T*>(src_v);
  const auto da = reinterpret_cast<std::uintptr_t>(dst) % 16;
  const auto sa = reinterpret_cast<std::uintptr_t>(src) % 16;
  std::size_t head = count, nvec = 0, tail = 0;
  unsigned shift = 0;
  if (da % sizeof(T) == 0 && sa % sizeof(T) == 0) {  // peel a scalar head up to dst's 16-byte boundary
    head = std::min<std::size_t>(count, ((16 - da) % 16) / sizeof(T));
    nvec = (count - head) / V;
    tail = count - head - nvec * V;
    shift = static_cast<unsigned>((sa + head * sizeof(T)) % 16);
  }
  const std::size_t items = nvec > 0 ? (nvec + 3) / 4 : head + tail;
  if (shift == 0)
    launch("reduce_kernel", reduce_kernel<T, Op, false>, grid_for(items, max_blocks), kThreadsPerBlock, stream, dst,
           src, head, nvec, tail, shift);
  else
    launch("reduce_kernel", reduce_kernel<T, Op, true>, grid_for(items, max_blocks), kThreadsPerBlock, stream, dst,
           src, head, nvec, tail, shift);
}

template <typename T>
void reduce_op(void* dst, const void* src, std::size_t count, ReduceOp op, cudaStream_t stream,
               int max_blocks) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return reduce_typed<T, Sum>(dst, src, count, stream, max_blocks);
    case ReduceOp::prod: return reduce_typed<T, Prod>(dst, src, count, stream, max_blocks);
    case ReduceOp::min: return reduce_typed<T, Min>(dst, src, count, stream, max_blocks);
    case ReduceOp::max: return reduce_typed<T, Max>(dst, src, count, stream, max_blocks);
  }
  throw Error(ErrorCode::InvalidUsage,
              "reduce: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

// Calls f(T{}) with T the CUDA type of `t`.
template <typename F>
void dispatch(DataType t, F&& f) {
  switch (t) {
    case DataType::float32: return f(float{});
    case DataType::float64: return f(double{});
    case DataType::float16: return f(__half{});
    case DataType::bfloat16: return f(__nv_bfloat16{});
    case DataType::int32: return f(std::int32_t{});
    case DataType::int64: return f(std::int64_t{});
  }
  throw Error(ErrorCode::InvalidUsage,
              "unknown DataType " + std::to_string(static_cast<int>(t)));
}

}  // namespace

void launch_reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op,
                   cudaStream_t stream, int max_blocks) {
  if (count == 0) return;
  dispatch(t, [&](auto tag) {
    reduce_op<decltype(tag)>(dst, src, count, op, stream, max_blocks);
  });
}

void launch_finish_average(void* buf, std::size_t count, DataType t, int nranks,
                           cudaStream_t stream, int max_blocks) {
  if (count == 0 || nranks == 1) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch("average_kernel", average_kernel<T>, grid_for(count, max_blocks), kThreadsPerBlock, stream,
           static_cast<T*>(buf), count, nranks);
  });
}

void launch_sleep(cudaStream_t stream, long long nanoseconds) {
  if (nanoseconds <= 0) return;
  launch("sleep_kernel", sleep_kernel, 1, 1, stream, nanoseconds);
}

}  // namespace stragglar::cuda
