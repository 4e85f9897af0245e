// The straggler policy behind algorithm = auto (issue #12; docs/auto.md explains it in prose).
//
// Measurement (paper appendix "Persistent Stragglers": T_delay = T_rest − T_straggler, where the
// straggler has the shortest AllReduce time of all GPUs): all ranks leave a call at about the
// same time, so a rank's time inside the call is (common exit − its arrival). Per call, from the
// exchanged in-call times T_r:
//   exposed ≈ min_r T_r            (the last to arrive waited for nobody: the exposed time)
//   late    = argmin_r T_r         (it arrived last)
//   delay   = second-min − min     (how long after the second-last it arrived: the overlap
//                                   StragglAR's ReduceScatter among the others can use)
// This holds whatever ran: under ring/rhd/native the others wait inside the call; under
// StragglAR with the right straggler they run the ReduceScatter meanwhile (their in-call time
// is max(RS, delay) + rest, the straggler's max(RS − delay, 0) + rest); with the wrong
// straggler everyone waits for the late rank and no overlap happens. Where ranks do not leave
// together (a native AllReduce on a loaded host) the estimate is low; with config.shared_clock
// the in-call times are first made exact (latest exit − entry, exact_in_call_times) and the
// same three lines are then exact.
#include "runtime/straggler_policy.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Calls whose last arrival trails by at most this fraction of the call have "nobody late" for
// plan_exploration's second run of a candidate measured once.
constexpr double kQuietDelayFraction = 0.15;
// shared_clock entry times: at most 2^62 ns, so entry + in-call time (<= 10^15 ns) never overflows.
constexpr std::int64_t kMaxEntryNs = std::int64_t{1} << 62;

// The element at (size - 1) / divisor in sorted order, computed in `work` (its capacity is
// reused: deciding makes no heap allocation once the buffers have grown).
double lower_quantile(std::span<const double> v, std::vector<double>& work, std::size_t divisor) {
  if (v.empty()) return kNaN;
  work.assign(v.begin(), v.end());
  const auto q = work.begin() + static_cast<std::ptrdiff_t>((work.size() - 1) / divisor);
  std::nth_element(work.begin(), q, work.end());
  return *q;
}
// The lower median (the smaller middle value of an even count).
double lower_median(std::span<const double> v, std::vector<double>& work) { return lower_quantile(v, work, 2); }
// A candidate's typical exposed time from few measurements: the lower quartile. On a shared host
// the noise is mostly slow outliers (interference only ever slows a call down); the lower
// quartile ignores up to three in four of them, where a median of three ignores one. Every
// candidate is estimated the same way, so comparisons stay fair.
double lower_quartile(std::span<const double> v, std::vector<double>& work) { return lower_quantile(v, work, 4); }

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_int(bool ok, const char* name, long long value, const char* expected) {
  require(ok, std::string("straggler policy: ") + name + " " + std::to_string(value) + " is not valid, expected " +
                  expected);
}
void check_fraction(double v, const char* name, double hi, const char* expected) {
  require(std::isfinite(v) && v >= 0 && v < hi, std::string("straggler policy: ") + name + " " + fmt_double(v) +
                                                    " is not valid, expected " + expected);
}

}  // namespace

namespace {
std::atomic<std::int64_t> g_late_sets_learned{0};
}  // namespace

std::int64_t late_sets_learned_in_process() noexcept { return g_late_sets_learned.load(std::memory_order_relaxed); }

std::string to_string(const Choice& c) {
  std::string s = stragglar::to_string(c.algorithm);
  if (c.straggler >= 0) s += "(straggler " + std::to_string(c.straggler) + ")";
  if (!c.late.empty()) {
    s += "(late ";
    for (std::size_t i = 0; i < c.late.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(c.late[i]);
    }
    s += ')';
  }
  return s;
}

