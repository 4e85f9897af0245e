// CUDA kernels of the GPU runtime: element-wise reduce, the avg division, fill and a GPU sleep.
//
// The reduce is memory bound (read dst and src, write dst), so what matters is wide, coalesced
// memory traffic: 16-byte loads (uint4) with four independent loads in flight per thread and a
// grid-stride loop over a grid capped at a few blocks per SM. Half and bfloat16 are combined in
// float and rounded once; for + and × that equals the native half/bf16 operation bit for bit
// (double rounding is innocuous when the wider format has p' >= 2p + 2 bits: 24 >= 2·11 + 2).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <string>

#include "cuda_check.hpp"
#include "kernels.hpp"

namespace stragglar::cuda {
namespace {

// ---- element types: load into a compute type, store back ------------------------------------
template <typename T>
struct Elem {
  using Acc = T;
  __device__ static Acc load(T x) { return x; }
  __device__ static T store(Acc x) { return x; }
};
template <>
struct Elem<__half> {
  using Acc = float;
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float x) { return __float2half_rn(x); }
};
template <>
struct Elem<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};

// ---- operators (avg reduces as sum) ----------------------------------------------------------
// The CPU device's rule (src/runtime/cpu_device.cpp), so every rank and engine ends with the
// same bits: a NaN result is the canonical quiet NaN; min/max are IEEE 754-2019
// minimum/maximum (NaN propagates, -0 < +0). Half/bf16 are combined in float (Acc) and the
// canonical float NaN rounds to the canonical half/bf16 NaN.
template <typename A>
__device__ __forceinline__ A canonical_nan(A r) {
  if constexpr (std::is_floating_point_v<A>) return r == r ? r : std::numeric_limits<A>::quiet_NaN();
  return r;
}
// Equal operands that are not identical are +0 and -0: their bits' AND is +0 (max), OR is -0 (min).
__device__ __forceinline__ float signed_zero_merge(float a, float b, bool take_or) {
  const unsigned x = __float_as_uint(a), y = __float_as_uint(b);
  return __uint_as_float(take_or ? (x | y) : (x & y));
}
__device__ __forceinline__ double signed_zero_merge(double a, double b, bool take_or) {
  const long long x = __double_as_longlong(a), y = __double_as_longlong(b);
  return __longlong_as_double(take_or ? (x | y) : (x & y));
}
struct OpSum {
  template <typename A> __device__ A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;  // wrap-around like NCCL, without signed-overflow UB
      return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return canonical_nan(a + b);
    }
  }
};
struct OpProd {
  template <typename A> __device__ A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return canonical_nan(a * b);
    }
  }
};
struct OpMin {
  template <typename A> __device__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a || b != b) return std::numeric_limits<A>::quiet_NaN();
      return a == b ? signed_zero_merge(a, b, true) : (b < a ? b : a);
    }
    return b < a ? b : a;
  }
};
struct OpMax {
  template <typename A> __device__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a || b != b) return std::numeric_limits<A>::quiet_NaN();
      return a == b ? signed_zero_merge(a, b, false) : (a < b ? b : a);
    }
    return a < b ? b : a;
  }
};

template <typename T, typename Op>
__device__ __forceinline__ T combine(T a, T b) {
  return Elem<T>::store(Op{}(Elem<T>::load(a), Elem<T>::load(b)));
}

template <typename T, typename Op>
__device__ __forceinline__ void combine_vec(uint4& a, const uint4& b) {
  constexpr int V = 16 / sizeof(T);
  T* pa = reinterpret_cast<T*>(&a);
  const T* pb = reinterpret_cast<const T*>(&b);
#pragma unroll
  for (int k = 0; k < V; ++k) pa[k] = combine<T, Op>(pa[k], pb[k]);
}

// dst/src: the whole range. [0, head) scalar, [head, head + nvec·V) as uint4 (16-byte aligned
// in both), [head + nvec·V, head + nvec·V + tail) scalar. Misaligned pairs: head = count.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
reduce_kernel(T* __restrict__ dst, const T* __restrict__ src, std::size_t head,
              std::size_t nvec, std::size_t tail) {
  constexpr int V = 16 / sizeof(T);
  constexpr int U = 4;  // independent 16-byte loads in flight per thread
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;

  for (std::size_t j = tid; j < head; j += stride) dst[j] = combine<T, Op>(dst[j], src[j]);

  uint4* d = reinterpret_cast<uint4*>(dst + head);
  const uint4* s = reinterpret_cast<const uint4*>(src + head);
  std::size_t i = tid;
  for (; i + (U - 1) * stride < nvec; i += U * stride) {
    uint4 a[U], b[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      a[k] = d[i + k * stride];
      b[k] = __ldg(&s[i + k * stride]);
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      combine_vec<T, Op>(a[k], b[k]);
      d[i + k * stride] = a[k];
    }
  }
  for (; i < nvec; i += stride) {
    uint4 a = d[i];
    combine_vec<T, Op>(a, __ldg(&s[i]));
    d[i] = a;
  }

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
    using Acc = typename Elem<T>::Acc;
    buf[i] = Elem<T>::store(Elem<T>::load(buf[i]) / static_cast<Acc>(nranks));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
fill_kernel(T* buf, std::size_t count, double base, int pattern) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const double v = pattern == 0 ? base : base + static_cast<double>(i % 7);
    using Acc = typename Elem<T>::Acc;
    buf[i] = Elem<T>::store(static_cast<Acc>(v));
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

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
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
  if (da == sa && da % sizeof(T) == 0) {  // same misalignment: peel a scalar head
    head = std::min<std::size_t>(count, ((16 - da) % 16) / sizeof(T));
    nvec = (count - head) / V;
    tail = count - head - nvec * V;
  }
  const std::size_t items = nvec > 0 ? (nvec + 3) / 4 : head + tail;
  reduce_kernel<T, Op><<<grid_for(items, max_blocks), kThreadsPerBlock, 0, stream>>>(
      dst, src, head, nvec, tail);
  check_launch("reduce_kernel<<<>>>");
}

template <typename T>
void reduce_op(void* dst, const void* src, std::size_t count, ReduceOp op, cudaStream_t stream,
               int max_blocks) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return reduce_typed<T, OpSum>(dst, src, count, stream, max_blocks);
    case ReduceOp::prod: return reduce_typed<T, OpProd>(dst, src, count, stream, max_blocks);
    case ReduceOp::min: return reduce_typed<T, OpMin>(dst, src, count, stream, max_blocks);
    case ReduceOp::max: return reduce_typed<T, OpMax>(dst, src, count, stream, max_blocks);
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
    average_kernel<T><<<grid_for(count, max_blocks), kThreadsPerBlock, 0, stream>>>(
        static_cast<T*>(buf), count, nranks);
  });
  check_launch("average_kernel<<<>>>");
}

void launch_fill(void* buf, std::size_t count, DataType t, double base, int pattern,
                 cudaStream_t stream, int max_blocks) {
  if (count == 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(count, max_blocks), kThreadsPerBlock, 0, stream>>>(
        static_cast<T*>(buf), count, base, pattern);
  });
  check_launch("fill_kernel<<<>>>");
}

void launch_sleep(cudaStream_t stream, long long nanoseconds) {
  if (nanoseconds <= 0) return;
  sleep_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  check_launch("sleep_kernel<<<>>>");
}

}  // namespace stragglar::cuda
