// A runtime-core Engine for tests: n ranks as threads of one process (thread_transport.hpp),
// a host engine (host_engine.hpp: host memory, the host clock and cost model) whose agreement and
// "native" AllReduce go through shared slots and a spinning barrier with a timeout. No heap
// allocation per call once the slots are sized.
#pragma once
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/call_timer.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/host_engine.hpp"
#include "thread_transport.hpp"

namespace stragglar::testing {

// What the ranks of one job share besides the transport: a barrier and one slot per rank.
class ThreadJob {
 public:
  explicit ThreadJob(int n, double timeout_s = 30) : hub(n, timeout_s), slots_(static_cast<std::size_t>(n)) {
    for (auto& slot : slots_) slot.reserve(1 << 20);  // tests' messages fit: no allocation per call
  }
  ThreadHub hub;

  // All n ranks arrive, or Error(Timeout) after the hub's timeout.
  void barrier(int rank) {
    const std::uint64_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == hub.n()) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(gen + 1, std::memory_order_release);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    while (generation_.load(std::memory_order_acquire) == gen) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > hub.timeout_s()) {
        arrived_.fetch_sub(1, std::memory_order_acq_rel);  // leave, so a later barrier is not skewed
        throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank) + ": a peer did not reach the barrier");
      }
      sched_yield();
    }
  }
  std::vector<unsigned char>& slot(int rank) { return slots_[static_cast<std::size_t>(rank)]; }

 private:
  std::atomic<int> arrived_{0};
  std::atomic<std::uint64_t> generation_{0};
  std::vector<std::vector<unsigned char>> slots_;
};

// CpuDevice, counting its allocations (the hot-path test: a known configuration allocates no
// scratch, no kept copy).
class CountingCpuDevice final : public Device {
 public:
  void* allocate(std::size_t bytes) override {
    ++allocations;
    return cpu_.allocate(bytes);
  }
  void deallocate(void* p) noexcept override { cpu_.deallocate(p); }
  void copy(void* d, const void* s, std::size_t b) override { cpu_.copy(d, s, b); }
  void reduce(void* d, const void* s, std::size_t c, DataType t, ReduceOp op) override { cpu_.reduce(d, s, c, t, op); }
  void finish_average(void* b, std::size_t c, DataType t, int n) override { cpu_.finish_average(b, c, t, n); }
  long allocations = 0;

 private:
  CpuDevice cpu_;
};

class ThreadEngine final : public detail::HostEngine<CountingCpuDevice> {
 public:
  ThreadEngine(ThreadJob& job, int rank) : job_(job), rank_(rank), transport_(job.hub, rank) {}
  Transport& transport() override { return transport_; }
  // Threads of one process share a host name: a test may give each its own host.
  std::int64_t host_id() const override { return host >= 0 ? host : Engine::host_id(); }
  std::int64_t host = -1;
  // Threads share the process's clock: a test may give each its own (-1: none known).
  std::int64_t clock_id() const override { return clock != kProcessClock ? clock : Engine::clock_id(); }
  static constexpr std::int64_t kProcessClock = -2;
  std::int64_t clock = kProcessClock;
  int tag() const { return transport_.tag(); }

  void agree_max(std::span<std::int64_t> values, double) override {
    reduce_through_slots(values.data(), values.data(), values.size() * sizeof(std::int64_t),
                         [](void* acc, const void* x, std::size_t bytes) {
                           auto* a = static_cast<std::int64_t*>(acc);
                           const auto* b = static_cast<const std::int64_t*>(x);
                           for (std::size_t i = 0; i < bytes / sizeof(std::int64_t); ++i) a[i] = std::max(a[i], b[i]);
                         });
  }
  // Bounded already (the job's barrier times out): auto's bound needs nothing more.
  void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op,
                        std::optional<NativeBound>, bool keep_buffer) override {
    if (native_calls < static_cast<int>(native_recvbufs.size()))
      native_recvbufs[static_cast<std::size_t>(native_calls)] = recvbuf;
    ++native_calls;
    if (native_keep_told < static_cast<int>(native_keep_buffer.size()))  // no allocation (hot-path tests)
      native_keep_buffer[static_cast<std::size_t>(native_keep_told++)] = keep_buffer ? 1 : 0;
    const ReduceOp base = op == ReduceOp::avg ? ReduceOp::sum : op;
    reduce_through_slots(sendbuf, recvbuf, count * size_of(t), [&](void* acc, const void* x, std::size_t) {
      cpu_reduce(acc, x, count, t, base);
    });
    if (op == ReduceOp::avg) cpu_finish_average(recvbuf, count, t, job_.hub.n());
  }
  int native_calls = 0;
  std::array<const void*, 16> native_recvbufs{};  // where the first native calls wrote
  // What the first native calls were told (Engine::native_allreduce's keep_buffer).
  std::array<int, 16> native_keep_buffer{};
  int native_keep_told = 0;
  // How a failed in-place call leaves the buffer (Engine::buffers_on_error); a test may change it.
  BuffersOnError buffers = BuffersOnError::session_restores;
  BuffersOnError buffers_on_error() const override { return buffers; }
  long device_allocations() const { return device_.allocations; }
  // The host clock; `timer_lag` > 0 delivers times and exchanges that many calls late, as the
  // NCCL engine's timer does (lag 2), so that auto's lag handling is tested on CPUs.
  int timer_lag = 0;
  // Engine::auto_starts_with_native (the NCCL engine's true), for the plumbing's test.
  bool starts_with_native = false;
  bool auto_starts_with_native() const override { return starts_with_native; }
  // A lagged timer or native first stands for the NCCL engine, whose calls arrive on a GPU
  // stream: no arrival tickets there (Engine::arrivals_on_host), as on the engine it stands for.
  bool arrivals_on_host() const override { return timer_lag == 0 && !starts_with_native; }
  std::unique_ptr<detail::CallTimer> make_timer() override {
    return std::make_unique<detail::HostCallTimer>(*this, timer_lag);
  }
  // The largest native staging asked for with a kept buffer (Engine::reserve's native_keeps_buffer).
  std::size_t native_keep_reserved = 0;
  void reserve(std::size_t native_bytes, bool native_keeps_buffer, std::size_t agreement_values) override {
    if (native_keeps_buffer) native_keep_reserved = std::max(native_keep_reserved, native_bytes);
    std::vector<unsigned char>& mine = job_.slot(rank_);  // read by others only inside an agreement
    if (mine.size() < agreement_values * sizeof(std::int64_t)) mine.resize(agreement_values * sizeof(std::int64_t));
  }

 private:
  // Every rank publishes its bytes, then reduces all ranks' in rank order (so every rank
  // computes the same bits).
  template <typename Reduce>
  void reduce_through_slots(const void* in, void* out, std::size_t bytes, Reduce reduce) {
    std::vector<unsigned char>& mine = job_.slot(rank_);
    if (mine.size() < bytes) mine.resize(bytes);  // first use only
    std::memcpy(mine.data(), in, bytes);
    job_.barrier(rank_);
    std::memcpy(out, job_.slot(0).data(), bytes);
    for (int r = 1; r < job_.hub.n(); ++r) reduce(out, job_.slot(r).data(), bytes);
    job_.barrier(rank_);  // nobody overwrites a slot before everyone has read it
  }

  ThreadJob& job_;
  int rank_;
  ThreadTransport transport_;
};

}  // namespace stragglar::testing
