// algorithm = auto in the runtime core (auto_runner.hpp; docs/auto.md "In the runtime core").
#include "runtime/auto_runner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/env.hpp"
#include "runtime/engine.hpp"
#include "runtime/log.hpp"
#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"

namespace stragglar::detail {
namespace {

// auto's model: the simulator on the schedule a choice would run (the cached one), with the
// straggler arriving delay_s late — the same numbers on every rank. The event simulator is
// max-plus linear in the straggler's arrival d (every start is a max of arrivals plus fixed
// durations), so its last finish is max(C0, d + C1) and the exposed time is exactly
// max(E(0) − d, E(∞)): two simulations per choice, on its first use, and predicting afterwards
// costs no simulation and no allocation (a configuration seen before allocates nothing, auto
// included).
class PredictionCache {
 public:
  PredictionCache(Options base, int nranks, std::size_t bytes) : base_(std::move(base)), n_(nranks), bytes_(bytes) {}
  double operator()(const Choice& c, double delay_s) {
    if (algorithm_info(c.algorithm).kind != AlgorithmKind::schedule) return std::numeric_limits<double>::quiet_NaN();
    const Curve& curve = curve_of(c);
    return std::max(curve.at_zero - std::max(0.0, delay_s), curve.at_infinity);
  }

 private:
  struct Curve {
    Choice choice;          // its `late` points into `late` below
    std::vector<int> late;  // stragglar-k / hierarchical: the set simulated late
    double at_zero;      // exposed time when the straggler is not late
    double at_infinity;  // exposed time when it is later than everything that can run without it
  };
  // Keyed by algorithm: a schedule for another straggler is a relabelling, with the same times.
  // A late set: by its size on one link class (relabelling again), by the set itself
  // when the cost model has hosts (where the set sits changes the links it uses).
  const Curve& curve_of(const Choice& c) {
    const bool by_set = base_.cost->ranks_per_host > 0;
    for (const Curve& curve : curves_)
      if (curve.choice.algorithm == c.algorithm && curve.late.size() == c.late.size() &&
          (!by_set || std::equal(c.late.begin(), c.late.end(), curve.late.begin())))
        return curve;
    Options x = base_;
    x.algorithm = c.algorithm;
    x.straggler = c.straggler;
    x.stragglers.assign(c.late.begin(), c.late.end());
    if (!x.stragglers.empty()) x.straggler = -1;
    const std::shared_ptr<const Schedule> s = schedule_for(x, n_, bytes_);
    Delay none, late;
    late.seconds = 1e4;  // far beyond any phase: the asymptote (double keeps ~1e-12 s here)
    Curve curve{c, x.stragglers, 0, 0};
    if (x.stragglers.empty()) {
      curve.at_zero = simulate(*s, bytes_, *base_.cost, none).exposed_s;
      curve.at_infinity = simulate(*s, bytes_, *base_.cost, late).exposed_s;
    } else {
      curve.at_zero = simulate(*s, bytes_, *base_.cost, none, x.stragglers).exposed_s;
      curve.at_infinity = simulate(*s, bytes_, *base_.cost, late, x.stragglers).exposed_s;
    }
    curves_.push_back(std::move(curve));
    curves_.back().choice.late = curves_.back().late;
    return curves_.back();
  }
  Options base_;
  int n_;
  std::size_t bytes_;
  std::vector<Curve> curves_;
};

// Small messages (docs/auto.md "Small messages"): auto runs the engine's native AllReduce with
// no policy when the model says no schedule can beat it at any delay: even with the straggler
// infinitely late, StragglAR's exposed time (what runs after it arrives) is no shorter than the
// best bulk-synchronous schedule at no delay, which is what native is modelled as. A function of
// the configuration and the agreed cost model only (with_auto_cost): the same answer on every rank.
bool no_schedule_can_win(const Options& o, int nranks, std::size_t bytes) {
  PredictionCache model(o, nranks, bytes);
  const double late_for_ever = 1e4;
  const double best_case = model(Choice{Algorithm::stragglar, nranks - 1}, late_for_ever);
  const double bulk = std::min(model(Choice{Algorithm::ring, -1}, 0.0), model(Choice{Algorithm::rhd, -1}, 0.0));
  return best_case >= bulk;
}

// How many calls one exchange should cover: 1 (decide after every call) when an exchange, an
// AllReduce of a few hundred bytes (2 log2 n latencies in the model), costs at most 2% of the
// cheapest candidate's call; else the period (a lag engine always: at most one exchange in flight).
// The same rule for MPI's split exchange, which costs the calls less: it keeps the cadence, and so
// the decisions, of every host engine alike.
int calls_per_exchange(PredictionCache& model, int nranks, const CostModel& cost, int period, int lag) {
  if (lag > 0) return period;
  double cheapest = std::numeric_limits<double>::infinity();
  for (Algorithm a : {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd})
    cheapest = std::min(cheapest, model(Choice{a, nranks - 1}, 0.0));
  const double exchange = 2.0 * std::ceil(std::log2(static_cast<double>(nranks))) * cost.alpha_s;
  return exchange <= 0.02 * cheapest ? 1 : period;
}


}  // namespace

Options with_auto_cost(const Options& o, const Engine& engine, int ranks_per_host) {
  Options x = o;
  if (x.cost) return x;  // the caller's model, hosts and all
  x.cost = engine.auto_cost_model();
  if (ranks_per_host > 0 && x.cost->ranks_per_host == 0) {
    // Hosts known from the communicator, links between them not measured: a host's link as fast
    // as its ranks' ports together, so that sharing it costs no schedule anything (one link
    // class, the paper's per-rank model).
    x.cost->ranks_per_host = ranks_per_host;
    if (x.cost->inter_beta_s_per_byte == 0) x.cost->inter_beta_s_per_byte = x.cost->beta_s_per_byte / ranks_per_host;
  }
  return x;
}

bool auto_runs_native(const Options& o, int nranks, std::size_t bytes) {
  if (!o.cost) throw Error(ErrorCode::Internal, "auto_runs_native: no cost model (expected with_auto_cost's options)");
  return no_schedule_can_win(o, nranks, bytes);
}

namespace {

// The policy of one configuration: the model (two simulations per algorithm, at its first use),
// the period, and one call per exchange when an exchange is cheap beside a call.
StragglerPolicy make_policy(const RuntimeConfig& config, const Engine& engine, int lag, bool shared_clock, int nranks,
                            std::size_t bytes, const Options& base) {
  PolicyConfig pc;
  pc.shared_clock = shared_clock;
  pc.nranks = nranks;
  pc.bytes = bytes;
  // An exchange must be decided before the next one begins (at most one in flight).
  pc.period = std::max(config.auto_period, lag);
  pc.keep_evidence = config.debug_info;  // the switch evidence is text: only when it is printed
  pc.keep_trace = config.debug_trace;
  pc.initial_straggler = base.straggler;  // a hint: StragglAR's straggler until one is measured
  pc.first_call_synchronised = true;      // the configuration's first call follows the agreement
  pc.start_with_native = engine.auto_starts_with_native();
  pc.first_call_measures_native = engine.auto_first_call_measures_native();
  // Hosts, for hierarchical: only what the cost model says (CostModel::ranks_per_host,
  // the option); the runtime does not ask the launcher which ranks share a host.
  pc.ranks_per_host = base.cost->ranks_per_host;
  auto model = std::make_shared<PredictionCache>(base, nranks, bytes);
  pc.exchange_every = calls_per_exchange(*model, nranks, *base.cost, pc.period, lag);
  // Deciding after every call converges at once; once settled, every P calls (straggler_policy.hpp).
  if (pc.exchange_every == 1) pc.settled_exchange_every = pc.period;
  return StragglerPolicy(std::move(pc), [model](const Choice& c, double delay_s) { return (*model)(c, delay_s); });
}
}  // namespace

AutoRunner::AutoRunner(Engine& engine, const RuntimeConfig& config, const char* api, int rank, int nranks, std::size_t count,
                       DataType dtype, const Options& o, AutoHost& host, bool shared_clock)
    : timer_(engine.make_timer()), config_(config), api_(api), rank_(rank), nranks_(nranks),
      options_(with_auto_cost(o, engine)), count_(count), dtype_(dtype),
      policy_(make_policy(config, engine, timer_->measurement_lag(), shared_clock && timer_->entries_on_host_clock(), nranks,
                          count * size_of(dtype), options_)),
      native_warm_ups_(engine.native_warm_ups()) {
  const std::vector<Algorithm>& candidates = policy_.config().candidates;
  may_run_native_ = std::find(candidates.begin(), candidates.end(), Algorithm::native) != candidates.end();
  exchange_.resize(static_cast<std::size_t>(policy_.exchange_size()));
  timer_->reserve_exchange(exchange_.size());
  // Every plan auto may run, built now (its first call is a first call anyway): later calls,
  // explorations and straggler switches then allocate nothing (native's staging is reserved by
  // the Session, which knows whether the call keeps the caller's buffer). Beyond kPrebuiltStragglers ranks
  // StragglAR's plan for a straggler is built when that rank is first found late (a straggler
  // switch: one compile from the cached canonical schedule, docs/verification.md).
  constexpr int kPrebuiltStragglers = 64;
  for (Algorithm alg : policy_.config().candidates) {
    const AlgorithmInfo& info = algorithm_info(alg);
    if (uses_late_set(alg)) {
      // Built when a late set is learned (AutoRunner::finish_exchange), after the exchange.
    } else if (!info.uses_straggler) {
      (void)plan_for(host, Choice{alg, -1});
    } else if (nranks_ <= kPrebuiltStragglers) {
      for (int s = 0; s < nranks_; ++s) (void)plan_for(host, Choice{alg, s});
    } else {
      (void)plan_for(host, Choice{alg, policy_.current().straggler});
    }
  }
}

const Plan* AutoRunner::plan_for(AutoHost& host, const Choice& c) {
  for (const Sub& sub : subs_)
    if (sub.choice == c) return sub.plan.get();
  // The first run of this choice: its plan and scratch, before the call is timed.
  std::shared_ptr<const Plan> plan = host.plan(c, options_, count_, dtype_);
  subs_.push_back({c, plan});
  return plan.get();
}

// Every rank makes the same calls here at the same call index (the lag is the engine's, the
// same everywhere), so every rank runs the same choice: docs/auto.md "Why every rank decides
// the same". The configuration's first call runs right after the agreement, which waited for
// every rank: the policy (first_call_synchronised) takes from it no late rank, only the time of a
// straggler-agnostic choice (native, which has no model, runs in it).
Choice AutoRunner::call(AutoHost& host, double timeout_s, ArrivalTickets* tickets) {
  CallTimer& timer = *timer_;
  // The exchange begun after the previous call (split: docs/auto.md "The exchange"): its
  // messages came while the ranks left that call and entered this one, so this returns at once,
  // and the decision it brings is taken before this call picks — as if it had ended right away.
  if (in_flight_ && timer.exchange_ends_at_next_call()) finish_exchange(host, timeout_s);
  const bool first_call = policy_.calls_begun() == 0;
  // The configuration's first call follows the agreement (nobody late) and measures native (on
  // MPI the model's best: PolicyConfig::first_call_measures_native):
  // tickets from the next call on. Their graces (simulations) and the report's window are made
  // in the first call, with the configuration's other memory: later calls allocate nothing.
  if (tickets && first_call && !arrivals_) {
    PredictionCache model(options_, nranks_, count_ * size_of(dtype_));
    arrivals_.emplace(nranks_, [&model](const Choice& c, double d) { return model(c, d); }, policy_.config().candidates);
    if (config_.debug_info && rank_ == 0) {
      std::string graces;
      for (std::size_t k = 0; k < arrivals_->grace_s().size(); ++k)
        graces += (k ? ", " : "") + std::to_string(k + 1) + " late: " + std::to_string(arrivals_->grace_s()[k] * 1e3) + " ms";
      log_info("%s n=%d auto (count=%zu %s): arrival tickets wait %s", api_, nranks_, count_, to_string(dtype_),
               graces.empty() ? "for every rank" : graces.c_str());
    }
  }
  if (tickets && !first_call && arrivals_) {
    if (const std::optional<Choice> late = arrivals_->arrive(*tickets, timeout_s)) {
      host.run(*late, plan_for(host, *late));
      return *late;
    }
  }
  const Choice c = policy_.begin_call();
  const Plan* plan = plan_for(host, c);
  // Where the first call measures native (docs/auto.md "The first calls"), that first-use sample is
  // replaced by native's next measurement (Sample::first_use), which must be warm: an engine
  // whose native is slow in its first runs at a size warms it up here, before the timer, on
  // memory the caller does not read (Engine::native_warm_ups, AutoHost::warm_up_native).
  if (first_call && c.algorithm == Algorithm::native) host.warm_up_native(native_warm_ups_);
  timer.time_begin();
  host.run(c, plan);
  timer.time_end();
  ++untaken_;
  const int lag = timer.measurement_lag();
  if (in_flight_ && ++in_flight_age_ >= lag) finish_exchange(host, timeout_s);
  while (untaken_ > lag) {
    const CallTime t = timer.take_time(timeout_s);
    policy_.record(t.seconds, t.entry_ns);
    --untaken_;
    if (policy_.exchange_due()) {
      policy_.fill_exchange(exchange_, rank_);
      timer.exchange_begin(exchange_, timeout_s);  // after the data phase: everyone is here
      in_flight_ = true;
      in_flight_age_ = 0;
      if (lag == 0 && !timer.exchange_ends_at_next_call()) finish_exchange(host, timeout_s);
    }
  }
  return c;
}

void AutoRunner::finish_exchange(AutoHost& host, double timeout_s) {
  timer_->exchange_end(exchange_, timeout_s);
  in_flight_ = false;
  const std::span<const int> known_set = policy_.target_set();
  if (policy_.decide(exchange_) && config_.debug_info && rank_ == 0)
    log_info("%s n=%d auto (count=%zu %s): now %s — %s", api_, nranks_, count_, to_string(dtype_),
             to_string(policy_.incumbent()).c_str(), policy_.last_switch_evidence().c_str());
  if (config_.debug_trace && rank_ == 0)
    log_trace("%s n=%d auto (count=%zu %s): %s", api_, nranks_, count_, to_string(dtype_),
              policy_.last_decision_trace().c_str());
  // A late set just learned: the plans of the candidates told it, now, outside the
  // timed data phase (at most max_late_sets sets per configuration; a set seen before is kept).
  if (policy_.target_set().data() != known_set.data())
    for (Algorithm alg : policy_.config().candidates)
      if (uses_late_set(alg)) {
        const Choice c{alg, -1, policy_.target_set()};
        if (alg != Algorithm::hierarchical || hierarchical_fits(c.late))
          (void)plan_for(host, c);
      }
}

// hierarchical's schedule needs the set to be one whole host of the cost model's hosts.
bool AutoRunner::hierarchical_fits(std::span<const int> set) const {
  const int rph = policy_.config().ranks_per_host, k = static_cast<int>(set.size());
  return rph >= 2 && k == rph && nranks_ % rph == 0 && 2 * rph <= nranks_ && set.front() % rph == 0 &&
         set.back() == set.front() + rph - 1;
}

StragglerReport AutoRunner::report(int nranks) const {
  StragglerReport r;
  r.scores.assign(static_cast<std::size_t>(nranks), 0.0);
  const StragglerPolicy& p = policy_;
  r.active = true;
  r.algorithm = p.incumbent().algorithm;
  r.straggler = p.incumbent().straggler;
  r.late_rank = p.late_rank();
  r.late_set.assign(p.target_set().begin(), p.target_set().end());
  r.delay_s = p.delay_s();
  if (p.scores().size() == r.scores.size()) r.scores = p.scores();
  r.calls = p.calls_begun();
  r.decisions = p.decisions();
  r.exposed_time_exact = p.config().shared_clock;
  if (arrivals_) {
    r.calls += arrivals_->late_calls();  // run without the policy
    r.arrival_calls = arrivals_->calls();
    r.arrival_late_calls = arrivals_->late_calls();
    // Where the tickets went on without the same rank (or set) in most recent calls, the policy
    // never saw that rank late: the report says what the tickets saw and what those calls ran.
    const int late = arrivals_->window_late_rank();
    const std::vector<int>& set = arrivals_->window_late_set();
    if (late >= 0 || !set.empty()) {
      r.late_rank = late;
      r.late_set = set;
      r.scores = arrivals_->late_scores();
      r.delay_s = arrivals_->window_delay_s();
      r.algorithm = set.empty() ? Algorithm::stragglar : Algorithm::stragglar_k;
      r.straggler = set.empty() ? late : -1;
    }
  }
  return r;
}

}  // namespace stragglar::detail
