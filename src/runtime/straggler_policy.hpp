// The straggler policy behind algorithm = auto (issue #12; DESIGN.md "straggler policy (auto)";
// docs/auto.md). Pure logic: no engine, no clock, no threads. The runtime core measures, runs the
// exchange collective and calls this class; every rank holds one instance per configuration
// (count, dtype, op) and, because every decision is computed from exchanged (hence identical)
// numbers and call counters only, every rank runs the same choice at every call.
//
// Per call, on every rank, in the same order:
//   Choice c = policy.begin_call();          // what this call runs (identical on every rank)
//   ... run c ...
//   policy.record(seconds_in_call, entry_ns); // this rank's entry-to-exit time of that call
//                                             // (and its entry on the shared clock, shared_clock)
//   if (policy.exchange_due()) {             // after every P-th recorded call
//     policy.fill_exchange(values, rank);    // nranks × slots_per_rank() int64, rank-major
//     engine.agree_max(values);              // element-wise max over ranks = an allgather
//     if (policy.decide(values)) log(policy.last_switch_evidence());
//   }
// On GPUs record() may lag begin_call() (times come from CUDA events read later) and decide()
// may lag fill_exchange() (the exchange result is read later), as long as every rank makes the
// same calls at the same call index: record() measures the oldest begun call not yet recorded,
// decide() consumes the oldest filled exchange.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "stragglar/algorithm.hpp"