StragglerPolicy::StragglerPolicy(PolicyConfig config, Predictor predictor)
    : config_(std::move(config)), predict_(std::move(predictor)) {
  const PolicyConfig& c = config_;
  check_int(c.nranks >= 1 && c.nranks <= kMaxRanks, "nranks", c.nranks, "1 to 4096 ranks");
  check_int(c.period >= 1 && c.period <= 1000, "period", c.period, "1 to 1000 calls per block");
  check_int(c.exchange_every >= 0 && c.exchange_every <= c.period, "exchange_every", c.exchange_every,
            "0 (= period) to period calls per exchange");
  converging_window_ = window_ = c.exchange_every > 0 ? c.exchange_every : c.period;
  check_int(c.settled_exchange_every == 0 || (c.settled_exchange_every >= window_ && c.settled_exchange_every <= c.period),
            "settled_exchange_every", c.settled_exchange_every, "0 (= exchange_every) or exchange_every to period calls");
  settled_window_ = c.settled_exchange_every > 0 ? c.settled_exchange_every : window_;
  entry_slot_ = std::max(converging_window_, settled_window_);
  slots_ = entry_slot_ * (c.shared_clock ? 2 : 1) + 1;
  check_int(c.min_samples >= 1, "min_samples", c.min_samples, "an integer >= 1");
  check_int(c.history >= c.min_samples && c.history <= 1000, "history", c.history,
            "an integer from min_samples to 1000");
  check_int(c.min_dwell_windows >= 0, "min_dwell_windows", c.min_dwell_windows, "an integer >= 0");
  check_int(c.refresh_windows >= 1, "refresh_windows", c.refresh_windows, "an integer >= 1");
  check_int(c.stale_windows >= 1, "stale_windows", c.stale_windows, "an integer >= 1");
  check_fraction(c.switch_margin, "switch_margin", 1, "a fraction in [0, 1)");
  check_fraction(c.model_error, "model_error", 1, "a fraction in [0, 1)");
  check_fraction(c.fresh_tolerance, "fresh_tolerance", 1, "a fraction in [0, 1)");
  check_fraction(c.min_delay_fraction, "min_delay_fraction", 1, "a fraction in [0, 1)");
  check_fraction(c.noise_prior, "noise_prior", 1, "a fraction in [0, 1)");
  check_int(c.ranks_per_host >= 0 && c.ranks_per_host <= c.nranks, "ranks_per_host", c.ranks_per_host,
            "0 (hosts unknown) to nranks");
  check_int(c.max_late_sets >= 1 && c.max_late_sets <= 64, "max_late_sets", c.max_late_sets, "1 to 64 learned sets");
  check_fraction(c.min_delay_s, "min_delay_s", std::numeric_limits<double>::infinity(), "seconds >= 0");
  require(!c.candidates.empty(), "straggler policy: the candidate list is empty, expected at least one of " +
                                     algorithm_names());
  require(static_cast<bool>(predict_), "straggler policy: the predictor is empty, expected a callable");
  for (std::size_t i = 0; i < c.candidates.size(); ++i) {
    const Algorithm a = c.candidates[i];
    const AlgorithmInfo& info = algorithm_info(a);  // throws for a value not in the table
    require(info.kind != AlgorithmKind::automatic,
            "straggler policy: candidate 'auto' is not valid, expected an algorithm auto can run "
            "(a schedule or native)");
    for (std::size_t j = 0; j < i; ++j)
      require(c.candidates[j] != a,
              std::string("straggler policy: candidate '") + info.name + "' is listed twice, expected each once");
    cands_.push_back({a, info.uses_straggler, uses_late_set(a), {}});
    cands_.back().samples.reserve(static_cast<std::size_t>(c.history));
  }
  // Every buffer at its final size now: deciding makes no heap allocation later (the runtime
  // core promises that for every configuration seen before, auto included).
  const std::size_t K = cands_.size(), H = static_cast<std::size_t>(c.history),
                    P = static_cast<std::size_t>(c.period), N = static_cast<std::size_t>(c.nranks);
  const std::size_t most = std::max({K * H, P, N, K});
  for (auto* v : {&work_, &values_, &devs_, &right_, &wrong_}) v->reserve(most);
  for (auto* v : {&gap_, &exposed_}) v->reserve(P);
  late_per_call_.reserve(P);
  recent_late_.reserve(P + 1);
  recent_gap_.reserve(P + 1);
  count_.reserve(N);
  score_.reserve(N);
  needs_.reserve(K);
  // Late sets (issue #23): P recent calls of up to n/2 ranks each, learned sets of up to n/2.
  const std::size_t half = std::max<std::size_t>(1, N / 2);
  recent_set_ranks_.resize(P * half);
  recent_set_size_.assign(P, 0);
  recent_set_gap_.assign(P, 0.0);
  late_sets_.reserve(static_cast<std::size_t>(c.max_late_sets));
  set_order_.reserve(N);
  window_set_slot_.reserve(P);
  set_gaps_.reserve(P);
  plan_.reserve(K + P + 1);
  if (c.shared_clock) clocked_.reserve(static_cast<std::size_t>(exchange_size()));
  check_int(c.initial_straggler >= -1 && c.initial_straggler < c.nranks, "initial_straggler", c.initial_straggler,
            "a rank in [0, nranks) or -1");
  // The caller's hint (else the API's default, rank n-1) until a late rank is measured.
  target_ = c.initial_straggler >= 0 ? c.initial_straggler : c.nranks - 1;
  noise_ = c.noise_prior;
  scores_.assign(static_cast<std::size_t>(c.nranks), 0.0);
  est_.resize(cands_.size());
  for (Estimate& e : est_) e.fresh_values.reserve(H);
  std::size_t ring = 8;
  while (ring < 2 * static_cast<std::size_t>(c.period) + 2) ring *= 2;
  ring_.resize(ring);

  // Before any measurement: the model's best at no delay (its seconds may be uncalibrated, but
  // every candidate is on the same scale). No survey: from the first measured call on, the
  // candidates are ranked by the model scaled to what was measured, and only those that could
  // be the best are measured (plan_exploration).
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < cands_.size(); ++k) {
    const double p = predict(choice_of(static_cast<int>(k)), 0.0);
    if (p < best) best = p, incumbent_ = static_cast<int>(k);
  }
  if (c.start_with_native)
    for (std::size_t k = 0; k < cands_.size(); ++k)
      if (cands_[k].algorithm == Algorithm::native) incumbent_ = static_cast<int>(k);
  // A candidate without a model of its own (native: no schedule to simulate) cannot be ranked
  // by the model: the first call measures it (the core's first call, which pays first-use costs
  // anyway), so that it is kept or ruled out by what it costs on this host, not explored later.
  for (std::size_t k = 0; k < cands_.size(); ++k) {
    if (cands_[k].uses_straggler) continue;
    const Choice ch = choice_of(static_cast<int>(k));
    const double own = predict_(ch, 0.0);
    if (!(std::isfinite(own) && own > 0) && static_cast<int>(k) != incumbent_) {
      plan_.push_back(static_cast<int>(k));
      break;
    }
  }
  update_next();
}

Choice StragglerPolicy::choice_of(int candidate) const {
  const Candidate& c = cands_[static_cast<std::size_t>(candidate)];
  if (c.uses_set) return {c.algorithm, -1, set_span(target_set_)};
  return {c.algorithm, c.uses_straggler ? target_ : -1, {}};
}

bool StragglerPolicy::available(int candidate) const {
  const Candidate& c = cands_[static_cast<std::size_t>(candidate)];
  if (!c.uses_set) return true;
  if (target_set_ < 0) return false;  // no set of 2+ late ranks has persisted yet
  const std::span<const int> set = set_span(target_set_);
  if (c.algorithm == Algorithm::hierarchical) {
    // Its schedule reduces inside hosts of k ranks: the set must be one whole host, and hosts
    // must be known (docs/auto.md "Several late ranks").
    const int rph = config_.ranks_per_host, k = static_cast<int>(set.size());
    if (rph < 2 || k != rph || config_.nranks % rph != 0 || 2 * rph > config_.nranks || set.front() % rph != 0 ||
        set.back() != set.front() + rph - 1)
      return false;
  }
  const double p = predict_(choice_of(candidate), 0.0);  // a model for it (the core's always has one)
  return std::isfinite(p) && p > 0;
}

int StragglerPolicy::find_set(std::span<const int> set) const {
  for (std::size_t i = 0; i < late_sets_.size(); ++i)
    if (std::equal(set.begin(), set.end(), late_sets_[i].begin(), late_sets_[i].end())) return static_cast<int>(i);
  return -1;
}

bool StragglerPolicy::same_set(std::size_t slot, std::span<const int> set) const {
  const std::size_t half = recent_set_ranks_.size() / static_cast<std::size_t>(config_.period);
  const auto size = static_cast<std::size_t>(recent_set_size_[slot]);
  const auto* first = recent_set_ranks_.data() + slot * half;
  return size >= 2 && std::equal(first, first + size, set.begin(), set.end());
}

// A call's late set (issue #23: a slow node, its ranks late together). Ranks sorted by in-call
// time, shortest first (= latest arrival first): the set is the j ranks before the largest gap
// between neighbours, j in [1, n/2] — when that j is at least 2 and the gap is significant (the
// same rule as for one late rank). Written, ascending, into recent-set slot `slot`.
int StragglerPolicy::call_late_set(std::span<const std::int64_t> all, int call, double exposed_s, std::size_t slot,
                                   double& gap_s) {
  const int n = config_.nranks, S = slots_per_rank(), half = n / 2;
  const auto at = [&](int r) { return all[static_cast<std::size_t>(r * S + call)]; };
  gap_s = 0;
  recent_set_size_[slot] = 0;
  if (half < 2) return 0;
  set_order_.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) set_order_[static_cast<std::size_t>(r)] = r;
  std::partial_sort(set_order_.begin(), set_order_.begin() + half + 1, set_order_.end(),
                    [&](int a, int b) { return at(a) != at(b) ? at(a) < at(b) : a < b; });
  int best_j = 0;
  std::int64_t best_gap = -1;
  for (int j = 1; j <= half; ++j) {
    const std::int64_t g = at(set_order_[static_cast<std::size_t>(j)]) - at(set_order_[static_cast<std::size_t>(j - 1)]);
    if (g > best_gap) best_gap = g, best_j = j;  // ties: the smallest set
  }
  const double g = static_cast<double>(best_gap) * 1e-9;
  if (best_j < 2 || !significant_gap(g, exposed_s)) return 0;
  const std::size_t stride = recent_set_ranks_.size() / static_cast<std::size_t>(config_.period);
  int* out = recent_set_ranks_.data() + slot * stride;
  std::copy(set_order_.begin(), set_order_.begin() + best_j, out);
  std::sort(out, out + best_j);
  recent_set_size_[slot] = best_j;
  gap_s = g;
  return best_j;
}

