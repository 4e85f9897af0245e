// auto's first stage: the calls begun, their times recorded, and the exchange of a window of them
// (docs/auto.md "Words" and "The exchange"). Every rank fills its slots of one int64 array, the
// engine takes the element-wise max over ranks (an allgather), and every rank reads every rank's
// times of the window, checked against a digest of what each call ran.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/auto/policy_config.hpp"

namespace stragglar::detail::auto_policy {

// One begun call: what ran and, once recorded, this rank's times.
struct CallRecord {
  int candidate = 0;
  Algorithm algorithm = Algorithm::ring;
  int straggler = -1;
  int set = -1;                // index of the late set it was told, -1: none
  std::span<const int> late;   // that set
  std::int64_t ns = -1;        // in-call time, -1 until recorded
  std::int64_t entry_ns = -1;  // shared_clock: its entry on that clock
};

class WindowExchange {
 public:
  // Throws Error(InvalidUsage) naming a bad exchange_every or settled_exchange_every.
  explicit WindowExchange(const PolicyConfig& config);

  std::int64_t begun() const noexcept { return begun_; }
  std::int64_t recorded() const noexcept { return recorded_; }
  std::int64_t filled() const noexcept { return filled_; }
  std::int64_t decided() const noexcept { return decided_; }
  int window_calls() const noexcept { return window_; }
  int slots_per_rank() const noexcept { return slots_; }
  int exchange_size() const noexcept { return nranks_ * slots_; }

  void begin(const CallRecord& call);  // the next call: grows the ring when a lag grew
  void record(double seconds_in_call, std::int64_t entry_ns);
  bool due() const noexcept { return recorded_ - filled_ >= window_; }
  void fill(std::span<std::int64_t> all, int rank);
  // The oldest filled window, every rank's contribution checked: the in-call times (slot j of
  // rank r at r * slots_per_rank() + j), made exact first on a shared clock. Throws as
  // StragglerPolicy::decide documents; `decisions` names the exchange in the message.
  std::span<const std::int64_t> open(std::span<const std::int64_t> all, std::int64_t decisions);
  const CallRecord& call(std::int64_t index) const { return ring_[ring_index(index)]; }
  // The window's calls are decided. `quiet`: the decision changed and planned nothing; after P
  // quiet calls in a row the next window is the settled one, after any other the converging one.
  void close(bool quiet);

 private:
  std::size_t ring_index(std::int64_t call) const { return static_cast<std::size_t>(call) & (ring_.size() - 1); }
  std::uint64_t digest(std::int64_t first_call) const;
  void check(std::span<const std::int64_t> all, std::int64_t decisions) const;
  std::span<const std::int64_t> exact_in_call_times(std::span<const std::int64_t> all);

  int nranks_, period_;
  bool shared_clock_;
  int window_ = 1;                                  // calls in the current window
  int converging_window_ = 1, settled_window_ = 1;  // the window before and after settling
  int slots_ = 2;       // the longer window's times (twice: shared_clock) + the digest
  int entry_slot_ = 0;  // shared_clock: the first entry-time slot
  int quiet_calls_ = 0; // calls since a decision last changed or planned anything
  std::vector<CallRecord> ring_;  // begun calls not yet decided, by call number mod size (a power of 2)
  std::int64_t begun_ = 0, recorded_ = 0, filled_ = 0, decided_ = 0;
  std::vector<std::int64_t> clocked_;  // shared_clock: the exchange with in-call times made exact
};

}  // namespace stragglar::detail::auto_policy
