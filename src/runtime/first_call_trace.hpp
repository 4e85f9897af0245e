// The steps of a configuration's first call, timed under STRAGGLAR_DEBUG=TRACE and printed on a
// communicator's rank 0 (docs/runtime.md "First-call costs"). Off, it reads no clock and keeps
// nothing: a first call pays one branch per step.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace stragglar::detail {

class FirstCallTrace {
 public:
  explicit FirstCallTrace(bool on) : on_(on) {
    if (on_) start_ = last_ = Clock::now();
  }
  bool on() const noexcept { return on_; }
  // Ends step `name` (a string literal): the time since the previous mark.
  void mark(const char* name) {
    if (!on_ || steps_ == kMaxSteps) return;
    const Clock::time_point now = Clock::now();
    names_[steps_] = name;
    ms_[steps_++] = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }
  // "hosts 1.20 ms, validate 0.01 ms, …; total 12.3 ms".
  std::string text() const {
    std::string s;
    char ms[32];
    for (std::size_t i = 0; i < steps_; ++i) {
      std::snprintf(ms, sizeof ms, " %.2f ms", ms_[i]);
      s += (i ? ", " : "") + std::string(names_[i]) + ms;
    }
    std::snprintf(ms, sizeof ms, "; total %.2f ms", std::chrono::duration<double, std::milli>(last_ - start_).count());
    return s + ms;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxSteps = 16;
  bool on_;
  Clock::time_point start_{}, last_{};
  std::array<const char*, kMaxSteps> names_{};
  std::array<double, kMaxSteps> ms_{};
  std::size_t steps_ = 0;
};

}  // namespace stragglar::detail