double StragglerPolicy::predict(const Choice& c, double delay_s) const {
  if (uses_late_set(c.algorithm) && c.late.empty()) return kNaN;  // no set learned: nothing to run
  const double v = predict_(c, delay_s);
  if (std::isfinite(v) && v > 0) return v;
  // No prediction (native: the engine's own AllReduce has no schedule to simulate). It is a
  // bulk-synchronous AllReduce that picks a good algorithm for the size, so it is modelled as
  // the best straggler-agnostic candidate that has a prediction; measurements correct the scale.
  if (algorithm_info(c.algorithm).uses_straggler) return kNaN;
  double best = kNaN;
  for (const Candidate& k : cands_) {
    if (k.uses_straggler || k.algorithm == c.algorithm) continue;
    const double p = predict_(Choice{k.algorithm, -1}, delay_s);
    if (std::isfinite(p) && p > 0 && !(best <= p)) best = p;
  }
  return best;
}

void StragglerPolicy::update_next() {
  next_ = choice_of(plan_pos_ < plan_.size() ? plan_[plan_pos_] : incumbent_);
  incumbent_choice_ = choice_of(incumbent_);
}

Choice StragglerPolicy::begin_call() {
  if (static_cast<std::size_t>(begun_ - decided_) == ring_.size()) {  // record/decide lag grew: grow
    std::vector<Ran> bigger(ring_.size() * 2);
    for (std::int64_t call = decided_; call < begun_; ++call)
      bigger[static_cast<std::size_t>(call) & (bigger.size() - 1)] = slot(call);
    ring_.swap(bigger);
  }
  const bool exploring = plan_pos_ < plan_.size();
  const int cand = exploring ? plan_[plan_pos_++] : incumbent_;
  // Budgets count calls run, not planned: a plan replaced within a block (a switch) ran less.
  if (exploring) ++cands_[static_cast<std::size_t>(cand)].burst_calls;
  const Choice c = choice_of(cand);
  slot(begun_) = {cand, c.straggler, cands_[static_cast<std::size_t>(cand)].uses_set ? target_set_ : -1, -1, -1};
  ++begun_;
  update_next();
  return c;
}

void StragglerPolicy::record(double seconds_in_call, std::int64_t entry_ns) {
  // Runs every call: the messages are built only when a check fails.
  if (recorded_ >= begun_)
    throw Error(ErrorCode::InvalidUsage, "straggler policy: record() of call " + std::to_string(recorded_) +
                                             " before its begin_call(), expected one begin_call() per recorded call");
  if (!(std::isfinite(seconds_in_call) && seconds_in_call >= 0))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: time in call " + fmt_double(seconds_in_call) +
                                             " s is not valid, expected seconds >= 0");
  if (config_.shared_clock && (entry_ns < 0 || entry_ns > kMaxEntryNs))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: entry time " + std::to_string(entry_ns) + " ns of call " +
                                             std::to_string(recorded_) + ", expected 0 to 2^62 ns (shared_clock)");
  // Capped at 10^6 s so nanoseconds stay far from int64 overflow.
  slot(recorded_).ns = std::llround(std::min(seconds_in_call, 1e6) * 1e9);
  slot(recorded_).entry_ns = entry_ns;
  ++recorded_;
}

bool StragglerPolicy::exchange_due() const noexcept { return recorded_ - filled_ >= window_; }

std::uint64_t StragglerPolicy::window_digest(std::int64_t first_call) const {
  // FNV-1a over what every rank must agree on: where the window starts and what each call ran.
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::int64_t v) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  mix(first_call);
  mix(config_.nranks);
  mix(slots_);  // the layout (shared_clock doubles it): ranks must agree on it
  mix(config_.period);
  mix(window_);
  for (int j = 0; j < window_; ++j) {
    const Ran& r = slot(first_call + j);
    mix(static_cast<int>(cands_[static_cast<std::size_t>(r.candidate)].algorithm));
    mix(r.straggler);
    mix(r.set);
    for (int x : set_span(r.set)) mix(x);
  }
  return h & 0x3fffffffffffffffull;  // non-negative: -1 marks "no contribution"
}

void StragglerPolicy::fill_exchange(std::span<std::int64_t> all, int rank) {
  if (!exchange_due())
    throw Error(ErrorCode::InvalidUsage, "straggler policy: fill_exchange() with " + std::to_string(recorded_ - filled_) +
                                             " recorded calls waiting, expected " + std::to_string(window_) +
                                             " (calls per exchange)");
  if (all.size() != static_cast<std::size_t>(exchange_size()))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: exchange array of " + std::to_string(all.size()) +
                                             " values, expected " + std::to_string(exchange_size()) +
                                             " (nranks × slots_per_rank)");
  if (rank < 0 || rank >= config_.nranks) check_int(false, "rank", rank, "a rank in [0, nranks)");
  std::fill(all.begin(), all.end(), std::int64_t{-1});
  const std::size_t base = static_cast<std::size_t>(rank) * static_cast<std::size_t>(slots_per_rank());
  for (int j = 0; j < entry_slot_; ++j) all[base + static_cast<std::size_t>(j)] = j < window_ ? slot(filled_ + j).ns : 0;
  if (config_.shared_clock)
    for (int j = 0; j < entry_slot_; ++j)
      all[base + static_cast<std::size_t>(entry_slot_ + j)] = j < window_ ? slot(filled_ + j).entry_ns : 0;
  all[base + static_cast<std::size_t>(slots_ - 1)] = static_cast<std::int64_t>(window_digest(filled_));
  filled_ += window_;
}

// A gap between the last arrival and the one before it that names a late rank: at least
// min_delay_s and min_delay_fraction of the call.
bool StragglerPolicy::significant_gap(double gap_s, double exposed_s) const {
  return gap_s > 0 && gap_s >= std::max(config_.min_delay_s, config_.min_delay_fraction * exposed_s);
}

