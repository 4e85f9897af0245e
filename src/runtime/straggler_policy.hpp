// The straggler policy behind algorithm = auto (docs/auto.md explains it in prose). Pure logic: no
// engine, no clock, no threads. The runtime core measures, runs the exchange collective and calls
// this class; every rank holds one instance per configuration (count, dtype, op) and, because
// every decision is computed from exchanged (hence identical) numbers and call counters only,
// every rank runs the same choice at every call.
//
// Per call, on every rank, in the same order:
//   Choice c = policy.begin_call();          // what this call runs (identical on every rank)
//   ... run c ...
//   policy.record(seconds_in_call, entry_ns); // this rank's entry-to-exit time of that call
//                                             // (and its entry on the shared clock, shared_clock)
//   if (policy.exchange_due()) {             // after every window of recorded calls
//     policy.fill_exchange(values, rank);    // nranks × slots_per_rank() int64, rank-major
//     engine.agree_max(values);              // element-wise max over ranks = an allgather
//     if (policy.decide(values)) log(policy.last_switch_evidence());
//   }
// On GPUs record() may lag begin_call() (times come from CUDA events read later) and decide()
// may lag fill_exchange() (the exchange result is read later), as long as every rank makes the
// same calls at the same call index: record() measures the oldest begun call not yet recorded,
// decide() consumes the oldest filled exchange.
//
// The work is done in stages (src/runtime/auto/): the window exchange, late-rank and late-set
// detection, estimation, selection, probes and the texts; this class strings them together.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/auto/choice.hpp"
#include "runtime/auto/estimator.hpp"
#include "runtime/auto/late_detector.hpp"
#include "runtime/auto/policy_config.hpp"
#include "runtime/auto/probe.hpp"
#include "runtime/auto/selection.hpp"
#include "runtime/auto/window_exchange.hpp"

namespace stragglar::detail {

class StragglerPolicy {
 public:
  // Throws Error(InvalidUsage) naming a bad config value or a null predictor.
  StragglerPolicy(PolicyConfig config, Predictor predictor);

  const PolicyConfig& config() const noexcept { return config_; }

  // What the next begin_call() returns. Depends only on exchanged data and call counters.
  const Choice& current() const noexcept { return next_; }
  // Starts a call: returns current() and advances the call counter.
  Choice begin_call();
  // This rank's time inside the oldest begun, unrecorded call: from its entry to its exit of
  // the data phase (not the exchange, not plan building). Throws Error(InvalidUsage) for a
  // negative or non-finite time or when no call is waiting for its time.
  // `entry_ns`: the call's entry on the clock every rank shares (config.shared_clock; ignored
  // without it); throws Error(InvalidUsage) when shared_clock and it is negative or above 2^62.
  void record(double seconds_in_call, std::int64_t entry_ns = -1);

  // A window of recorded calls waits to be exchanged.
  bool exchange_due() const noexcept { return exchange_.due(); }
  // Calls in the current window: exchange_every (or period when that is 0), or
  // settled_exchange_every once settled.
  int window_calls() const noexcept { return exchange_.window_calls(); }
  // int64 slots each rank contributes, the same at every exchange: room for the longest
  // window's in-call times (ns; a shorter window leaves the rest 0), as many entry times with
  // shared_clock, then the window's digest.
  int slots_per_rank() const noexcept { return exchange_.slots_per_rank(); }
  int exchange_size() const noexcept { return exchange_.exchange_size(); }
  // Writes the whole exchange array (exchange_size() values, rank-major): this rank's slots, -1
  // in every other slot, so an element-wise max over ranks gives every rank every rank's values.
  // Closes the window; throws Error(InvalidUsage) when !exchange_due() or for a bad size/rank.
  void fill_exchange(std::span<std::int64_t> all, int rank) { exchange_.fill(all, rank); }
  // Every rank's slots (the max over ranks of fill_exchange's arrays), identical on every rank,
  // for the oldest filled window. Updates the late rank, delay, scores, estimates, the choice and
  // the probes. Returns true when the decided choice (incumbent()) changed. Throws
  // Error(Mismatch) when ranks' windows differ (they called begin_call/record/fill at different
  // calls or ran different choices), Error(InvalidUsage) for a bad size, no filled window, or a
  // missing (negative) contribution.
  bool decide(std::span<const std::int64_t> all);

  // Visibility.
  const Choice& incumbent() const noexcept { return incumbent_choice_; }  // decided; current() may probe
  int late_rank() const noexcept { return detector_.late_rank(); }  // late in most calls of the last block, or -1
  // The set of 2+ ranks late together in most of the last P calls (ascending), or empty; and the
  // set stragglar-k / hierarchical are told (the last such set learned; empty before one).
  std::span<const int> late_set() const noexcept { return detector_.set(detector_.late_set()); }
  std::span<const int> target_set() const noexcept { return detector_.set(detector_.target_set()); }
  double delay_s() const noexcept { return detector_.delay_s(); }  // median delay of the last arrival, last P calls
  double noise() const noexcept { return estimator_.noise(); }     // relative spread of measured calls
  // Per rank, mean over the last window of the fraction of the call (as seen by the first rank
  // to arrive) that passed before this rank arrived: in [0, 1]; 0 before the first decision.
  const std::vector<double>& scores() const noexcept { return detector_.scores(); }
  // Why incumbent() last changed (empty before the first change, and when !keep_evidence), for
  // STRAGGLAR_DEBUG=INFO.
  const std::string& last_switch_evidence() const noexcept { return evidence_; }
  // What the last decision saw and planned (only with config.keep_trace; else empty): the calls
  // it covered, the incumbent, the probes planned next, the late rank and noise, and every
  // candidate's estimate (value, fresh/total measurements, the model's prediction).
  const std::string& last_decision_trace() const noexcept { return trace_; }
  std::int64_t calls_begun() const noexcept { return exchange_.begun(); }
  std::int64_t decisions() const noexcept { return decisions_; }

 private:
  auto_policy::Targets targets() const;
  Choice choice_of(int candidate) const { return estimator_.choice_of(candidate, targets()); }
  void update_next();
  void explain(std::int64_t first, const Choice& old_choice, std::string reason, int old_target, bool set_changed);

  PolicyConfig config_;
  auto_policy::WindowExchange exchange_;
  auto_policy::LateDetector detector_;
  auto_policy::Estimator estimator_;
  auto_policy::Selection selection_;
  auto_policy::Probes probes_;
  std::int64_t decisions_ = 0;
  Choice next_, incumbent_choice_;
  std::string evidence_;
  std::string trace_;
};

}  // namespace stragglar::detail