namespace stragglar::detail {

// What one call runs.
struct Choice {
  Algorithm algorithm = Algorithm::ring;  // a candidate of the policy
  int straggler = -1;  // algorithms that single out a straggler (stragglar): the rank treated as late
  // stragglar-k and hierarchical (issue #23): the late set they are told, ascending. Points into
  // the policy's table of learned sets (which never changes a set once learned), so a Choice is
  // copied without allocating; empty for every other algorithm.
  std::span<const int> late = {};
  bool operator==(const Choice& o) const {
    return algorithm == o.algorithm && straggler == o.straggler &&
           std::equal(late.begin(), late.end(), o.late.begin(), o.late.end());
  }
};
// stragglar-k and hierarchical: told a set of late ranks rather than one straggler.
inline bool uses_late_set(Algorithm a) noexcept { return a == Algorithm::stragglar_k || a == Algorithm::hierarchical; }
// "stragglar(straggler 7)", "stragglar-k(late 6,7)", "rhd", "native".
std::string to_string(const Choice& c);

struct PolicyConfig {
  int nranks = 0;
  std::size_t bytes = 0;  // of the calls this policy serves (for the predictor; may be 0)
  // What auto may run. Algorithms that use a straggler (stragglar, broadcast) run with the
  // detected late rank. Every engine has a native AllReduce (MPI, NCCL, Gloo; the UCX bench uses
  // MPI_Allreduce), so the core keeps this list.
  // stragglar-k and hierarchical (issue #23) run with the learned late set, and only once a set
  // of 2+ ranks late together has persisted (hierarchical: when that set is one host's ranks,
  // ranks_per_host below) and the predictor has a model for them.
  std::vector<Algorithm> candidates = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd,
                                       Algorithm::native, Algorithm::stragglar_k, Algorithm::hierarchical};
  // Ranks per host, host-major (rank r on host r / ranks_per_host), when the caller knows it (the
  // cost model's CostModel::ranks_per_host); 0: hosts unknown, and hierarchical is never a
  // candidate (its schedule assumes the late set is one whole host).
  int ranks_per_host = 0;
  // Late sets learned per configuration, at most (each costs a plan per set candidate and two
  // simulations, built once): a set beyond them is not chased (its ranks still score high).
  int max_late_sets = 8;
  int period = 5;                 // P: calls per block: the late rank is voted over the last P calls,
                                  // exploration, refresh, dwell and staleness count blocks
  // Calls per exchange (and decision), 1..period; 0: period. 1 (the host engines' choice when an
  // exchange costs little beside the call) lets auto decide after every call: it converges from
  // the first measured call and follows a new straggler within two calls (docs/auto.md).
  int exchange_every = 0;
  // Calls per exchange once settled, exchange_every..period; 0: exchange_every always. Settled:
  // the decisions of the last P calls changed nothing (choice, late rank, late set), planned no
  // exploration call, and the choice is backed by measurements. A blocking exchange is one small
  // collective on the critical path of the call it follows (on the 2-core VM ~2 ms after a
  // 20–75 ms call: a late rank's partners are descheduled; MPI's is split around the next call,
  // mpi_split_allgather.hpp, and costs the calls nothing); host engines decide after every call
  // while converging and every P calls once settled, and go back to every call at the first
  // decision that changes or explores anything.
  int settled_exchange_every = 0;
  // The first call follows a synchronisation (the core's agreement of a new configuration):
  // nobody is late in it, so it counts for no vote and measures only straggler-agnostic choices.
  bool first_call_synchronised = false;
  // Every rank's entry times read one clock (the ranks share a host and time calls on its steady
  // clock: record()'s entry_ns). Each call's entry is exchanged beside its in-call time, so a call's
  // exposed time is exact — the latest exit − the latest entry — and arrivals are ordered by entry.
  // Without it both come from in-call times alone, assuming every rank leaves the call together:
  // the shortest in-call time is then the exposed time. Measured false for a native AllReduce on
  // the 2-core VM (Open MPI, 8 ranks, 16 MiB, nobody late): the shortest in-call time put it at
  // ~19 ms where the benchmark measured 26–34 ms exposed, so native looked ~30 % faster than it ran
  // (docs/auto.md "Measuring a call").
  bool shared_clock = false;
  // Start with the engine's native (a candidate) instead of the model's best, and keep it until a
  // schedule is measured faster: the GPU engines' choice, where the native collective
  // (ncclAllReduce: many channels, fused reduction) beats every schedule of point-to-point rounds
  // when nobody is late, and is what the user would run anyway.
  bool start_with_native = false;
  // The straggler StragglAR is told until a late rank is measured (the caller's hint,
  // Options::straggler); -1: rank nranks-1.
  int initial_straggler = -1;
  // Estimates are lower quartiles of a candidate's recent measurements (shared hosts mostly add
  // slow outliers). Hysteresis: a measured challenger replaces a measured incumbent only when
  // its estimate is lower by switch_margin plus 1.5 standard errors of the difference (from the
  // measured noise σ; noise_prior until measured) — measured native replaces a schedule by
  // switch_margin alone (native first among equals, docs/auto.md) ...
  double switch_margin = 0.03;
  double noise_prior = 0.05;
  // ... and never switches straight back to the choice it replaced within min_dwell_windows
  // decisions.
  int min_dwell_windows = 4;
  // How far the model may be off (measured / predicted on this project's hosts: 0.77–1.24).
  // Candidates whose estimate is within this fraction (+ 2σ) of the best are kept measured
  // (exploration); an estimate without enough fresh measurements behind it must beat the
  // incumbent by this fraction to be chosen without measuring it first.
  double model_error = 0.25;
  int min_samples = 2;            // fresh measurements that make an estimate "measured"
  int history = 12;               // measurements kept per candidate
  int refresh_windows = 4;        // every this many decisions, one call of the stalest near candidate
  int stale_windows = 20;         // a measurement older than this many decisions is not fresh
  // A measurement taken at another delay is fresh when the model moves it by at most this.
  double fresh_tolerance = 0.10;
  // A call has a late rank when the last arrival trails the second-last by at least
  // max(min_delay_s, min_delay_fraction × the call's exposed time).
  double min_delay_fraction = 0.02;
  double min_delay_s = 5e-6;
  // Build last_switch_evidence() (text, allocates); the core sets it from STRAGGLAR_DEBUG=INFO so
  // that a configuration seen before makes no heap allocation.
  bool keep_evidence = true;
  // Build last_decision_trace() at every decision (STRAGGLAR_DEBUG=TRACE; text, allocates).
  bool keep_trace = false;
};

// Model prediction supplied by the core: the α-β-γ simulator on the choice's schedule with the
// calibrated cost model, the straggler arriving delay_s after the others; exposed seconds.
// NaN (or anything not finite and positive) when there is no prediction (native). Must return the
// same value on every rank for the same arguments (same schedule, same cost model).
using Predictor = std::function<double(const Choice&, double delay_s)>;

