// A host engine's timer for auto (call_timer.hpp).
#include "runtime/call_timer.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>

#include "runtime/engine.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HostCallTimer::HostCallTimer(Engine& engine, int lag) : engine_(engine), lag_(lag) {
  if (lag < 0 || lag > kMaxLag)
    throw Error(ErrorCode::Internal, "HostCallTimer: lag " + std::to_string(lag) + ", expected 0 to " +
                                         std::to_string(kMaxLag));
}

HostCallTimer::HostCallTimer(Engine& engine, std::unique_ptr<SplitAllgather> split)
    : engine_(engine), lag_(0), split_(std::move(split)) {
  if (!split_) throw Error(ErrorCode::Internal, "HostCallTimer: a null SplitAllgather");
}

void HostCallTimer::reserve_exchange(std::size_t values) {
  if (split_) {
    split_->reserve(values);
    return;
  }
  exchanged_.reserve(values);
  engine_.reserve(/*native_bytes=*/0, /*native_keeps_buffer=*/false, /*agreement_values=*/values);  // the exchange is an agreement
}

void HostCallTimer::time_begin() {
  if (times_ == static_cast<int>(std::size(timed_)))
    throw Error(ErrorCode::Internal, "HostCallTimer: more timed calls than measurement_lag() allows");
  timed_[times_].start_ns = now_ns();
}

void HostCallTimer::time_end() {
  Timed& t = timed_[times_++];
  t.ns = now_ns() - t.start_ns;
}

CallTime HostCallTimer::take_time(double) {
  if (times_ == 0) throw Error(ErrorCode::Internal, "HostCallTimer: no timed call to take");
  const CallTime t{static_cast<double>(timed_[0].ns) * 1e-9, timed_[0].start_ns};
  std::copy(timed_ + 1, timed_ + times_, timed_);
  --times_;
  return t;
}

void HostCallTimer::exchange_begin(std::span<std::int64_t> values, double timeout_s) {
  if (split_) {
    split_->begin(values);
    return;
  }
  engine_.agree_max(values, timeout_s);
  exchanged_.assign(values.begin(), values.end());
}

void HostCallTimer::exchange_end(std::span<std::int64_t> values, double timeout_s) {
  if (split_) {
    split_->end(values, timeout_s);
    return;
  }
  std::copy(exchanged_.begin(), exchanged_.end(), values.begin());
}

}  // namespace stragglar::detail
