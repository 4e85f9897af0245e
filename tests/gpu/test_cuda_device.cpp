// CudaDevice (reduce kernels, finish_average, copy) against a host reference, one process.
// Every dtype × op, counts around the vector width and one that reaches the unrolled vector
// loop, and every pair of element offsets of dst and src inside a 16-byte line (the scalar head,
// aligned and shifted source vectors, the tail), bit for bit; raw bit
// patterns (NaN payloads, ±0, ±inf, subnormals) give the CPU device's bits (one numeric rule).
// No GPU: GTEST_SKIP with "no CUDA device: skipped"; any other CUDA error fails. Inputs and
// results move with cudaMemcpyAsync on the device's non-blocking stream.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_device.hpp"
#include "cuda_presence.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"

using namespace stragglar;

namespace {

// Skip only without a GPU; any other CUDA error fails (cuda_presence.hpp).
#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    const gpu_test::CudaPresence gpu_ = gpu_test::cuda_presence();                                 \
    if (gpu_.kind == gpu_test::CudaPresence::absent) GTEST_SKIP() << "no CUDA device: skipped (" << gpu_.detail << ")"; \
    ASSERT_EQ(gpu_.kind, gpu_test::CudaPresence::present) << gpu_.detail;                          \
  } while (0)

double load(const std::vector<std::byte>& b, std::size_t i, DataType t) { return load_element(b.data(), i, t); }
void store(std::vector<std::byte>& b, std::size_t i, DataType t, double v) { store_element(b.data(), i, t, v); }

// One rounding of the exact double result to the dtype: what the kernel must produce bit for
// bit (half/bf16 go through float; double rounding is innocuous for + and ×).
double apply(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum: case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return 0;
}

class CudaDeviceTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(CudaDeviceTest, ReduceMatchesHostAtEveryAlignment) {
  SKIP_WITHOUT_GPU();
  const auto [t, op] = GetParam();
  const std::size_t es = size_of(t);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  CudaDevice dev(s);
  // The largest count reaches the kernel's 4-way unrolled vector loop for every type: about
  // 2000 vectors make one block whose first ~470 threads run it once (3 × 512 < 2000 ≤ 4 × 512)
  // and the rest the one-vector loop; 13 more elements leave a scalar tail at every offset.
  const std::size_t unrolled = 2000 * (16 / es) + 13;
  const std::size_t max_count = unrolled, pad = 16;  // bytes of offset room
  auto* dbuf = static_cast<std::byte*>(dev.allocate(max_count * es + pad));
  auto* sbuf = static_cast<std::byte*>(dev.allocate(max_count * es + pad));
  std::mt19937 rng(7);
  for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{17}, std::size_t{4099}, unrolled}) {
    // Every pair of element offsets inside a 16-byte line: 16/es × 16/es pairs (dst's offset
    // sets the scalar head; src's, relative to it, the shift of the vector loop's loads).
    for (std::size_t doff = 0; doff < pad / es; ++doff) {
      for (std::size_t soff = 0; soff < pad / es; ++soff) {
        std::vector<std::byte> a(count * es), b(count * es), want(count * es), got(count * es);
        for (std::size_t i = 0; i < count; ++i) {
          // Small integers (exact in every dtype) for prod; signed values otherwise.
          const double x = op == ReduceOp::prod ? static_cast<double>(rng() % 3) : static_cast<double>(static_cast<int>(rng() % 200) - 100) / (t == DataType::int32 || t == DataType::int64 ? 1 : 8);
          const double y = op == ReduceOp::prod ? static_cast<double>(rng() % 3) : static_cast<double>(static_cast<int>(rng() % 200) - 100) / (t == DataType::int32 || t == DataType::int64 ? 1 : 8);
          store(a, i, t, x);
          store(b, i, t, y);
          store(want, i, t, apply(op, load(a, i, t), load(b, i, t)));
        }
        // Everything on the device's stream, in order (no legacy-stream copies).
        ASSERT_EQ(cudaMemcpyAsync(dbuf + doff * es, a.data(), a.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(sbuf + soff * es, b.data(), b.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
        dev.reduce(dbuf + doff * es, sbuf + soff * es, count, t, op);
        ASSERT_EQ(cudaMemcpyAsync(got.data(), dbuf + doff * es, got.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(std::memcmp(got.data() + i * es, want.data() + i * es, es), 0)
              << to_string(t) << " " << to_string(op) << " count " << count << " offsets " << doff << "/"
              << soff << " element " << i << ": " << load(got, i, t) << " vs " << load(want, i, t);
      }
    }
  }
  dev.deallocate(dbuf);
  dev.deallocate(sbuf);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, CudaDeviceTest,
    ::testing::Combine(::testing::Values(DataType::float32, DataType::float64, DataType::float16,
                                         DataType::bfloat16, DataType::int32, DataType::int64),
                       ::testing::Values(ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max)),
    [](const ::testing::TestParamInfo<CudaDeviceTest::ParamType>& p) {
      return std::string(to_string(std::get<0>(p.param))) + "_" + to_string(std::get<1>(p.param));
    });

// The numeric rule (runtime/numeric_rule.hpp) on the GPU is the CPU device's, bit for bit: raw
// bit patterns — every NaN payload and sign, ±0, ±inf, subnormals, integers at their limits —
// through every op, and the avg division, compared with cpu_reduce / cpu_finish_average.
TEST(CudaDevice, SpecialValuesGiveTheCpuDevicesBits) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  CudaDevice dev(s);
  std::mt19937_64 rng(11);
  for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16, DataType::int32,
                     DataType::int64}) {
    const std::size_t es = size_of(t), count = 4096, bytes = count * es;
    // Half the elements random bits; the other half drawn from a list of special values.
    std::vector<std::byte> a(bytes), b(bytes);
    const std::vector<double> special = {std::nan(""), -std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0,
                                         1e-40, -1e-310, 65504.0, 3.0e38};
    for (std::size_t i = 0; i < count; ++i) {
      for (std::vector<std::byte>* v : {&a, &b}) {
        if (rng() % 2) {
          const std::uint64_t r = rng();
          std::memcpy(v->data() + i * es, &r, es);
        } else {
          store(*v, i, t, special[rng() % special.size()]);
        }
      }
    }
    void* d = dev.allocate(bytes);
    void* src = dev.allocate(bytes);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
      std::vector<std::byte> want = a, got(bytes);
      cpu_reduce(want.data(), b.data(), count, t, op);
      if (op == ReduceOp::avg) cpu_finish_average(want.data(), count, t, 3);
      ASSERT_EQ(cudaMemcpyAsync(d, a.data(), bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(src, b.data(), bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
      dev.reduce(d, src, count, t, op);
      if (op == ReduceOp::avg) dev.finish_average(d, count, t, 3);
      ASSERT_EQ(cudaMemcpyAsync(got.data(), d, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      for (std::size_t i = 0; i < count; ++i) {
        std::uint64_t g = 0, w = 0, x = 0, y = 0;
        std::memcpy(&g, got.data() + i * es, es);
        std::memcpy(&w, want.data() + i * es, es);
        std::memcpy(&x, a.data() + i * es, es);
        std::memcpy(&y, b.data() + i * es, es);
        ASSERT_EQ(g, w) << to_string(t) << " " << to_string(op) << " element " << i << std::hex << ": 0x" << x
                        << " op 0x" << y << " gave 0x" << g << " on the GPU, 0x" << w << " on the CPU";
      }
    }
    dev.deallocate(d);
    dev.deallocate(src);
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
}

TEST(CudaDevice, FinishAverageDividesLikeNccl) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  CudaDevice dev(s);
  for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16,
                     DataType::int32, DataType::int64}) {
    const std::size_t count = 1000, es = size_of(t);
    std::vector<std::byte> h(count * es), want(count * es), got(count * es);
    for (std::size_t i = 0; i < count; ++i) {
      store(h, i, t, static_cast<double>(i % 50) - 20);
      const double v = load(h, i, t) / 3.0;
      store(want, i, t, (t == DataType::int32 || t == DataType::int64) ? std::trunc(v) : v);
    }
    void* d = dev.allocate(count * es);
    ASSERT_EQ(cudaMemcpyAsync(d, h.data(), h.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
    dev.finish_average(d, count, t, 3);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), d, got.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    dev.deallocate(d);
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(std::memcmp(got.data() + i * es, want.data() + i * es, es), 0)
          << to_string(t) << " element " << i << ": " << load(got, i, t) << " vs " << load(want, i, t);
  }
  cudaStreamDestroy(s);
}

TEST(CudaDevice, CopyIsStreamOrdered) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  CudaDevice dev(s);
  std::vector<int> h(1 << 20), back(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<int>(i * 31);
  void* a = dev.allocate(h.size() * 4);
  void* b = dev.allocate(h.size() * 4);
  ASSERT_EQ(cudaMemcpyAsync(a, h.data(), h.size() * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
  dev.copy(b, a, h.size() * 4);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), b, h.size() * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(h, back);
  dev.deallocate(a);
  dev.deallocate(b);
  cudaStreamDestroy(s);
}

}  // namespace