void StragglerPolicy::estimate_all(double delay_all_s, double delay_target_s, double persistence, double delay_set_s,
                                   double set_persistence) {
  const std::int64_t window = decided_ / config_.period;
  std::vector<double>& all_values = values_;
  for (std::size_t k = 0; k < cands_.size(); ++k) {
    const Candidate& c = cands_[k];
    Estimate& e = est_[k];
    // A straggler-using candidate overlaps the delay only in the calls in which its straggler
    // is in fact the last to arrive (the fraction `persistence` of recent calls): its model is
    // the mixture. A straggler late in one call of three is worth little; one that is late in
    // every call, all of the overlap.
    if (c.uses_set && !available(static_cast<int>(k))) {  // no late set (or not a host): not a candidate now
      e.predicted = e.value = kNaN;
      e.fresh = 0;
      e.measured = false;
      e.fresh_values.clear();
      continue;
    }
    if (c.uses_set) {  // the same mixture, over the calls in which the target set was late together
      const Choice ch = choice_of(static_cast<int>(k));
      e.predicted = set_persistence >= 1 ? predict(ch, delay_set_s)
                                         : set_persistence * predict(ch, delay_set_s) + (1 - set_persistence) * predict(ch, 0.0);
    } else if (c.uses_straggler) {
      const Choice ch = choice_of(static_cast<int>(k));
      e.predicted = persistence >= 1 ? predict(ch, delay_target_s)
                                     : persistence * predict(ch, delay_target_s) + (1 - persistence) * predict(ch, 0.0);
    } else {
      e.predicted = predict(choice_of(static_cast<int>(k)), delay_all_s);
    }
    // Two regimes measured (a straggler late in some calls only): each sample at its regime's
    // level of the rebuilt mixture (regime_mixture).
    const Regimes regimes =
        c.uses_straggler && !c.uses_set && persistence < 1 ? regime_mixture(k, delay_target_s, persistence) : Regimes{};
    e.fresh_values.clear();
    all_values.clear();
    for (auto s = c.samples.rbegin(); s != c.samples.rend(); ++s) {
      // Move the measurement to the current delay with the model's ratio (the model is used
      // only in ratios: its absolute seconds may be off). No model (native): assumed not to
      // depend on the delay, as a bulk-synchronous AllReduce does not.
      const double ratio = std::isfinite(e.predicted) && std::isfinite(s->predicted_s) ? e.predicted / s->predicted_s : 1.0;
      const double v = regimes.mixture > 0 && !s->first_use && std::isfinite(s->predicted_s)
                           ? s->exposed_s / s->predicted_s / (s->overlapped ? regimes.level_late : regimes.level_other) *
                                 regimes.mixture
                           : s->exposed_s * ratio;
      all_values.push_back(v);
      if (!s->first_use && std::abs(ratio - 1) <= config_.fresh_tolerance && window - s->window <= config_.stale_windows)
        e.fresh_values.push_back(v);
    }
    e.fresh = static_cast<int>(e.fresh_values.size());
    e.measured = e.fresh >= config_.min_samples;
    e.value = e.measured ? lower_quartile(e.fresh_values, work_) : lower_quartile(all_values, work_);
  }
  // The relative spread of calls (σ): 1.4826 × the median absolute relative deviation from
  // each candidate's median (robust to outliers, as the medians are), pooled over candidates
  // with at least 3 fresh measurements (two say little about spread), and smoothed over
  // decisions from config.noise_prior: it is a property of the host more than of one window.
  std::vector<double>& devs = devs_;
  devs.clear();
  for (const Estimate& e : est_) {
    if (e.fresh < 3) continue;
    std::vector<double>& v = work_;
    v.assign(e.fresh_values.begin(), e.fresh_values.end());
    std::sort(v.begin(), v.end());
    const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    for (double x : v) devs.push_back(std::abs(x / med - 1));
  }
  if (!devs.empty()) {
    std::sort(devs.begin(), devs.end());
    const std::size_t m = devs.size() / 2;
    const double sigma = 1.4826 * (devs.size() % 2 ? devs[m] : (devs[m - 1] + devs[m]) / 2);
    noise_ = 0.75 * noise_ + 0.25 * sigma;
  }
  // Never measured: the model scaled by how far it is off for the measured candidates.
  std::vector<double>& calib = values_;
  calib.clear();
  for (std::size_t k = 0; k < cands_.size(); ++k)
    if (!cands_[k].samples.empty() && !cands_[k].first_use_only() && std::isfinite(est_[k].predicted))
      calib.push_back(est_[k].value / est_[k].predicted);
  const double scale = lower_median(calib, work_);
  for (std::size_t k = 0; k < cands_.size(); ++k)
    if (cands_[k].samples.empty()) est_[k].value = est_[k].predicted * scale;  // NaN when either is unknown
}

// A straggler-using candidate whose straggler is late in some of the recent calls only (two that
// alternate, a different rank each call) has two regimes: the calls that overlap the delay and
// the calls where another rank is late and nothing overlaps. The model moves both to the mixture
// of the two (estimate_all), but on a shared host it is off by a different factor in each: on
// the 2-core VM StragglAR told rank 1 of alternating ranks 1 and 6 measured ~1.1× the model when
// rank 1 was late and ~1.6× when rank 6 was, so one lower quartile over both took the fast
// regime's factor for the whole (estimated ~20 ms, ran ~30, native ~24). With measurements in
// both regimes, each regime's level is its median measured/model ratio; returns the two levels
// and the mixture rebuilt from them, which a sample's measured/model ratio over its regime's level
// scales — mixture 0 when a regime has no recent measurement (the model's mixture moves them then).
StragglerPolicy::Regimes StragglerPolicy::regime_mixture(std::size_t k, double delay_target_s, double persistence) {
  const Candidate& c = cands_[k];
  const std::int64_t window = decided_ / config_.period;
  const Choice ch = choice_of(static_cast<int>(k));
  const double at_right = predict(ch, delay_target_s), at_wrong = predict(ch, 0.0);
  if (!std::isfinite(at_right) || !std::isfinite(at_wrong)) return {};
  right_.clear();
  wrong_.clear();
  for (const Sample& s : c.samples) {
    if (s.first_use || !std::isfinite(s.predicted_s) || window - s.window > config_.stale_windows) continue;
    (s.overlapped ? right_ : wrong_).push_back(s.exposed_s / s.predicted_s);
  }
  if (right_.empty() || wrong_.empty()) return {};  // one regime seen: the model moves it
  Regimes r;
  r.level_late = lower_median(right_, work_);
  r.level_other = lower_median(wrong_, work_);
  r.mixture = persistence * r.level_late * at_right + (1 - persistence) * r.level_other * at_wrong;
  return r;
}

