// auto's per-call side of the session (src/runtime/auto_call.*) over the thread engine: where
// native's warm-ups run at a configuration's first call, that every rank runs the same number of
// them even when one rank cannot get their memory, and that an engine needing none runs none.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/session.hpp"
#include "thread_engine.hpp"

namespace stragglar {
namespace {

using testing::ThreadEngine;
using testing::ThreadJob;

// The thread engine's device, refusing allocations of exactly `refuse_bytes` (the warm-up
// memory's size: the message's) when armed.
class RefusingDevice final : public Device {
 public:
  explicit RefusingDevice(Device& inner) : inner_(inner) {}
  void* allocate(std::size_t bytes) override {
    if (refuse_bytes != 0 && bytes == refuse_bytes) {
      ++refused;
      throw Error(ErrorCode::SystemError, "RefusingDevice: no memory for " + std::to_string(bytes) + " bytes");
    }
    return inner_.allocate(bytes);
  }
  void deallocate(void* p) noexcept override { inner_.deallocate(p); }
  void copy(void* d, const void* s, std::size_t b) override { inner_.copy(d, s, b); }
  void reduce(void* d, const void* s, std::size_t c, DataType t, ReduceOp op) override { inner_.reduce(d, s, c, t, op); }
  void finish_average(void* b, std::size_t c, DataType t, int n) override { inner_.finish_average(b, c, t, n); }
  std::size_t refuse_bytes = 0;
  int refused = 0;

 private:
  Device& inner_;
};

// The thread engine with that device, and a buffer that is undefined after an error (as NCCL's):
// no kept copy, so an auto configuration called in place warms native up on memory of its own.
class NoKeptCopyEngine final : public detail::Engine {
 public:
  explicit NoKeptCopyEngine(ThreadEngine& inner) : inner_(inner), device_(inner.device()) {}
  Transport& transport() override { return inner_.transport(); }
  Device& device() override { return device_; }
  void agree_max(std::span<std::int64_t> values, double timeout_s) override { inner_.agree_max(values, timeout_s); }
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op,
                        std::optional<NativeBound> bound, bool keep_buffer) override {
    inner_.native_allreduce(sendbuf, recvbuf, count, t, op, bound, keep_buffer);
  }
  std::unique_ptr<detail::CallTimer> make_timer() override { return std::make_unique<detail::HostCallTimer>(*this); }
  void reserve(std::size_t native_bytes, bool native_keeps_buffer, std::size_t agreement_values) override {
    inner_.reserve(native_bytes, native_keeps_buffer, agreement_values);
  }
  CostModel auto_cost_model() const override { return inner_.auto_cost_model(); }
  BuffersOnError buffers_on_error() const override { return BuffersOnError::undefined; }
  int native_warm_ups() const override { return warm_ups; }
  std::int64_t host_id() const override { return inner_.host_id(); }
  std::int64_t clock_id() const override { return inner_.clock_id(); }
  RefusingDevice& refusing_device() { return device_; }
  int warm_ups = 2;

 private:
  ThreadEngine& inner_;
  RefusingDevice device_;
};

// What one rank saw in its first auto call.
struct Seen {
  std::string error;
  int native_calls = 0;
  std::array<const void*, 16> wrote{};  // where each native call wrote
  const void* sendbuf = nullptr;
  const void* recvbuf = nullptr;
  std::vector<float> result, input_after;
  int refused = 0;
};

// n ranks as threads, each making one auto call of `count` floats (rank r contributes r + 1).
// `refusing_rank` (>= 0) cannot allocate the warm-up memory; -2: no rank can. `warm_ups`: the
// engine's Engine::native_warm_ups.
std::vector<Seen> first_auto_call(int n, std::size_t count, const std::function<bool(int rank)>& in_place_on,
                                  int refusing_rank = -1, int warm_ups = 2) {
  ThreadJob job(n, 20);
  std::vector<Seen> seen(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadEngine inner(job, r);
      NoKeptCopyEngine engine(inner);
      if (r == refusing_rank || refusing_rank == -2) engine.refusing_device().refuse_bytes = count * sizeof(float);
      engine.warm_ups = warm_ups;
      Seen& mine = seen[static_cast<std::size_t>(r)];
      const bool in_place = in_place_on(r);
      std::vector<float> send(count, static_cast<float>(r + 1)), recv(count, in_place ? static_cast<float>(r + 1) : 0.0f);
      const float* input = in_place ? recv.data() : send.data();
      mine.sendbuf = input;
      mine.recvbuf = recv.data();
      try {
        detail::Session session(engine, "test");
        Options o;  // algorithm auto
        session.allreduce(input, recv.data(), count, DataType::float32, ReduceOp::sum, o);
      } catch (const Error& e) {
        mine.error = std::string(to_string(e.code())) + ": " + e.what();
      }
      mine.native_calls = inner.native_calls;
      mine.wrote = inner.native_recvbufs;
      mine.result = recv;
      mine.input_after = send;
      mine.refused = engine.refusing_device().refused;
    });
  for (auto& t : threads) t.join();
  return seen;
}

float sum_of_ranks(int n) { return static_cast<float>(n * (n + 1) / 2); }

