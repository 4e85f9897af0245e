// Micro-benchmark of the reduction kernel (dst += src) against cudaMemcpyAsync D2D.
//
//   bench_reduce_kernels [--bytes N] [--iters I] [--json FILE]
//
// Both are memory bound; bandwidth counts the bytes each moves through DRAM: a copy of N
// bytes reads N and writes N (2N), the reduce reads dst and src and writes dst (3N). "ratio"
// = reduce GB/s / copy GB/s (goal >= 0.80 at every alignment, scripts/gpu-check.sh). Rows: sum
// of every dtype at every alignment class — src's byte offset from dst's inside 16 bytes (the
// vector loop's shift), and dst itself off alignment (the scalar head) — and max aligned. Every
// row's result is checked first, bit for bit against the CPU device, on the first 16 MiB
// (column "check"; a wrong one makes the exit code 1).
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
#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"

using namespace stragglar;

namespace {

struct Row {
  std::string type, op, layout;
  std::size_t dst_offset, src_offset;  // bytes past a 16-byte boundary
  double copy_gbs, reduce_gbs;
  bool correct;
};

// (dst, src) byte offsets for a dtype of `es` bytes: every shift of src against dst, and dst
// off alignment with src aligned alike.
std::vector<std::pair<std::size_t, std::size_t>> layouts(std::size_t es) {
  std::vector<std::pair<std::size_t, std::size_t>> v;
  for (std::size_t s = 0; s < 16; s += es) v.emplace_back(0, s);
  v.emplace_back(es, es);
  return v;
}

// One reduce of `count` elements at these offsets against cpu_reduce, bit for bit (small
// integers and fractions, distinct per element, so a misplaced element shows).
bool check(char* dst, const char* src, std::size_t count, DataType t, ReduceOp op, cudaStream_t s, int max_blocks) {
  const std::size_t es = size_of(t), bytes = count * es;
  std::vector<std::byte> a(bytes), b(bytes), got(bytes);
  for (std::size_t i = 0; i < count; ++i) {
    store_element(a.data(), i, t, static_cast<double>(i % 251) - 100);
    store_element(b.data(), i, t, static_cast<double>((i * 7) % 13) / 4);
  }
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dst, a.data(), bytes, cudaMemcpyHostToDevice, s));
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(const_cast<char*>(src), b.data(), bytes, cudaMemcpyHostToDevice, s));
  cuda::launch_reduce(dst, src, count, t, op, s, max_blocks);
  STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(got.data(), dst, bytes, cudaMemcpyDeviceToHost, s));
  STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(s));
  cpu_reduce(a.data(), b.data(), count, t, op);
  return got == a;
}

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
      const std::size_t es = size_of(t);
      auto one = [&](ReduceOp op, std::size_t doff, std::size_t soff) {
        char* dp = dst + doff;
        const char* sp = src + soff;
        const std::size_t count = bytes / es;
        const bool correct = check(dp, sp, std::min(count, (std::size_t{16} << 20) / es), t, op, s, max_blocks);
        const float ms = time_ms(s, iters, [&] { cuda::launch_reduce(dp, sp, count, t, op, s, max_blocks); });
        const std::string layout = doff == 0 && soff == 0 ? "aligned" : "dst+" + std::to_string(doff) + " src+" + std::to_string(soff);
        rows.push_back({to_string(t), to_string(op), layout, doff, soff, copy_gbs,
                        3.0 * static_cast<double>(count * es) / (ms * 1e-3) / 1e9, correct});
      };
      for (auto [doff, soff] : layouts(es)) one(ReduceOp::sum, doff, soff);
      one(ReduceOp::max, 0, 0);
    }
    std::printf("# reduce kernel vs cudaMemcpyAsync D2D, %s, %zu bytes, %d iterations, grid cap %d x %d\n",
                prop.name, bytes, iters, max_blocks, cuda::kThreadsPerBlock);
    std::printf("%-9s %-4s %-15s %12s %12s %7s %6s\n", "type", "op", "layout", "copy GB/s", "reduce GB/s", "ratio",
                "check");
    for (const Row& r : rows)
      std::printf("%-9s %-4s %-15s %12.1f %12.1f %7.3f %6s\n", r.type.c_str(), r.op.c_str(), r.layout.c_str(),
                  r.copy_gbs, r.reduce_gbs, r.reduce_gbs / r.copy_gbs, r.correct ? "ok" : "WRONG");
    if (json != nullptr) {
      if (FILE* f = std::fopen(json, "w")) {
        std::fprintf(f, "{\"device\": \"%s\", \"bytes\": %zu, \"copy_gbs\": %.3f, \"rows\": [", prop.name, bytes, copy_gbs);
        for (std::size_t i = 0; i < rows.size(); ++i)
          std::fprintf(f,
                       "%s{\"type\": \"%s\", \"op\": \"%s\", \"layout\": \"%s\", \"dst_offset\": %zu, "
                       "\"src_offset\": %zu, \"reduce_gbs\": %.3f, \"ratio\": %.4f, \"correct\": %s}",
                       i ? ", " : "", rows[i].type.c_str(), rows[i].op.c_str(), rows[i].layout.c_str(),
                       rows[i].dst_offset, rows[i].src_offset, rows[i].reduce_gbs, rows[i].reduce_gbs / rows[i].copy_gbs,
                       rows[i].correct ? "true" : "false");
        std::fprintf(f, "]}\n");
        std::fclose(f);
      }
    }
    cudaFree(dst);
    cudaFree(src);
    cudaStreamDestroy(s);
    for (const Row& r : rows)
      if (!r.correct) {
        std::fprintf(stderr, "bench_reduce_kernels: %s %s %s: wrong result\n", r.type.c_str(), r.op.c_str(),
                     r.layout.c_str());
        return 1;
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reduce_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
