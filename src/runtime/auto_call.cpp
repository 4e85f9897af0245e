// algorithm = auto: the session's side of one call (auto_call.hpp).
#include "runtime/auto_call.hpp"

#include <new>

#include "plan/plan_cache.hpp"
#include "runtime/session.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"

namespace stragglar::detail {

bool WarmUpMemory::allocate(Device& device, std::size_t bytes) {
  release();
  try {
    memory_ = device.allocate(bytes);
  } catch (const Error&) {
    return false;
  } catch (const std::bad_alloc&) {
    return false;
  }
  device_ = &device;
  bytes_ = bytes;
  return true;
}

void WarmUpMemory::release() noexcept {
  if (memory_) device_->deallocate(memory_);
  memory_ = nullptr;
  bytes_ = 0;
}

std::shared_ptr<const Plan> AutoCall::plan(const Choice& c, const Options& base, std::size_t count, DataType dtype) {
  const AlgorithmInfo& info = algorithm_info(c.algorithm);
  if (info.kind != AlgorithmKind::schedule) return nullptr;
  Options x = base;
  x.algorithm = c.algorithm;
  x.straggler = c.straggler;
  x.stragglers.assign(c.late.begin(), c.late.end());  // stragglar-k / hierarchical: the learned set
  const std::size_t bytes = count * size_of(dtype);
  const ScheduleKey key{c.algorithm, s_.nranks_, info.uses_straggler && c.late.empty() ? c.straggler : -1,
                        resolve_pipeline(x, s_.nranks_, bytes), x.stragglers};
  std::shared_ptr<const Plan> plan = cached_plan(key, s_.rank_, s_.config_.verify);
  s_.ensure_scratch(Executor::scratch_bytes(*plan, count, dtype));
  return plan;
}

void AutoCall::run(const Choice& c, const Plan* plan) {
  s_.run(c.algorithm, plan, tag_, sendbuf_, recvbuf_, count_, dtype_, op_, PhaseSelection::all, /*bounded=*/true);
}

void AutoCall::warm_up_native(int runs) {
  if (trace_) trace_->mark("auto's pick");
  // Agreed with the configuration: every rank has memory for them, or no rank warms up.
  if (s_.nranks_ < 2 || count_ == 0 || runs <= 0 || !s_.warm_ups_agreed_) return;
  const std::size_t bytes = count_ * size_of(dtype_);
  Device& device = s_.engine_.device();
  // The measured call's shape, on memory the caller does not read afterwards: out of place, the
  // call's own recvbuf (an output the measured call writes anyway); in place, from the caller's
  // buffer (only read) into the session's kept copy (unused until this call's run fills it);
  // else into the warm-up memory agreed with the configuration (in place on a copy of the input).
  const bool out_of_place = sendbuf_ != recvbuf_;
  void* const kept = s_.kept_size_ >= bytes && s_.session_keeps_copy(/*native=*/false) ? s_.kept_ : nullptr;
  void* const own = s_.warm_up_.get();
  void* const target = out_of_place ? recvbuf_ : kept ? kept : own;
  if (target == nullptr) return;  // (not reached: own memory is agreed)
  const void* const source = out_of_place || kept ? sendbuf_ : target;
  try {
    for (int i = 0; i < runs; ++i) {
      if (source == target) device.copy(target, sendbuf_, bytes);  // the caller's values: no overflow of its own
      s_.engine_.native_allreduce(source, target, count_, dtype_, op_, Engine::NativeBound{s_.timeout_s_, tag_},
                                  /*keep_buffer=*/false);
      if (trace_) trace_->mark("native warm-up");
    }
  } catch (...) {
    // A native that timed out may still write its target: the session's memory is left to it.
    if (target == own) s_.warm_up_.abandon();
    if (target == kept) s_.abandon_kept();
    throw;
  }
  s_.warm_up_.release();
}

}  // namespace stragglar::detail
