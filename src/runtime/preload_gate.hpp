// The front door of a preload library — the PMPI one (MPI_Allreduce, src/pmpi) and the NCCL one
// (ncclAllReduce, src/nccl_preload): what both decide before a call reaches the runtime core.
//
//   settings     read once, at the first intercepted call: the minimum size (the preload's
//                STRAGGLAR_*_MIN_BYTES), STRAGGLAR_DEBUG, the options' defaults, or the error of
//                a malformed variable (every eligible call reports it, runtime/env.hpp's rule)
//   counters     calls served through stragglar and passed to the real function
//   re-entrancy  the runtime's own calls of the intercepted function (MPI_Allreduce in native,
//                ncclAllReduce in the agreement) go straight to the real one
//   announce     STRAGGLAR_DEBUG=INFO: one line per communicator, the first time it is seen
//
// Typical use in a wrapper:
//   if (Gate::inside()) return real(...);                 // the runtime's own call
//   if (gate.passes_below(bytes)) return gate.pass(), real(...);
//   ... checks of type, op, communicator ...
//   const auto serving = gate.serve();                    // counted, guard set until it ends
//   return run_through_stragglar(...);
#pragma once
#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <set>

#include "runtime/env.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"

namespace stragglar::detail {

struct PreloadSettings {
  std::size_t min_bytes = 0;
  bool debug = false;          // STRAGGLAR_DEBUG=INFO or TRACE: announce each communicator
  Options options;             // STRAGGLAR_ALGORITHM, _STRAGGLER, _PIPELINE applied
  std::optional<Error> error;  // a malformed STRAGGLAR_* variable
};

// `Tag` gives each preload library its own thread-local guard; `Comm` is its communicator
// handle (MPI_Comm, ncclComm_t).
template <class Tag, class Comm>
class PreloadGate {
 public:
  // `min_bytes`: the RuntimeConfig field of this preload's threshold.
  explicit PreloadGate(std::size_t RuntimeConfig::*min_bytes) : min_bytes_(min_bytes) {}
  PreloadGate(const PreloadGate&) = delete;
  PreloadGate& operator=(const PreloadGate&) = delete;

  // A function-local static, not a member: after the first call, one load of its guard. One
  // gate per Tag, so one static per gate.
  const PreloadSettings& settings() {
    static const PreloadSettings s = read(min_bytes_);
    return s;
  }

  // Whether this thread is inside a served call (the runtime calling the real function).
  static bool inside() noexcept { return t_inside; }
  // The small-message path, before any lookup: a call of at most `max_bytes` passes through
  // when that is below the threshold and nothing else (an announcement, an error) needs it.
  bool passes_below(std::size_t max_bytes) {
    const PreloadSettings& s = settings();
    return max_bytes < s.min_bytes && !s.debug && !s.error;
  }
  bool below_threshold(std::size_t bytes) { return bytes < settings().min_bytes; }

  void pass() noexcept { bump(passed_); }
  // Marks this thread inside the runtime until it goes: made by serve() for a served call, or
  // directly (`Gate::Serving inside;`, not counted) around the runtime's own cleanup calls
  // (ncclCommDestroy / ncclCommAbort releasing stragglar's state).
  class Serving {
   public:
    Serving() noexcept { t_inside = true; }
    ~Serving() { t_inside = false; }
    Serving(const Serving&) = delete;
    Serving& operator=(const Serving&) = delete;
  };
  // Counts the call as served and marks this thread inside it until the result goes.
  [[nodiscard]] Serving serve() noexcept {
    bump(served_);
    return Serving();
  }
  long long served() const noexcept { return served_.load(std::memory_order_relaxed); }
  long long passed() const noexcept { return passed_.load(std::memory_order_relaxed); }

  // True the first time `comm` is seen (until forget): its announcement is due.
  bool first_sight(Comm comm) {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    return seen_.insert(comm).second;
  }
  // The communicator is freed: a new one may get its handle, and is announced anew.
  void forget(Comm comm) {
    std::lock_guard<std::mutex> lock(seen_mutex_);
    seen_.erase(comm);
  }

 private:
  // A relaxed load and store, not fetch_add: no locked instruction on the pass-through path
  // (threads calling at once may lose a count; only the statistics depend on it).
  static void bump(std::atomic<long long>& counter) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // initial-exec: a preloaded library has static TLS, so reading it is one instruction.
  static inline __attribute__((tls_model("initial-exec"))) thread_local bool t_inside = false;

  static PreloadSettings read(std::size_t RuntimeConfig::*min_bytes) {
    PreloadSettings s;
    try {
      s.min_bytes = runtime_config().*min_bytes;
      s.debug = runtime_config().debug_info;
      s.options = options_from_env();
    } catch (const Error& e) {
      s.error = e;
    }
    return s;
  }

  std::size_t RuntimeConfig::*min_bytes_;
  std::atomic<long long> served_{0}, passed_{0};
  std::mutex seen_mutex_;
  std::set<Comm> seen_;
};

}  // namespace stragglar::detail
