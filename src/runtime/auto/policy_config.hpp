// What auto is configured with (the core fills it: auto_runner.cpp) and the model it is handed.
// The timing words (docs/auto.md "Words"): a *call* is one AllReduce; a *window* is the calls one
// exchange covers, after which every rank decides (exchange_every calls, settled_exchange_every
// once settled); a *block* is `period` calls: the late rank is voted over the last block's calls,
// and probes, refresh, dwell and staleness count blocks.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "runtime/auto/choice.hpp"

namespace stragglar::detail {

struct PolicyConfig {
  int nranks = 0;
  std::size_t bytes = 0;  // of the calls this policy serves (for the predictor; may be 0)
  // What auto may run. Algorithms that use a straggler (stragglar, broadcast) run with the
  // detected late rank; stragglar-k and hierarchical with the learned late set, and only once a
  // set of 2+ ranks late together has persisted (hierarchical: when that set is one host's ranks,
  // ranks_per_host below) and the predictor has a model for them. Every engine has a native
  // AllReduce, so the core keeps native in the list.
  std::vector<Algorithm> candidates = {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd,
                                       Algorithm::native, Algorithm::stragglar_k, Algorithm::hierarchical};
  // Ranks per host, host-major (rank r on host r / ranks_per_host), when the caller knows it;
  // 0: hosts unknown, and hierarchical is never a candidate (its schedule assumes the late set is
  // one whole host).
  int ranks_per_host = 0;
  // Late sets learned per configuration, at most (each costs plans and simulations, built once):
  // a set beyond them is not chased (its ranks still score high).
  int max_late_sets = 8;
  int period = 5;  // P: calls per block
  // Calls per window (one exchange, one decision), 1..period; 0: period. 1 lets auto decide after
  // every call: it converges from the first measured call and follows a new straggler within two
  // calls.
  int exchange_every = 0;
  // Calls per window once settled, exchange_every..period; 0: exchange_every always. Settled: the
  // decisions of the last P calls changed nothing (choice, late rank, late set), planned no probe,
  // and the choice is backed by measurements. A blocking exchange sits on the critical path of the
  // call it follows: the host engines decide after every call while converging and every P calls
  // once settled, and go back to every call at the first decision that changes or probes anything.
  int settled_exchange_every = 0;
  // The first call follows a synchronisation (the core's agreement of a new configuration):
  // nobody is late in it, so it counts for no vote and measures only straggler-agnostic choices.
  bool first_call_synchronised = false;
  // Every rank's entry times read one clock (record()'s entry_ns). Each call's entry is exchanged
  // beside its in-call time, so a call's exposed time is exact — the latest exit − the latest entry
  // — and arrivals are ordered by entry. Without it both come from in-call times alone, assuming
  // every rank leaves the call together: the shortest in-call time is then the exposed time, low
  // where ranks leave apart (docs/auto.md "Measuring a call on one clock").
  bool shared_clock = false;
  // Start with the engine's native (a candidate) instead of the model's best, and keep it until a
  // schedule is measured faster: the GPU engines' choice, where the native collective beats every
  // schedule of point-to-point rounds when nobody is late, and is what the user would run anyway.
  bool start_with_native = false;
  // The configuration's first call measures native (no model ranks it). false: the first call runs
  // the model's best; native is measured when the probes reach it, and its first run there is a
  // first-use measurement, measured again. The MPI engine's choice: MPI_Iallreduce's first run at
  // a size pays first-use costs of its own, which a configuration called once then never pays
  // (docs/auto.md "The first calls").
  bool first_call_measures_native = true;
  // The straggler StragglAR is told until a late rank is measured (the caller's hint,
  // Options::straggler); -1: rank nranks-1.
  int initial_straggler = -1;
  // Estimates are lower quartiles of a candidate's recent measurements. Hysteresis: a measured
  // challenger replaces a measured incumbent only when its estimate is lower by switch_margin plus
  // 1.5 standard errors of the difference (from the measured noise σ; noise_prior until measured);
  // measured native replaces a schedule by switch_margin alone (docs/auto.md "Choice and
  // hysteresis") ...
  double switch_margin = 0.03;
  double noise_prior = 0.05;
  // ... and never switches straight back to the choice it replaced within min_dwell_blocks blocks.
  int min_dwell_blocks = 4;
  // How far the model may be off (measured / predicted). Candidates whose estimate is within this
  // fraction (+ 2σ) of the best are kept measured (probes); an estimate without enough fresh
  // measurements behind it must beat the incumbent by this fraction to be chosen unmeasured.
  double model_error = 0.25;
  int min_samples = 2;      // fresh measurements that make an estimate "measured"
  int history = 12;         // measurements kept per candidate
  int refresh_blocks = 4;   // every this many blocks, one call of the stalest near candidate
  int stale_blocks = 20;    // a measurement older than this many blocks is not fresh
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

}  // namespace stragglar::detail