void StragglerPolicy::plan_exploration(int best) {
  const std::int64_t window = decided_ / config_.period;
  plan_.clear();
  plan_pos_ = 0;
  if (best < 0) best = incumbent_;
  // "Could be the best": within the model's error of the best estimate, widened by twice the
  // noise, since a candidate with one measurement may have met an outlier.
  const double best_value = est_[static_cast<std::size_t>(best)].value;
  const double band = std::isfinite(best_value) ? best_value * (1 + config_.model_error + 2 * noise_)
                                                : std::numeric_limits<double>::infinity();
  // Who needs measuring: a candidate never measured (one probe), one measured fewer than
  // min_samples times (a single outlier must not rule it out for good), or one whose estimate
  // could be the best within the model's error but lacks fresh measurements. At most min_samples
  // exploration calls per candidate every refresh_windows decisions, so delays that keep
  // changing do not turn into endless exploration.
  // A candidate never measured is ranked by the model alone (its ratio to the model's best at
  // the current delays): the scale measured on other candidates differs from one algorithm to
  // the next on a loaded host, so scaled estimates would let far candidates in. Its band is the
  // model's error alone: predictions carry no measurement noise (widened by 2σ, RHD and Ring were
  // probed beside a 100 ms straggler at ~+80 % a call: issue 20's `jitter` pattern).
  double model_best = std::numeric_limits<double>::infinity();
  for (const Estimate& e : est_)
    if (std::isfinite(e.predicted)) model_best = std::min(model_best, e.predicted);
  const double model_band = model_best * (1 + config_.model_error);
  std::vector<Need>& needs = needs_;
  needs.clear();
  for (std::size_t k = 0; k < cands_.size(); ++k) {
    if (static_cast<int>(k) == incumbent_ || !available(static_cast<int>(k))) continue;
    const Estimate& e = est_[k];
    Candidate& c = cands_[k];
    if (window - c.burst_start >= config_.refresh_windows) c.burst_start = window, c.burst_calls = 0;
    int calls = 0;
    const bool unknown = !std::isfinite(e.value);
    // A first-use measurement alone (native's, from the configuration's first call) does not
    // count: the candidate is ranked by the model, as if never measured, and measured again.
    const int have = c.first_use_only() ? 0 : static_cast<int>(c.samples.size());
    // Far candidates (beyond the band) are not measured at all: the model, scaled by what was
    // measured, rules them out (a 300 ms straggler: ring, rhd and native are not run once).
    if (unknown)
      calls = std::min(1, config_.min_samples - c.burst_calls);
    else if ((have == 0 && std::isfinite(e.predicted) ? e.predicted <= model_band : e.value <= band) && e.fresh == 0)
      calls = std::min(1, config_.min_samples - c.burst_calls);  // one call: more only if it looks faster (below)
    const Estimate& inc = est_[static_cast<std::size_t>(incumbent_)];
    // A straggler-agnostic candidate measured once, within the band, that the model ranks level
    // with the best candidate, with no rank late: one run is one draw of calls that vary by ±15 % on a
    // loaded host, and its first run pays first-use costs (the MPI library's first messages of
    // those sizes). Traced on the 2-core VM, `none`: Ring 31.4 ms in its one run, ruled out
    // against native's and RHD's 22-24 ms estimates, then ~25.5 ms a call in the fixed entry
    // where auto's RHD ran 29-30. Once more before it is ruled out. Only where nobody is late (the
    // last arrival's median gap under kQuietDelayFraction of a call: `none` on that VM has 0.5-3.6
    // ms of arrival skew in 25 ms calls; a different rank late in every call has a median gap) and
    // the model sees no candidate ahead (level: within switch_margin): beside a late rank,
    // re-probing Ring and native cost `alternating` 5-10 % (StragglerPolicy tests). (A candidate
    // told a straggler has the rule below: its one run also depends on who was late.)
    const bool nobody_late = delay_s_ <= kQuietDelayFraction * best_value;
    if (calls <= 0 && nobody_late && !c.uses_straggler && have == 1 && e.fresh == 1 && e.value <= band &&
        std::isfinite(e.predicted) && e.predicted <= model_best * (1 + config_.switch_margin))
      calls = std::min(1, config_.min_samples - c.burst_calls);
    // Native measured fewer than min_samples times, within the noise of the incumbent
    // (switch_margin + 2σ), whoever is late: more runs make it measured, and measured native
    // replaces a schedule with switch_margin alone, without the standard errors (decide()). Its
    // one run beside a schedule's many is otherwise a coin toss that decides the rest of the run.
    if (calls <= 0 && c.algorithm == Algorithm::native && e.fresh >= 1 && e.fresh < config_.min_samples &&
        std::isfinite(inc.value) &&
        e.value <= inc.value * (1 + config_.switch_margin + 2 * noise_))
      calls = std::min(1, config_.min_samples - c.burst_calls);
    // One fresh measurement that contradicts a model gain beyond the model's error (a slow
    // outlier, the noise here being slow calls) is measured once more before it rules the
    // candidate out (issue #23: stragglar-k met an outlier in its single probe).
    if (calls <= 0 && e.fresh > 0 && e.fresh < config_.min_samples && std::isfinite(e.predicted) &&
        std::isfinite(inc.predicted) && e.predicted * (1 + config_.model_error) < inc.predicted)
      calls = std::min(1, config_.min_samples - c.burst_calls);
    const bool looks_faster = have == 0 ? e.predicted * (1 + config_.switch_margin) < inc.predicted  // model alone
                                        : e.value * (e.measured ? 1 : 1 + config_.switch_margin) < inc.value;
    if (calls <= 0 && looks_faster)
      // Looks faster but not beyond the noise, or looks faster at a delay its measurements
      // were not taken at (budget spent): one call per plan to settle the question.
      calls = 1;
    if (calls > 0) needs.push_back({static_cast<int>(k), calls, unknown, e.value});
  }
  std::sort(needs.begin(), needs.end(), [](const Need& a, const Need& b) {
    if (a.unknown != b.unknown) return a.unknown;
    if (!a.unknown && a.value != b.value) return a.value < b.value;
    return a.candidate < b.candidate;
  });
  // The first block surveys what could be the best (up to P calls): later, at most P/2 calls
  // per block, so that a benchmark's median never sees exploration.
  const std::size_t cap = static_cast<std::size_t>(window == 0 ? config_.period : std::max(1, config_.period / 2));
  for (int round = 0; plan_.size() < cap; ++round) {  // round robin: breadth before depth
    bool any = false;
    for (const Need& n : needs)
      if (n.calls > round && plan_.size() < cap) {
        plan_.push_back(n.candidate);
        any = true;
      }
    if (!any) break;
  }
  // Periodic refresh: one call of the near candidate measured longest ago, so that drift (a
  // challenger getting faster) is noticed.
  if (window - last_refresh_window_ >= config_.refresh_windows) {
    last_refresh_window_ = window;
    int pick = -1;
    std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      if (static_cast<int>(k) == incumbent_ || !(est_[k].value <= band) || cands_[k].samples.empty() ||
          std::find(plan_.begin(), plan_.end(), static_cast<int>(k)) != plan_.end())
        continue;
      const std::int64_t newest = cands_[k].samples.back().window;
      if (newest < oldest) oldest = newest, pick = static_cast<int>(k);
    }
    if (pick >= 0) plan_.push_back(pick);
  }
}

// shared_clock: every rank's in-call time of each call of the window replaced by the latest exit
// − its entry — what it would have spent had everyone left together. The shortest is then the
// call's exposed time (latest exit − latest entry) and their differences the arrival gaps, so the
// rest of decide() reads them as it reads in-call times without a shared clock.
std::span<const std::int64_t> StragglerPolicy::exact_in_call_times(std::span<const std::int64_t> all) {
  const int n = config_.nranks, S = slots_per_rank();
  clocked_.assign(all.begin(), all.end());
  const auto idx = [S](int r, int j) { return static_cast<std::size_t>(r * S + j); };
  for (int j = 0; j < window_; ++j) {
    std::int64_t last_exit = std::numeric_limits<std::int64_t>::min();
    for (int r = 0; r < n; ++r) last_exit = std::max(last_exit, all[idx(r, entry_slot_ + j)] + all[idx(r, j)]);
    for (int r = 0; r < n; ++r) clocked_[idx(r, j)] = last_exit - all[idx(r, entry_slot_ + j)];
  }
  return clocked_;
}

