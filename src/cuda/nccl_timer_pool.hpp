// The GPU resources of auto's NCCL timers (NcclCallTimer), bounded per communicator: a program
// that calls with many message sizes (the preload under a framework, DDP buckets) makes one
// auto configuration, hence one timer, per size; only the kMaxHolders most recently used timers
// hold events and exchange buffers. The least recently used one beyond that parks: it waits for
// its timed calls and its exchange (older than the call at hand), keeps their results on the
// host and hands its set back. Sets are recycled, never freed before the engine goes, so no
// cudaFree (which would synchronise the device) runs on a call's path.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

namespace stragglar::detail {

class NcclCallTimer;

// One timer's events and the exchange's pinned and device buffers.
struct NcclTimerResources {
  static constexpr int kTimers = 8;  // timed calls not taken yet (a ring)
  cudaEvent_t starts[kTimers] = {};
  cudaEvent_t ends[kTimers] = {};
  cudaEvent_t exchanged = nullptr;
  std::int64_t* xhost = nullptr;  // pinned
  std::int64_t* xdev = nullptr;
  std::size_t xcapacity = 0;  // values
};

class NcclTimerPool {
 public:
  static constexpr std::size_t kMaxHolders = 16;

  NcclTimerPool() { free_.reserve(kMaxHolders); }  // give_back never allocates
  // Frees every set handed back, unless leak() was called.
  ~NcclTimerPool();
  NcclTimerPool(const NcclTimerPool&) = delete;
  NcclTimerPool& operator=(const NcclTimerPool&) = delete;

  // A set for `timer` with room for `values` exchanged values (a recycled one when there is one;
  // on the communicator's device, current here), `timer` the most recently used holder; the least
  // recently used holder beyond kMaxHolders parks first (NcclCallTimer::park, which may throw).
  std::unique_ptr<NcclTimerResources> take(NcclCallTimer* timer, std::size_t values);
  // `timer`, a holder, was used: the most recent one.
  void used(NcclCallTimer* timer) noexcept;
  // `timer` no longer holds a set: `set` is recycled (null: kept by the timer, its GPU work
  // unfinished, and never touched again).
  void give_back(NcclCallTimer* timer, std::unique_ptr<NcclTimerResources> set) noexcept;
  // The engine's GPU work may never finish: nothing is freed at destruction.
  void leak() noexcept { leak_ = true; }

 private:
  std::list<NcclCallTimer*> holders_;  // most recently used first
  std::vector<std::unique_ptr<NcclTimerResources>> free_;
  bool leak_ = false;
};

}  // namespace stragglar::detail
