// The bounded GPU resources of auto's NCCL timers (nccl_timer_pool.hpp).
#include "nccl_timer_pool.hpp"

#include <algorithm>

#include "cuda_check.hpp"
#include "nccl_call_timer.hpp"

namespace stragglar::detail {
namespace {

void free_set(NcclTimerResources& r) noexcept {
  for (int i = 0; i < NcclTimerResources::kTimers; ++i) {
    if (r.starts[i] != nullptr) (void)cudaEventDestroy(r.starts[i]);
    if (r.ends[i] != nullptr) (void)cudaEventDestroy(r.ends[i]);
  }
  if (r.exchanged != nullptr) (void)cudaEventDestroy(r.exchanged);
  if (r.xhost != nullptr) (void)cudaFreeHost(r.xhost);
  if (r.xdev != nullptr) (void)cudaFree(r.xdev);
  r = NcclTimerResources{};
}

// Every event, and exchange buffers for `values` (a recycled set with less room gets new ones).
void fill_set(NcclTimerResources& r, std::size_t values) {
  for (int i = 0; i < NcclTimerResources::kTimers; ++i)
    if (r.starts[i] == nullptr) {
      STRAGGLAR_CUDA_CHECK(cudaEventCreate(&r.starts[i]));
      STRAGGLAR_CUDA_CHECK(cudaEventCreate(&r.ends[i]));
    }
  if (r.exchanged == nullptr) STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&r.exchanged, cudaEventDisableTiming));
  if (values > r.xcapacity) {
    if (r.xhost != nullptr) STRAGGLAR_CUDA_CHECK(cudaFreeHost(r.xhost));
    if (r.xdev != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(r.xdev));
    r.xhost = r.xdev = nullptr;
    r.xcapacity = 0;
    const std::size_t bytes = values * sizeof(std::int64_t);
    STRAGGLAR_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&r.xhost), bytes));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&r.xdev), bytes));
    r.xcapacity = values;
  }
}

}  // namespace

NcclTimerPool::~NcclTimerPool() {
  if (leak_) {
    for (auto& r : free_) (void)r.release();
    return;
  }
  for (auto& r : free_) free_set(*r);
}

std::unique_ptr<NcclTimerResources> NcclTimerPool::take(NcclCallTimer* timer, std::size_t values) {
  // Park the least recently used holders first: their sets are then the ones recycled.
  while (holders_.size() >= kMaxHolders) holders_.back()->park();  // park() gives its set back
  std::unique_ptr<NcclTimerResources> r;
  if (!free_.empty()) {
    r = std::move(free_.back());
    free_.pop_back();
  } else {
    r = std::make_unique<NcclTimerResources>();
  }
  try {
    fill_set(*r, values);
  } catch (...) {
    free_.push_back(std::move(r));  // whatever it holds is valid: recycled later
    throw;
  }
  holders_.push_front(timer);
  return r;
}

void NcclTimerPool::used(NcclCallTimer* timer) noexcept {
  auto it = std::find(holders_.begin(), holders_.end(), timer);
  if (it != holders_.end()) holders_.splice(holders_.begin(), holders_, it);
}

void NcclTimerPool::give_back(NcclCallTimer* timer, std::unique_ptr<NcclTimerResources> set) noexcept {
  holders_.remove(timer);
  if (set != nullptr) free_.push_back(std::move(set));
}

}  // namespace stragglar::detail