bool StragglerPolicy::decide(std::span<const std::int64_t> all) {
  const int n = config_.nranks, P = config_.period, W = window_, S = slots_per_rank();
  require(filled_ > decided_, "straggler policy: decide() without a filled exchange, expected fill_exchange() first");
  if (all.size() != static_cast<std::size_t>(exchange_size()))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: exchange array of " + std::to_string(all.size()) +
                                             " values, expected " + std::to_string(exchange_size()) +
                                             " (nranks × slots_per_rank)");
  const std::int64_t first = decided_;
  const std::int64_t window = block();  // staleness, dwell and exploration count blocks of P calls
  const auto at = [&](int r, int j) { return all[static_cast<std::size_t>(r * S + j)]; };
  const std::int64_t digest = static_cast<std::int64_t>(window_digest(first));
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < S; ++j)
      if (at(r, j) < 0)
        throw Error(ErrorCode::InvalidUsage, "straggler policy: rank " + std::to_string(r) +
                                                 " contributed nothing to exchange " + std::to_string(decisions_) +
                                                 " (slot " + std::to_string(j) +
                                                 " is negative), expected every rank to fill_exchange() before the max");
    if (at(r, S - 1) != digest)
      throw Error(ErrorCode::Mismatch,
                  "straggler policy: rank " + std::to_string(r) + " ran different choices or counted calls differently in calls " +
                      std::to_string(first) + ".." + std::to_string(first + W - 1) + " than this rank, expected every rank "
                      "to call begin_call/record/fill_exchange/decide at the same calls");
  }
  if (config_.shared_clock) all = exact_in_call_times(all);  // `at` reads the exact times from here on

  // Per call: who arrived last, by how much, and the exposed time.
  // Per-window buffers are members: their capacity is reused, so deciding allocates nothing
  // once they have grown (a configuration seen before makes no heap allocation, auto included).
  std::vector<int>& late = late_per_call_;
  std::vector<double>& gap = gap_, &exposed = exposed_;
  std::vector<int>& count = count_;
  std::vector<double>& score = score_;
  late.assign(static_cast<std::size_t>(W), 0);
  gap.assign(static_cast<std::size_t>(W), 0.0);
  exposed.assign(static_cast<std::size_t>(W), 0.0);
  count.assign(static_cast<std::size_t>(n), 0);
  score.assign(static_cast<std::size_t>(n), 0.0);
  window_set_slot_.assign(static_cast<std::size_t>(W), -1);
  for (int j = 0; j < W; ++j) {
    int lo = 0;
    std::int64_t min1 = at(0, j), min2 = std::numeric_limits<std::int64_t>::max(), max = at(0, j);
    for (int r = 1; r < n; ++r) {
      const std::int64_t t = at(r, j);
      if (t < min1) min2 = min1, min1 = t, lo = r;  // ties: the lowest rank
      else if (t < min2) min2 = t;
      max = std::max(max, t);
    }
    if (n == 1) min2 = min1;
    const auto uj = static_cast<std::size_t>(j);
    late[uj] = lo;
    exposed[uj] = static_cast<double>(min1) * 1e-9;
    gap[uj] = static_cast<double>(min2 - min1) * 1e-9;
    const bool significant = significant_gap(gap[uj], exposed[uj]);
    // The vote runs over the last P calls, across exchanges (one call per exchange at first). A
    // first call that follows a synchronisation says nothing about arrivals: no vote.
    if (first + j == 0 && config_.first_call_synchronised) continue;
    if (recent_late_.size() == static_cast<std::size_t>(P)) {
      recent_late_.erase(recent_late_.begin());
      recent_gap_.erase(recent_gap_.begin());
    }
    recent_late_.push_back(significant ? lo : -1);
    recent_gap_.push_back(gap[uj]);
    // The same call's late set of 2+ ranks, in the ring of the last P calls' sets.
    std::size_t set_slot;
    if (recent_set_count_ < P) {
      set_slot = static_cast<std::size_t>((recent_set_head_ + recent_set_count_++) % P);
    } else {
      set_slot = static_cast<std::size_t>(recent_set_head_);
      recent_set_head_ = (recent_set_head_ + 1) % P;
    }
    double set_gap = 0;
    call_late_set(all, j, exposed[uj], set_slot, set_gap);
    recent_set_gap_[set_slot] = set_gap;
    window_set_slot_[uj] = static_cast<int>(set_slot);
    if (max > 0)
      for (int r = 0; r < n; ++r)
        score[static_cast<std::size_t>(r)] += static_cast<double>(max - at(r, j)) / static_cast<double>(max) / W;
  }
  std::copy(score.begin(), score.end(), scores_.begin());

  // The late rank: late (by a significant margin) in most of the last P calls, and in at least
  // two of them (one late call is no persistent straggler: it is never chased). Otherwise none
  // is named, and the straggler given to StragglAR stays where it was (hysteresis).
  const int old_target = target_, old_late = late_;
  const Choice old_choice = incumbent_choice_;
  const std::size_t recent = recent_late_.size();  // the last P calls (fewer at first)
  const int voters = static_cast<int>(recent);
  int significant = 0;
  for (std::size_t j = 0; j < recent; ++j)
    if (const int who = recent_late_[j]; who >= 0) ++count[static_cast<std::size_t>(who)], ++significant;
  late_ = -1;
  for (int r = 0; r < n; ++r)
    if (2 * count[static_cast<std::size_t>(r)] > voters && count[static_cast<std::size_t>(r)] >= std::min(2, P)) late_ = r;
  // StragglAR's straggler moves to the late rank only when the current one is late in less than
  // half as many of the last P calls: two stragglers that alternate keep it on one of them
  // (right every other call, as StragglAR told either would be) instead of always one call behind.
  if (late_ >= 0 && late_ != target_ && 2 * count[static_cast<std::size_t>(target_)] < count[static_cast<std::size_t>(late_)])
    target_ = late_;
  delay_s_ = lower_median(recent_gap_, work_);
  // The overlap a straggler-using candidate gets with the current target: the median delay of
  // the last P calls in which the target was the last to arrive, and the fraction of those
  // calls (its persistence: a straggler that does not persist is not worth chasing).
  std::vector<double>& target_gap = values_;
  target_gap.clear();
  for (std::size_t j = 0; j < recent; ++j)
    if (recent_late_[j] == target_) target_gap.push_back(recent_gap_[j]);
  const double delay_target = target_gap.empty() ? 0.0 : lower_median(target_gap, work_);
  const double persistence = recent ? static_cast<double>(target_gap.size()) / static_cast<double>(recent) : 0.0;

  // The late set (issue #23: a slow node): the same rules as for one rank. A set of 2+ ranks
  // late together (identical sets) in most of the last P calls and in at least two is the late
  // set; it is learned (added to late_sets_, at most max_late_sets) and becomes the target of
  // stragglar-k / hierarchical when the current target set is late in less than half as many
  // calls. Random late pairs never reach a majority: they are not chased. Every input is
  // exchanged data, so every rank learns the same sets in the same order.
  const int old_target_set = target_set_;
  late_set_ = -1;
  int late_set_count = 0;
  const auto slot_at = [&](int i) { return static_cast<std::size_t>((recent_set_head_ + i) % P); };
  for (int i = 0; i < recent_set_count_ && late_set_count == 0; ++i) {
    const std::size_t si = slot_at(i);
    if (recent_set_size_[si] < 2) continue;
    const std::size_t stride = recent_set_ranks_.size() / static_cast<std::size_t>(P);
    const std::span<const int> set(recent_set_ranks_.data() + si * stride, static_cast<std::size_t>(recent_set_size_[si]));
    int same = 0;
    for (int m = 0; m < recent_set_count_; ++m) same += same_set(slot_at(m), set) ? 1 : 0;
    if (2 * same > recent_set_count_ && same >= std::min(2, P)) {
      late_set_count = same;
      late_set_ = find_set(set);
      if (late_set_ < 0 && late_sets_.size() < static_cast<std::size_t>(config_.max_late_sets)) {
        late_sets_.emplace_back(set.begin(), set.end());  // learning a set allocates, once per set
        g_late_sets_learned.fetch_add(1, std::memory_order_relaxed);
        late_set_ = static_cast<int>(late_sets_.size()) - 1;
      }
    }
  }
  const auto set_count = [&](int set) {
    int c = 0;
    for (int m = 0; set >= 0 && m < recent_set_count_; ++m) c += same_set(slot_at(m), set_span(set)) ? 1 : 0;
    return c;
  };
  if (late_set_ >= 0 && late_set_ != target_set_ && 2 * set_count(target_set_) < late_set_count) target_set_ = late_set_;
  std::vector<double>& set_gaps = set_gaps_;
  set_gaps.clear();
  for (int m = 0; target_set_ >= 0 && m < recent_set_count_; ++m)
    if (same_set(slot_at(m), set_span(target_set_))) set_gaps.push_back(recent_set_gap_[slot_at(m)]);
  const double delay_set = set_gaps.empty() ? 0.0 : lower_median(set_gaps, work_);
  const double set_persistence =
      recent_set_count_ ? static_cast<double>(set_gaps.size()) / static_cast<double>(recent_set_count_) : 0.0;

  // Measurements of the window, each with the overlap its choice could use in that call (a
  // StragglAR call told the wrong rank overlapped nothing: delay 0).
  for (int j = 0; j < W; ++j) {
    const Ran& r = slot(first + j);
    Candidate& c = cands_[static_cast<std::size_t>(r.candidate)];
    const auto uj = static_cast<std::size_t>(j);
    double d = c.uses_straggler ? (late[uj] == r.straggler ? gap[uj] : 0.0) : gap[uj];
    if (c.uses_set) {
      // Told a set: it overlapped the gap before that set when exactly that set was late, the
      // single gap when one rank of the set was late alone, else nothing.
      const std::span<const int> told = set_span(r.set);
      const int ws = window_set_slot_[uj];
      if (ws >= 0 && same_set(static_cast<std::size_t>(ws), told))
        d = recent_set_gap_[static_cast<std::size_t>(ws)];
      else
        d = std::find(told.begin(), told.end(), late[uj]) != told.end() ? gap[uj] : 0.0;
    }
    // The configuration's first call, after the agreement: everyone had arrived, and it paid
    // first-use costs. A measurement at no delay, worth keeping only for a candidate that does
    // not depend on who is late (the first call runs one without a model: native).
    const bool first_use = first + j == 0 && config_.first_call_synchronised;
    if (first_use) {
      if (c.uses_straggler) continue;
      d = 0;
    }
    if (c.first_use_only()) c.samples.clear();  // a later call replaces the first-use measurement
    if (c.samples.size() == static_cast<std::size_t>(config_.history)) c.samples.erase(c.samples.begin());
    const bool overlapped =
        c.uses_straggler && !c.uses_set && late[uj] == r.straggler && significant_gap(gap[uj], exposed[uj]);
    c.samples.push_back(
        {exposed[uj], predict(Choice{c.algorithm, r.straggler, set_span(r.set)}, d), window, first_use, overlapped});
  }
  estimate_all(delay_s_, delay_target, persistence, delay_set, set_persistence);

  int best = -1;
  for (std::size_t k = 0; k < est_.size(); ++k)
    if (std::isfinite(est_[k].value) && !cands_[k].first_use_only() &&  // a cold first call: measured again first
        (best < 0 || est_[k].value < est_[static_cast<std::size_t>(best)].value))
      best = static_cast<int>(k);

  // Hysteresis. Measured against measured: the challenger must be faster by switch_margin plus
  // 1.5 standard errors of the difference of the two estimates (so the margin grows with the
  // host's noise and shrinks as measurements accumulate; measured native by switch_margin alone,
  // below), and may not switch straight back to
  // the choice just left within min_dwell_windows decisions. Model against incumbent: an
  // estimate without enough fresh measurements behind it switches only for a gain larger than
  // the model's error.
  // The evidence is text for STRAGGLAR_DEBUG=INFO: built only when asked for (it allocates).
  std::string reason;
  bool switched = false;
  const bool words = config_.keep_evidence;
  if (best >= 0 && best != incumbent_) {
    const Estimate& b = est_[static_cast<std::size_t>(best)];
    const Estimate& i = est_[static_cast<std::size_t>(incumbent_)];
    if (!std::isfinite(i.value)) {
      switched = true;
      if (words) reason = "the previous choice has no estimate";
    } else if (b.measured || (b.fresh >= 1 && i.fresh >= 1)) {
      // (One fresh measurement is enough to switch when it beats the incumbent's by the margin:
      // a shared host's noise only slows calls down, so a fast call is no accident.)
      // Two lower quartiles of m_b and m_i samples differ by chance by about
      // 1.36·σ·sqrt(1/m_b + 1/m_i) (the standard error of a quartile is 1.36·σ/sqrt(m)); 1.5 of
      // those: ~7% of comparisons between equal candidates, and the dwell rule stops those
      // from flapping back.
      const double se = 1.36 * noise_ * std::sqrt(1.0 / b.fresh + (i.measured ? 1.0 / i.fresh : 0.0));
      // Native is what the user runs without us: a schedule must beat it by the whole margin to
      // replace it or to stay chosen, so native measured (min_samples fresh) replaces a schedule
      // when lower by switch_margin alone, without the standard errors. Where calls vary by
      // ±10 % (the 2-core VM), a 5-10 % difference stays inside the whole margin for a benchmark's
      // length, and the first candidate measured stayed chosen: RHD for most of `random-rank` and
      // `imbalance`, where MPI_Allreduce ran 5-12 % faster (docs/auto.md "Choice and hysteresis").
      const bool native_over_schedule = cands_[static_cast<std::size_t>(best)].algorithm == Algorithm::native && b.measured;
      const double margin =
          config_.switch_margin + (native_over_schedule ? 0.0 : std::min(1.5 * se, config_.model_error));
      // Dwell: no measured switch straight back to the choice just left (flapping). The choice,
      // not the candidate: StragglAR told another rank is another choice (a straggler that moved).
      const bool dwell_ok = !(choice_of(best) == previous_choice_) || !i.measured || incumbent_by_model_ ||
                            window - last_change_window_ >= config_.min_dwell_windows;
      if (b.value * (1 + margin) < i.value && dwell_ok) {
        switched = true;
        if (words)
          reason = "measured " + ms(b.value) + " vs " + ms(i.value) + " (margin " + fmt_double(std::round(margin * 1000) / 10) +
                   "%: " +
                   (native_over_schedule ? "the switch margin alone, measured native over a schedule)"
                                         : fmt_double(config_.switch_margin * 100) + "% + 1.5 standard errors at noise " +
                                               fmt_double(std::round(noise_ * 1000) / 10) + "%)");
        incumbent_by_model_ = false;
      }
    } else if (b.value * (1 + config_.model_error * (i.measured ? 1 : 2)) < i.value) {
      // (An incumbent measured only once may have met a slow outlier: then the model must
      // promise twice the gain.)
      switched = true;
      if (words)
        reason = "estimate " + ms(b.value) + " (too few fresh measurements: the model moves older ones to this delay) vs " +
               ms(i.value) + ", a gain beyond the model error " + fmt_double(config_.model_error * 100) + "%";
      incumbent_by_model_ = true;
    }
    if (switched) {
      if (!std::isfinite(i.value)) incumbent_by_model_ = !b.measured;
      previous_choice_ = old_choice;
      incumbent_ = best;
      last_change_window_ = window;
    }
  }
  // Exploration is planned once per block of P calls (its budgets count blocks), and again when
  // the choice or StragglAR's straggler changed: decisions after every call do not multiply it.
  const std::int64_t next_block = (decided_ + W) / P;
  if (switched || target_ != old_target || late_ != old_late || target_set_ != old_target_set ||
      next_block != planned_block_) {
    plan_exploration(best);
    planned_block_ = next_block;
  }
  decided_ += W;
  ++decisions_;
  update_next();

  const bool changed = !(incumbent_choice_ == old_choice);
  // The next window: every P calls once settled — P calls in a row whose decisions changed
  // nothing, explored nothing and kept a measured choice (settled_exchange_every) — back to every
  // call at any change or planned exploration. Only when no later window is filled yet (engines that
  // decide with a lag keep one window length: they never set settled_exchange_every), and a settled
  // window starts on a block boundary, so it is the block exploration is planned for.
  const bool quiet = plan_pos_ >= plan_.size() && !changed && late_ == old_late && target_set_ == old_target_set &&
                     est_[static_cast<std::size_t>(incumbent_)].measured;
  quiet_calls_ = quiet ? std::min(quiet_calls_ + W, P) : 0;  // only >= P matters (no overflow)
  if (filled_ == decided_) {
    if (quiet_calls_ < P) window_ = converging_window_;
    else if (decided_ % settled_window_ == 0 && decided_ % P == 0) window_ = settled_window_;
  }
  if (changed && words) {
    if (reason.empty() && target_set_ != old_target_set)
      reason = "the late set became " + to_string(Choice{Algorithm::stragglar_k, -1, set_span(target_set_)});
    if (reason.empty()) reason = "the straggler moved from rank " + std::to_string(old_target) + " to rank " + std::to_string(target_);
    std::string e = "after call " + std::to_string(decided_ - 1) + ": " + to_string(old_choice) + " -> " +
                    to_string(incumbent_choice_) + ": " + reason + "; calls " + std::to_string(first) + ".." +
                    std::to_string(decided_ - 1) + ": ";
    if (late_ >= 0)
      e += "rank " + std::to_string(late_) + " arrived last in " + std::to_string(count[static_cast<std::size_t>(late_)]) +
           " of the last " + std::to_string(voters) + " calls";
    else
      e += "no rank arrived last in most calls (" + std::to_string(significant) + " of the last " + std::to_string(voters) +
           " had a late rank)";
    if (late_set_ >= 0)
      e += "; ranks " + to_string(Choice{Algorithm::stragglar_k, -1, set_span(late_set_)}) + " arrived last together in " +
           std::to_string(late_set_count) + " calls, " + ms(delay_set) + " after the others";
    e += ", median delay " + ms(delay_s_) + "; estimated exposed time now:";
    append_estimates(e);
    evidence_ = e;
  }
  if (config_.keep_trace) trace_decision(first);
  return changed;
}