TEST(AutoCall, InPlaceWithoutAKeptCopyWarmsNativeUpOnMemoryOfItsOwn) {
  const int n = 4;
  const std::size_t count = (1 << 16) + 7;
  const std::vector<Seen> seen = first_auto_call(n, count, [](int) { return true; });
  for (int r = 0; r < n; ++r) {
    const Seen& mine = seen[static_cast<std::size_t>(r)];
    EXPECT_EQ(mine.error, "") << "rank " << r;
    ASSERT_EQ(mine.native_calls, 3) << "rank " << r << ": two warm-ups and the measured call";
    EXPECT_NE(mine.wrote[0], mine.recvbuf) << "rank " << r << ": a warm-up wrote the caller's buffer";
    EXPECT_EQ(mine.wrote[1], mine.wrote[0]) << "rank " << r << ": both on the warm-up memory";
    EXPECT_EQ(mine.wrote[2], mine.recvbuf) << "rank " << r;
    EXPECT_EQ(mine.result, std::vector<float>(count, sum_of_ranks(n))) << "rank " << r << ": reduced once";
  }
}

TEST(AutoCall, OutOfPlaceWarmsNativeUpOnTheCallsOwnOutput) {
  // recvbuf is an output the measured call writes anyway: the warm-up runs the measured call's
  // shape there, needs no memory and leaves sendbuf as it was.
  const int n = 4;
  const std::size_t count = (1 << 16) + 7;
  const std::vector<Seen> seen = first_auto_call(n, count, [](int) { return false; });
  for (int r = 0; r < n; ++r) {
    const Seen& mine = seen[static_cast<std::size_t>(r)];
    EXPECT_EQ(mine.error, "") << "rank " << r;
    ASSERT_EQ(mine.native_calls, 3) << "rank " << r << ": two warm-ups and the measured call";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(mine.wrote[static_cast<std::size_t>(i)], mine.recvbuf) << "rank " << r;
    EXPECT_EQ(mine.result, std::vector<float>(count, sum_of_ranks(n))) << "rank " << r;
    EXPECT_EQ(mine.input_after, std::vector<float>(count, static_cast<float>(r + 1))) << "rank " << r;
    EXPECT_EQ(mine.refused, 0) << "rank " << r;
  }
}

TEST(AutoCall, ARankWithoutWarmUpMemorySkipsTheWarmUpsOnEveryRank) {
  // One rank cannot allocate the warm-up memory (a GPU near full): had it alone skipped the
  // warm-ups, its measured native would pair with its peers' warm-up and every later collective
  // would be one off. The agreement of the configuration carries it: no rank warms up.
  for (int refusing = 0; refusing < 4; ++refusing) {
    const int n = 4;
    const std::size_t count = (1 << 16) + 7;
    const std::vector<Seen> seen = first_auto_call(n, count, [](int) { return true; }, refusing);
    for (int r = 0; r < n; ++r) {
      const Seen& mine = seen[static_cast<std::size_t>(r)];
      EXPECT_EQ(mine.error, "") << "rank " << r << ", rank " << refusing << " refusing";
      EXPECT_EQ(mine.refused, r == refusing ? 1 : 0) << "rank " << r << ": the refusal was injected";
      EXPECT_EQ(mine.native_calls, 1) << "rank " << r << ", rank " << refusing << " refusing: no warm-up anywhere";
      EXPECT_EQ(mine.result, std::vector<float>(count, sum_of_ranks(n))) << "rank " << r;
    }
  }
}

TEST(AutoCall, RanksThatNeedNoWarmUpMemorySkipTheWarmUpsTooWhenAPeerHasNone) {
  // Ranks called out of place warm up on their own recvbuf, which they always have; a rank in
  // place without it is refused: they must skip the warm-ups as well.
  const int n = 4, refusing = 2;
  const std::size_t count = (1 << 16) + 7;
  const std::vector<Seen> seen = first_auto_call(n, count, [](int r) { return r >= 2; }, refusing);
  for (int r = 0; r < n; ++r) {
    const Seen& mine = seen[static_cast<std::size_t>(r)];
    EXPECT_EQ(mine.error, "") << "rank " << r;
    EXPECT_EQ(mine.refused, r == refusing ? 1 : 0) << "rank " << r;
    EXPECT_EQ(mine.native_calls, 1) << "rank " << r << ": no warm-up anywhere";
    EXPECT_EQ(mine.result, std::vector<float>(count, sum_of_ranks(n))) << "rank " << r;
  }
}

TEST(AutoCall, AnEngineThatNeedsNoWarmUpsRunsNativeOnceAndMakesNoMemoryForThem) {
  // The MPI engine readies its native's first-use costs when the configuration is made
  // (Engine::native_warm_ups 0): the first call measures native's first run, and no rank asks
  // for warm-up memory (every rank would refuse it here).
  const int n = 4;
  const std::size_t count = (1 << 16) + 7;
  const std::vector<Seen> seen = first_auto_call(n, count, [](int) { return true; }, /*refusing_rank=*/-2, /*warm_ups=*/0);
  for (int r = 0; r < n; ++r) {
    const Seen& mine = seen[static_cast<std::size_t>(r)];
    EXPECT_EQ(mine.error, "") << "rank " << r;
    EXPECT_EQ(mine.refused, 0) << "rank " << r << ": warm-up memory was asked for";
    ASSERT_EQ(mine.native_calls, 1) << "rank " << r << ": the measured call alone";
    EXPECT_EQ(mine.wrote[0], mine.recvbuf) << "rank " << r;
    EXPECT_EQ(mine.result, std::vector<float>(count, sum_of_ranks(n))) << "rank " << r;
  }
}

}  // namespace
}  // namespace stragglar
