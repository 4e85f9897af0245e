// How auto's calls are timed and exchanged (algorithm = auto: straggler_policy.hpp, auto_runner.hpp,
// docs/auto.md). The policy needs every call's time inside its data phase on this rank, and one
// small exchange (an element-wise max over ranks) every P calls. An engine makes a CallTimer per
// auto configuration (Engine::make_timer()): host engines the HostCallTimer below (the host clock, the exchange through
// the engine's agreement at once, or split around the next call: SplitAllgather); the NCCL engine times its stream with CUDA events and runs the
// exchange stream-ordered (src/cuda/nccl_call_timer.hpp), delivering both measurement_lag() calls
// later, the same lag on every rank, so that the host never waits for the GPU (docs/auto.md "Lags").
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace stragglar::detail {

class Engine;

// One timed call, as take_time delivers it.
struct CallTime {
  double seconds = 0;          // inside the data phase on this rank
  std::int64_t entry_ns = -1;  // its start on the host's steady clock (entries_on_host_clock()); else -1
};

class CallTimer {
 public:
  virtual ~CallTimer() = default;
  // Calls between a call (or an exchange begun after it) and the delivery of its time (or the
  // exchange's result): 0 when both are known at once.
  virtual int measurement_lag() const = 0;
  // Called when an auto configuration is created: size every buffer an exchange of `values`
  // values will use, so that later calls allocate nothing.
  virtual void reserve_exchange(std::size_t values) = 0;
  // Around the data phase of one call.
  virtual void time_begin() = 0;
  virtual void time_end() = 0;
  // The time of the oldest timed call not taken yet; waits at most timeout_s (the session's) for it.
  virtual CallTime take_time(double timeout_s) = 0;
  // Whether take_time gives each call's entry on the host's steady clock — one clock for every
  // process of a host, so ranks on one host can order their entries and exits (auto's
  // PolicyConfig::shared_clock). A GPU stream's time (CUDA events) has no such clock.
  virtual bool entries_on_host_clock() const = 0;
  // The element-wise max of `values` over ranks: begun after a call's data phase (every rank is
  // there), its result written back into `values` by exchange_end, measurement_lag() calls later.
  // Waits at most timeout_s (the session's).
  virtual void exchange_begin(std::span<std::int64_t> values, double timeout_s) = 0;
  virtual void exchange_end(std::span<std::int64_t> values, double timeout_s) = 0;
  // Whether an exchange begun after a call (lag 0) ends at the start of the configuration's next
  // call instead of at once: no call then waits for it (SplitAllgather).
  virtual bool exchange_ends_at_next_call() const { return false; }
};

// auto's exchange as an allgather split in two (an engine that can post messages and collect
// them later: MPI): begun after a call's data phase, it posts this rank's part to every peer
// and returns; ended at the configuration's next call, it collects theirs. Measured on the
// 2-core VM (8 ranks, 16 MiB, Open MPI): a blocking exchange right after the call (the
// dissemination max of transport_max) added 0.2-8 ms to the call's exposed time — a rank's
// partners descheduled — where a split one, its messages long arrived by the next call, adds
// nothing measurable (docs/auto.md "The exchange").
class SplitAllgather {
 public:
  virtual ~SplitAllgather() = default;  // cancels what is still pending
  // Sizes it for `values` values (nranks × slots per rank): later exchanges allocate nothing.
  virtual void reserve(std::size_t values) = 0;
  // Posts this rank's slots of `values` (rank-major, values.size() / nranks per rank) to every
  // peer and receives theirs into its own memory; copies nothing back yet.
  virtual void begin(std::span<const std::int64_t> values) = 0;
  // Waits (at most timeout_s) for every rank's slots and writes them into `values` (this rank's
  // are left as they are). Throws Error(Timeout) naming the peers it waited for, or a peer's
  // error (it gave up, or is in another call).
  virtual void end(std::span<std::int64_t> values, double timeout_s) = 0;
};

// A host engine's timer: the host's steady clock around the call, and the exchange as the
// engine's agree_max right away (lag 0), or, given a SplitAllgather, begun after the call and
// ended at the next. A lag > 0 only delays the deliveries (tests: the NCCL engine's lag on CPUs).
class HostCallTimer final : public CallTimer {
 public:
  // `engine` runs the exchange (its agree_max) and sizes it (its reserve); it outlives the timer.
  // Throws Error(Internal) for a lag outside [0, kMaxLag].
  explicit HostCallTimer(Engine& engine, int lag = 0);
  // The exchange split around the next call (lag 0): `split` runs and sizes it, not agree_max.
  HostCallTimer(Engine& engine, std::unique_ptr<SplitAllgather> split);
  static constexpr int kMaxLag = 7;  // times_ns_ holds the calls not taken yet
  int measurement_lag() const override { return lag_; }
  void reserve_exchange(std::size_t values) override;
  void time_begin() override;
  void time_end() override;
  CallTime take_time(double timeout_s) override;
  bool entries_on_host_clock() const override { return true; }
  void exchange_begin(std::span<std::int64_t> values, double timeout_s) override;
  void exchange_end(std::span<std::int64_t> values, double timeout_s) override;
  bool exchange_ends_at_next_call() const override { return split_ != nullptr; }

 private:
  Engine& engine_;
  int lag_;
  std::unique_ptr<SplitAllgather> split_;  // null: agree_max at once
  struct Timed {
    std::int64_t start_ns = 0, ns = 0;  // entry on the host clock, time inside
  };
  Timed timed_[kMaxLag + 1] = {};  // calls not taken yet, oldest first
  int times_ = 0;
  std::vector<std::int64_t> exchanged_;  // the exchange's result, until exchange_end
};

}  // namespace stragglar::detail