// Late sets learned so far by every policy of this process (issue #23). Learning a set is the one
// decision that allocates (the set, its plans and simulations, built once; at most
// max_late_sets per configuration): the hot-path test tells those calls apart with it.
std::int64_t late_sets_learned_in_process() noexcept;

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

  // exchange_every recorded calls wait to be exchanged.
  bool exchange_due() const noexcept;
  // Calls in the current exchange window: exchange_every (or period when that is 0), or
  // settled_exchange_every once settled.
  int window_calls() const noexcept { return window_; }
  // int64 slots each rank contributes, the same at every exchange: room for the longest
  // window's in-call times (ns; a shorter window leaves the rest 0), as many entry times with
  // shared_clock, then the window's digest.
  int slots_per_rank() const noexcept { return slots_; }
  int exchange_size() const noexcept { return config_.nranks * slots_per_rank(); }
  // Writes the whole exchange array (exchange_size() values, rank-major): this rank's slots, -1
  // in every other slot, so an element-wise max over ranks gives every rank every rank's values.
  // Closes the window; throws Error(InvalidUsage) when !exchange_due() or for a bad size/rank.
  void fill_exchange(std::span<std::int64_t> all, int rank);
  // Every rank's slots (the max over ranks of fill_exchange's arrays), identical on every rank,
  // for the oldest filled window. Updates the late rank, delay, scores, estimates, the choice and
  // the exploration plan. Returns true when the decided choice (incumbent()) changed. Throws
  // Error(Mismatch) when ranks' windows differ (they called begin_call/record/fill at different
  // calls or ran different choices), Error(InvalidUsage) for a bad size, no filled window, or a
  // missing (negative) contribution.
  bool decide(std::span<const std::int64_t> all);

  // Visibility.
  const Choice& incumbent() const noexcept { return incumbent_choice_; }  // decided; current() may explore
  int late_rank() const noexcept { return late_; }      // rank late in most calls of the last window, or -1
  // The set of 2+ ranks late together in most of the last P calls (ascending), or empty; and the
  // set stragglar-k / hierarchical are told (the last such set learned; empty before one).
  std::span<const int> late_set() const noexcept { return set_span(late_set_); }
  std::span<const int> target_set() const noexcept { return set_span(target_set_); }
  double delay_s() const noexcept { return delay_s_; }  // median delay of the last arrival, last P calls
  double noise() const noexcept { return noise_; }      // relative spread of measured calls
  // Per rank, mean over the last window of the fraction of the call (as seen by the first rank
  // to arrive) that passed before this rank arrived: in [0, 1]; 0 before the first decision.
  const std::vector<double>& scores() const noexcept { return scores_; }
  // Why incumbent() last changed (empty before the first change, and when !keep_evidence), for
  // STRAGGLAR_DEBUG=INFO.
  const std::string& last_switch_evidence() const noexcept { return evidence_; }
  // What the last decision saw and planned (only with config.keep_trace; else empty): the calls
  // it covered, the incumbent, the exploration calls planned next, the late rank and noise, and
  // every candidate's estimate (value, fresh/total measurements, the model's prediction).
  const std::string& last_decision_trace() const noexcept { return trace_; }
  std::int64_t calls_begun() const noexcept { return begun_; }
  std::int64_t decisions() const noexcept { return decisions_; }

 private:
  struct Sample {
    double exposed_s;    // measured: the shortest in-call time of the call (exact on a shared clock)
    double predicted_s;  // the model at the overlap this choice could use in that call; NaN: none
    std::int64_t window; // decision index it came in
    bool first_use;      // taken in the configuration's first call (first-use costs): replaced by the next
    bool overlapped;     // StragglAR-like: its straggler was the one late in that call (significantly)
  };
  struct Candidate {
    Algorithm algorithm;
    bool uses_straggler;
    bool uses_set;  // stragglar-k, hierarchical: told target_set_
    std::vector<Sample> samples;  // oldest first, at most config.history
    // Only a first-use measurement so far: it may not rule the candidate out (docs/auto.md "The
    // first calls"); it gives an estimate, but no fresh one, and the model ranks the candidate.
    bool first_use_only() const { return samples.size() == 1 && samples.front().first_use; }
    std::int64_t burst_start = -1000000;  // decision that opened its current exploration budget
    int burst_calls = 0;                  // exploration calls planned since then
  };
  struct Ran {  // one begun call
    int candidate;
    int straggler;
    int set;  // index into late_sets_ of the set it was told, -1: none
    std::int64_t ns;  // -1 until recorded
    std::int64_t entry_ns;  // shared_clock: its entry on that clock
  };
  struct Estimate {
    double value = 0;      // seconds; NaN: unknown
    bool measured = false; // backed by >= min_samples fresh measurements
    int fresh = 0;
    double predicted = 0;  // model at the current delay; NaN: none
    std::vector<double> fresh_values;  // transferred fresh values, newest first
  };

  Choice choice_of(int candidate) const;
  std::span<const int> set_span(int set) const noexcept {
    return set < 0 ? std::span<const int>{} : std::span<const int>(late_sets_[static_cast<std::size_t>(set)]);
  }
  bool available(int candidate) const;  // a set candidate: a target set it can run with
  // The call's late set (j >= 2 ranks before the largest significant gap in arrival) into
  // recent-call slot `slot`; returns its size (0: none) and its gap.
  int call_late_set(std::span<const std::int64_t> all, int call, double exposed_s, std::size_t slot, double& gap_s);
  int find_set(std::span<const int> set) const;  // index in late_sets_, -1
  Ran& slot(std::int64_t call) { return ring_[static_cast<std::size_t>(call) & (ring_.size() - 1)]; }
  const Ran& slot(std::int64_t call) const { return ring_[static_cast<std::size_t>(call) & (ring_.size() - 1)]; }
  std::uint64_t window_digest(std::int64_t first_call) const;
  double predict(const Choice& c, double delay_s) const;
  std::int64_t block() const noexcept { return decided_ / config_.period; }
  void estimate_all(double delay_all_s, double delay_target_s, double persistence, double delay_set_s,
                    double set_persistence);
  bool same_set(std::size_t slot, std::span<const int> set) const;
  struct Regimes {
    double mixture = 0;                         // 0: fewer than two regimes measured
    double level_late = 1, level_other = 1;     // median measured/model ratio in each regime
  };
  Regimes regime_mixture(std::size_t k, double delay_target_s, double persistence);
  bool significant_gap(double gap_s, double exposed_s) const;
  std::span<const std::int64_t> exact_in_call_times(std::span<const std::int64_t> all);
  void plan_exploration(int best);
  void trace_decision(std::int64_t first);  // fills trace_ (config.keep_trace)
  void append_estimates(std::string& out) const;
  void update_next();

  PolicyConfig config_;
  int window_ = 1;          // calls in the current exchange window
  int converging_window_ = 1, settled_window_ = 1;  // the window before and after settling
  int slots_ = 2;           // slots_per_rank(): the longer window (twice: shared_clock) + the digest
  int entry_slot_ = 0;      // shared_clock: the first entry-time slot
  std::int64_t decisions_ = 0;
  int quiet_calls_ = 0;     // calls since a decision last changed or explored anything
  Predictor predict_;
  std::vector<Candidate> cands_;
  std::vector<Ran> ring_;  // begun calls not yet decided, indexed by call number mod size (power of 2)
  std::int64_t begun_ = 0, recorded_ = 0, filled_ = 0, decided_ = 0;  // call counters
  std::vector<int> plan_;  // candidates of the next calls (exploration), then the incumbent
  std::size_t plan_pos_ = 0;
  int incumbent_ = 0;
  int target_ = 0;  // the straggler given to candidates that use one
  int late_ = -1;
  double delay_s_ = 0;
  double noise_ = 0;  // relative spread of measured calls (σ), smoothed over decisions
  std::int64_t last_change_window_ = -1;  // decision index of the last incumbent change
  Choice previous_choice_{Algorithm::automatic, -1};  // what the incumbent ran before it (dwell)
  bool incumbent_by_model_ = true;        // chosen without measurements backing it
  std::int64_t last_refresh_window_ = 0;
  std::int64_t planned_block_ = -1;  // block of the last exploration plan
  // The last P decided calls: late rank (-1: no significant gap), gap, oldest first.
  std::vector<int> recent_late_;
  std::vector<double> recent_gap_;
  // The same calls' late sets of 2+ ranks (issue #23): a ring of P slots of up to n/2 ranks each,
  // the size (0: none) and the gap before the set; recent_set_head_ is the oldest slot.
  std::vector<int> recent_set_ranks_, recent_set_size_;
  std::vector<double> recent_set_gap_;
  int recent_set_head_ = 0, recent_set_count_ = 0;
  std::vector<std::vector<int>> late_sets_;  // learned sets, never changed once added
  int target_set_ = -1, late_set_ = -1;      // indices into late_sets_
  std::vector<int> set_order_;               // scratch: ranks by in-call time
  std::vector<int> window_set_slot_;         // scratch: per call of the window, its recent-set slot (-1)
  std::vector<double> set_gaps_;             // scratch: the target set's gaps
  Choice next_, incumbent_choice_;
  std::vector<double> scores_;
  std::vector<Estimate> est_;
  std::string evidence_;
  std::string trace_;
  // Scratch of decide() and its helpers, kept so that deciding allocates nothing once grown.
  struct Need {
    int candidate, calls;
    bool unknown;
    double value;
  };
  std::vector<Need> needs_;
  std::vector<double> work_, values_, devs_, gap_, exposed_, score_;
  std::vector<double> right_, wrong_;  // scratch: a straggler-using candidate's samples by regime
  std::vector<int> late_per_call_, count_;
  std::vector<std::int64_t> clocked_;  // shared_clock: the exchange with in-call times made exact
};

}  // namespace stragglar::detail