void StragglerPolicy::trace_decision(std::int64_t first) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "calls %lld..%lld: incumbent ", static_cast<long long>(first),
                static_cast<long long>(decided_ - 1));
  trace_ = buf;
  trace_ += to_string(incumbent_choice_);
  trace_ += ", next exploration [";
  for (std::size_t q = plan_pos_; q < plan_.size(); ++q) {
    if (q > plan_pos_) trace_ += ", ";
    trace_ += to_string(choice_of(plan_[q]));
  }
  std::snprintf(buf, sizeof buf, "], late rank %d, delay %.3f ms, noise %.1f%%, exchange every %d, exposed time %s; estimates:",
                late_, delay_s_ * 1e3, noise_ * 100, window_,
                config_.shared_clock ? "exact (one clock)" : "the shortest in-call time");
  trace_ += buf;
  append_estimates(trace_);
}

// " stragglar 84.250 ms (1 fresh of 2, model 80.1 ms), ring ...": every candidate's estimate, the
// measurements behind it and the model's prediction (the INFO evidence and the TRACE line).
void StragglerPolicy::append_estimates(std::string& out) const {
  char buf[160];
  for (std::size_t k = 0; k < cands_.size(); ++k) {
    const Estimate& x = est_[k];
    const char* name = stragglar::to_string(cands_[k].algorithm);
    const char* sep = k + 1 < cands_.size() ? "," : "";
    if (cands_[k].uses_set && !available(static_cast<int>(k))) {  // no late set to tell it yet
      std::snprintf(buf, sizeof buf, " %s not a candidate now%s", name, sep);
      out += buf;
      continue;
    }
    char value[32] = "unknown", model[32] = "no model";  // native has no schedule to simulate
    if (std::isfinite(x.value)) std::snprintf(value, sizeof value, "%.3f ms", x.value * 1e3);
    if (std::isfinite(x.predicted)) std::snprintf(model, sizeof model, "model %.3f ms", x.predicted * 1e3);
    std::snprintf(buf, sizeof buf, " %s %s (%d fresh of %zu, %s)%s", name, value, x.fresh, cands_[k].samples.size(), model,
                  sep);
    out += buf;
  }
}

}  // namespace stragglar::detail
