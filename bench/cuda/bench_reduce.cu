// Micro-benchmark of the reduction kernel (dst += src) against cudaMemcpyAsync D2D.
//
//   bench_reduce_kernels [--bytes N] [--iters I] [--json FILE]
//
// Both are memory bound; bandwidth counts the bytes each moves through DRAM: a copy of N
// bytes reads N and writes N (2N), the reduce reads dst and src and writes dst (3N). "ratio"
// = reduce GB/s / copy GB/s (goal >= 0.90 for fp32 and bf16 sum). The "+1 elem" rows offset
// src by one element: dst and src then differ in alignment and the scalar path runs.
// No GPU (tests/gpu/cuda_presence.hpp): prints "no CUDA device: skipped" and exits 77; any other
// CUDA error (a driver too old, no kernel image for this GPU) is a failure: exit 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../tests/gpu/cuda_presence.hpp"
#include "cuda_check.hpp"
#include "kernels.hpp"

using namespace stragglar;

namespace {

struct Row {
  std::string type, op, layout;
  double copy_gbs, reduce_gbs;
};

template <typename F>
float time_ms(cudaStream_t s, int iters, const F& body) {
  cudaEvent_t a, b;
  STRAGGLAR_CUDA_CHECK(cudaEventCreate(&a));
  STRAGGLAR_CUDA_CHECK(cudaEventCreate(&b));
  body();  // warm-up
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) body();
  STRAGGLAR_CUDA_CHECK(cudaEventRecord(b, s));
  STRAGGLAR_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / static_cast<float>(iters);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = 256ull << 20;
  int iters = 20;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--bytes N] [--iters I] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const gpu_test::CudaPresence gpu = gpu_test::cuda_presence();
  if (gpu.kind == gpu_test::CudaPresence::absent) {
    std::printf("no CUDA device: skipped (%s)\n", gpu.detail.c_str());
    return 77;
  }
  if (gpu.kind != gpu_test::CudaPresence::present) {
    std::fprintf(stderr, "bench_reduce_kernels: %s\n", gpu.detail.c_str());
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    STRAGGLAR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int max_blocks = prop.multiProcessorCount * (prop.maxThreadsPerMultiProcessor / cuda::kThreadsPerBlock);
    cudaStream_t s;
    STRAGGLAR_CUDA_CHECK(cudaStreamCreate(&s));
    char *dst = nullptr, *src = nullptr;
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&dst, bytes + 64));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&src, bytes + 64));
    STRAGGLAR_CUDA_CHECK(cudaMemset(dst, 0, bytes + 64));
    STRAGGLAR_CUDA_CHECK(cudaMemset(src, 0, bytes + 64));
    const float copy_ms = time_ms(s, iters, [&] {
      STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    });
    const double copy_gbs = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;

    std::vector<Row> rows;
    const DataType types[] = {DataType::float32, DataType::bfloat16, DataType::float16, DataType::float64,
                              DataType::int32, DataType::int64};
    for (DataType t : types) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        for (int misaligned = 0; misaligned < 2; ++misaligned) {
          if (misaligned && op != ReduceOp::sum) continue;
          const std::size_t es = size_of(t);
          const std::size_t count = bytes / es;
          const char* sp = src + (misaligned ? es : 0);
          const float ms = time_ms(s, iters, [&] {
            cuda::launch_reduce(dst, sp, count, t, op, s, max_blocks);
          });
          rows.push_back({to_string(t), to_string(op), misaligned ? "+1 elem" : "aligned", copy_gbs,
                          3.0 * static_cast<double>(count * es) / (ms * 1e-3) / 1e9});
        }
      }
    }
    std::printf("# reduce kernel vs cudaMemcpyAsync D2D, %s, %zu bytes, %d iterations, grid cap %d x %d\n",
                prop.name, bytes, iters, max_blocks, cuda::kThreadsPerBlock);
    std::printf("%-9s %-4s %-8s %12s %12s %7s\n", "type", "op", "layout", "copy GB/s", "reduce GB/s", "ratio");
    for (const Row& r : rows)
      std::printf("%-9s %-4s %-8s %12.1f %12.1f %7.3f\n", r.type.c_str(), r.op.c_str(), r.layout.c_str(),
                  r.copy_gbs, r.reduce_gbs, r.reduce_gbs / r.copy_gbs);
    if (json != nullptr) {
      if (FILE* f = std::fopen(json, "w")) {
        std::fprintf(f, "{\"device\": \"%s\", \"bytes\": %zu, \"copy_gbs\": %.3f, \"rows\": [", prop.name, bytes, copy_gbs);
        for (std::size_t i = 0; i < rows.size(); ++i)
          std::fprintf(f, "%s{\"type\": \"%s\", \"op\": \"%s\", \"layout\": \"%s\", \"reduce_gbs\": %.3f, \"ratio\": %.4f}",
                       i ? ", " : "", rows[i].type.c_str(), rows[i].op.c_str(), rows[i].layout.c_str(),
                       rows[i].reduce_gbs, rows[i].reduce_gbs / rows[i].copy_gbs);
        std::fprintf(f, "]}\n");
        std::fclose(f);
      }
    }
    cudaFree(dst);
    cudaFree(src);
    cudaStreamDestroy(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reduce_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
