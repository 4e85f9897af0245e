// The simulated jobs the straggler policy's tests run (src/runtime/straggler_policy.*,
// docs/auto.md "Tests"): several StragglerPolicy instances stand for the ranks of one job; a small
// model of the scenarios gives each rank its in-call time (with noise from a seeded RNG); the ranks
// exchange through a simulated element-wise max, as the core's agree_max does. Nothing is timed.
// Shared by test_straggler_policy.cpp (outcomes) and test_policy_replay.cpp (every decision).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/straggler_policy.hpp"

namespace stragglar::detail {
// Readable failures: "stragglar-k(late 6,7)" (gtest finds it by ADL).
inline void PrintTo(const Choice& c, std::ostream* os) { *os << to_string(c); }
}  // namespace stragglar::detail

namespace stragglar::detail::policy_job {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Exposed seconds of each algorithm on the simulated host, shaped like this project's 8-rank
// 64 MiB MPI measurements: StragglAR = ReduceScatter among the others (rs) + the rest, which
// waits for the straggler (rest); ring, rhd and native wait for everyone.
struct Costs {
  double rs = 0.090, rest = 0.100, ring = 0.178, rhd = 0.151, native = 0.189;
  // stragglar-k / hierarchical told a late set: ReduceScatter among the punctual
  // ranks, then what waits for the set (each late rank sends and receives ~s: longer than rest).
  double rest_k = 0.115, rest_h = 0.140;
  // StragglAR when another rank is the late one: × this beyond what the model says (1: as
  // modelled; a loaded host: ~1.5, docs/auto.md "Estimates", two regimes).
  double told_wrong = 1.0;
};

// What the world does in one call: which rank arrives late (-1: none) and by how much.
struct World {
  World() = default;
  World(int l, double d, std::vector<double> per_rank = {}) : late(l), delay_s(d), delays(std::move(per_rank)) {}
  int late = -1;
  double delay_s = 0;
  std::vector<double> delays;  // per rank (an arrival pattern); when set, late/delay_s are unused
};

struct Noise {
  double sigma = 0.03;          // lognormal factor on the call's duration
  double outlier_p = 0.05;      // probability of a slow call (a neighbour took the cores) ...
  double outlier_factor = 1.3;  // ... and how slow
  double arrival_jitter_s = 0.5e-3;  // every rank's arrival varies this much
  double exit_jitter_s = 0.2e-3;     // and its exit
  // native's ranks leave this far apart at most (uniformly): an MPI library's AllReduce on an
  // oversubscribed host (docs/auto.md "Measuring a call on one clock").
  double native_exit_spread_s = 0;
};

struct CallResult {
  std::vector<double> in_call;  // per rank
  std::vector<double> arrive;   // per rank, from the call's start
  double exposed = 0;           // the benchmark's metric: latest exit − last arrival
};

// One call of `c` on n ranks: arrivals, then the common finish of the algorithm.
inline CallResult simulate_call(const Choice& c, int n, const World& w, const Costs& k, const Noise& z, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> arrive(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    arrive[static_cast<std::size_t>(r)] =
        z.arrival_jitter_s * u(rng) + (!w.delays.empty() ? w.delays[static_cast<std::size_t>(r)] : r == w.late ? w.delay_s : 0.0);
  const double last = *std::max_element(arrive.begin(), arrive.end());
  double factor = std::exp(z.sigma * g(rng));
  if (u(rng) < z.outlier_p) factor *= z.outlier_factor;
  double finish = 0;
  if (uses_late_set(c.algorithm)) {
    // The punctual ranks start the ReduceScatter when the last of them arrives; the rest waits
    // for every rank of the set.
    double rest_arrive = 0, set_arrive = 0;
    for (int r = 0; r < n; ++r) {
      const bool in_set = std::find(c.late.begin(), c.late.end(), r) != c.late.end();
      (in_set ? set_arrive : rest_arrive) = std::max(in_set ? set_arrive : rest_arrive, arrive[static_cast<std::size_t>(r)]);
    }
    const double start = std::max(rest_arrive + k.rs * factor, set_arrive);
    finish = start + (c.algorithm == Algorithm::stragglar_k ? k.rest_k : k.rest_h) * factor;
  } else if (c.algorithm == Algorithm::stragglar) {
    // The others start the ReduceScatter when the last of them arrives; the rest waits for s.
    double rest_arrive = 0;
    for (int r = 0; r < n; ++r)
      if (r != c.straggler) rest_arrive = std::max(rest_arrive, arrive[static_cast<std::size_t>(r)]);
    const double s_arrive = arrive[static_cast<std::size_t>(c.straggler)];
    const double start = std::max(rest_arrive + k.rs * factor, s_arrive);
    finish = start + k.rest * factor;
    if (s_arrive + 0.010 < rest_arrive) finish = rest_arrive + (k.rs + k.rest) * factor * k.told_wrong;
  } else {
    const double t = c.algorithm == Algorithm::ring ? k.ring : c.algorithm == Algorithm::rhd ? k.rhd : k.native;
    finish = last + t * factor;
  }
  CallResult out;
  double latest_exit = 0;
  const double spread = c.algorithm == Algorithm::native ? z.native_exit_spread_s : 0.0;
  for (int r = 0; r < n; ++r) {
    double exit = finish + z.exit_jitter_s * u(rng);
    if (spread > 0) exit += spread * u(rng);  // drawn only then: the other tests' draws unchanged
    latest_exit = std::max(latest_exit, exit);
    out.in_call.push_back(exit - arrive[static_cast<std::size_t>(r)]);
  }
  out.exposed = latest_exit - last;
  out.arrive = std::move(arrive);
  return out;
}

// The model the core would supply: right in shape, off in scale (measured/predicted 0.77–1.24 on
// this project's host). `scale` multiplies everything (an uncalibrated cost model).
inline Predictor model_predictor(const Costs& k, double scale = 1.0) {
  return [k, scale](const Choice& c, double d) {
    switch (c.algorithm) {
      case Algorithm::stragglar: return scale * (std::max(1.2 * k.rs - d, 0.0) + 0.9 * k.rest);
      case Algorithm::ring: return scale * 0.85 * k.ring;
      case Algorithm::rhd: return scale * 1.15 * k.rhd;
      default: return kNaN;  // native: no schedule, no prediction
    }
  };
}
// The same with a model for stragglar-k and hierarchical (the core's simulator has one): the
// tests of several late ranks. Without it they are never candidates.
inline Predictor model_predictor_k(const Costs& k, double scale = 1.0) {
  const Predictor one = model_predictor(k, scale);
  return [k, scale, one](const Choice& c, double d) {
    if (c.algorithm == Algorithm::stragglar_k) return scale * (std::max(1.2 * k.rs - d, 0.0) + 0.9 * k.rest_k);
    if (c.algorithm == Algorithm::hierarchical) return scale * (std::max(1.2 * k.rs - d, 0.0) + 0.9 * k.rest_h);
    return one(c, d);
  };
}

// What each call of the Jobs run while one is in scope ran and decided, for the replay test
// (test_policy_replay.cpp): one observer per thread, none by default.
class CallLog {
 public:
  // Called after every call with what ran and rank 0's policy (the Job checks every rank agrees).
  using Observer = std::function<void(const Choice& ran, const StragglerPolicy& after)>;
  explicit CallLog(Observer observe) : observe_(std::move(observe)), outer_(now()) { now() = this; }
  ~CallLog() { now() = outer_; }
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;
  static void add(const Choice& ran, const StragglerPolicy& after) {
    if (CallLog* log = now()) log->observe_(ran, after);
  }

 private:
  static CallLog*& now() {
    thread_local CallLog* log = nullptr;
    return log;
  }
  Observer observe_;
  CallLog* outer_;
};

// n policies standing for the ranks of one job. record() may lag begin_call() and decide() may
// lag the exchange (the GPU case); both lags are the same on every rank.
class Job {
 public:
  Job(const PolicyConfig& cfg, Predictor pred, std::uint64_t seed, int record_lag = 0, int decide_lag = 0)
      : n_(cfg.nranks), rng_(seed), record_lag_(record_lag), decide_lag_(decide_lag) {
    for (int r = 0; r < n_; ++r) ranks_.emplace_back(cfg, pred);
    pending_times_.resize(static_cast<std::size_t>(n_));
  }

  // One call in world w; returns what ran (checked identical on every rank) and the result.
  Choice call(const World& w, const Costs& k, const Noise& z, CallResult* result = nullptr) {
    const Choice c = ranks_[0].begin_call();
    for (int r = 1; r < n_; ++r) {
      const Choice cr = ranks_[static_cast<std::size_t>(r)].begin_call();
      EXPECT_EQ(cr, c) << "rank " << r << " at call " << calls_;
    }
    CallResult res = simulate_call(c, n_, w, k, z, rng_);
    // Entries on one clock (PolicyConfig::shared_clock; ignored without it): calls 10 s apart.
    const double start_s = 10.0 * static_cast<double>(calls_);
    for (int r = 0; r < n_; ++r) {
      auto& q = pending_times_[static_cast<std::size_t>(r)];
      const auto ur = static_cast<std::size_t>(r);
      q.push_back({res.in_call[ur], std::llround((start_s + res.arrive[ur]) * 1e9)});
      if (static_cast<int>(q.size()) > record_lag_) {
        ranks_[ur].record(q.front().first, q.front().second);
        q.pop_front();
      }
    }
    exchange_and_decide();
    ++calls_;
    if (result) *result = res;
    CallLog::add(c, ranks_[0]);
    return c;
  }

  void exchange_and_decide() {
    if (ranks_[0].exchange_due()) {
      std::vector<std::int64_t> max(static_cast<std::size_t>(ranks_[0].exchange_size()),
                                    std::numeric_limits<std::int64_t>::min());
      for (int r = 0; r < n_; ++r) {
        EXPECT_TRUE(ranks_[static_cast<std::size_t>(r)].exchange_due());
        std::vector<std::int64_t> mine(max.size());
        ranks_[static_cast<std::size_t>(r)].fill_exchange(mine, r);
        for (std::size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], mine[i]);
      }
      exchanges_.push_back({calls_ + decide_lag_, max});
    }
    while (!exchanges_.empty() && exchanges_.front().first <= calls_) {
      for (auto& p : ranks_) p.decide(exchanges_.front().second);
      exchanges_.pop_front();
      check_agreement();
    }
  }

  void check_agreement() const {
    for (int r = 1; r < n_; ++r) {
      const StragglerPolicy& p = ranks_[static_cast<std::size_t>(r)];
      EXPECT_EQ(p.current(), ranks_[0].current()) << "rank " << r;
      EXPECT_EQ(p.incumbent(), ranks_[0].incumbent()) << "rank " << r;
      EXPECT_EQ(p.late_rank(), ranks_[0].late_rank()) << "rank " << r;
      EXPECT_TRUE(std::ranges::equal(p.target_set(), ranks_[0].target_set())) << "rank " << r;
      EXPECT_TRUE(std::ranges::equal(p.late_set(), ranks_[0].late_set())) << "rank " << r;
      EXPECT_EQ(p.scores(), ranks_[0].scores()) << "rank " << r;
      EXPECT_EQ(p.last_switch_evidence(), ranks_[0].last_switch_evidence()) << "rank " << r;
    }
  }

  const StragglerPolicy& rank0() const { return ranks_[0]; }
  std::mt19937_64& rng() { return rng_; }

 private:
  int n_;
  std::vector<StragglerPolicy> ranks_;
  std::mt19937_64 rng_;
  int record_lag_, decide_lag_;
  std::vector<std::deque<std::pair<double, std::int64_t>>> pending_times_;  // in-call s, entry ns
  std::deque<std::pair<long, std::vector<std::int64_t>>> exchanges_;
  long calls_ = 0;
};

// 8 ranks, 64 MiB; one call per exchange, as the host engines run it (the core's choice when
// an exchange costs little beside the call); config8_windows(): P calls per exchange (the lag
// engines' and small calls' form).
inline PolicyConfig config8() {
  PolicyConfig c;
  c.nranks = 8;
  c.bytes = 64u << 20;
  c.exchange_every = 1;
  return c;
}
inline PolicyConfig config8_windows() {
  PolicyConfig c = config8();
  c.exchange_every = 0;
  return c;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The benchmark's sequence (tools/bench): one checked call with the delay, 5 warmup calls
// without it, then 40 timed calls. `late_at(i)` is the late rank of timed call i.
struct BenchRun {
  std::vector<Choice> timed_choices;
  double auto_median = 0;
  double best_fixed_median = 0;
  std::string best_fixed;
};

template <class LateAt>
BenchRun run_bench(double delay_s, LateAt late_at, std::uint64_t seed, const Costs& k = {}, const Noise& z = {},
                   PolicyConfig cfg = config8()) {
  Job job(cfg, model_predictor(k), seed);
  BenchRun out;
  job.call(World{late_at(0), delay_s}, k, z);
  for (int i = 0; i < 5; ++i) job.call(World{late_at(0), 0.0}, k, z);
  std::vector<double> exposed;
  for (int i = 0; i < 40; ++i) {
    CallResult res;
    out.timed_choices.push_back(job.call(World{late_at(i), delay_s}, k, z, &res));
    exposed.push_back(res.exposed);
  }
  out.auto_median = median(exposed);
  // The fixed entries, with the same noise model: stragglar told the right rank, ring, rhd, native.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  out.best_fixed_median = std::numeric_limits<double>::infinity();
  for (Algorithm a : {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd, Algorithm::native}) {
    std::vector<double> ex;
    for (int i = 0; i < 40; ++i) {
      const World w{late_at(i), delay_s};
      const Choice c{a, a == Algorithm::stragglar ? (w.late >= 0 ? w.late : cfg.nranks - 1) : -1};
      ex.push_back(simulate_call(c, cfg.nranks, w, k, z, rng).exposed);
    }
    if (median(ex) < out.best_fixed_median) out.best_fixed_median = median(ex), out.best_fixed = to_string(a);
  }
  return out;
}

// ---- arrival patterns (bench/patterns/ replays the same kinds on real backends) ------------

// One pattern kind: per timed call, every rank's delay (seconds).
using Pattern = std::vector<std::vector<double>>;

inline Pattern make_pattern(const std::string& kind, int n, int calls, double d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Pattern p(static_cast<std::size_t>(calls), std::vector<double>(static_cast<std::size_t>(n), 0.0));
  for (int i = 0; i < calls; ++i) {
    auto& row = p[static_cast<std::size_t>(i)];
    auto late = [&](int r, double ms) { row[static_cast<std::size_t>(r)] = ms; };
    if (kind == "fixed-rank2") late(2, d);
    else if (kind == "random-rank") late(static_cast<int>(rng() % static_cast<std::uint64_t>(n)), d);
    else if (kind == "two-late") late(2, d), late(5, d);
    else if (kind == "alternating") late(i % 2 ? n - 2 : 1, d);
    else if (kind == "imbalance") for (int r = 0; r < n; ++r) late(r, 0.3 * d * u(rng));
    else if (kind == "jitter") late(3, d * (0.5 + u(rng)));
    else if (kind == "appears-midway") { if (i >= calls / 2) late(4, d); }
    else if (kind == "moves-midway") late(i < calls / 2 ? n - 1 : 1, d);
    // "none": nobody late
  }
  return p;
}

inline int most_often_late(const Pattern& p) {
  std::vector<int> count(p[0].size(), 0);
  for (const auto& row : p) {
    const auto last = std::max_element(row.begin(), row.end());
    if (*last > *std::min_element(row.begin(), row.end())) ++count[static_cast<std::size_t>(last - row.begin())];
  }
  const auto best = std::max_element(count.begin(), count.end());
  return *best > 0 ? static_cast<int>(best - count.begin()) : static_cast<int>(p[0].size()) - 1;
}

struct PatternRun {
  double auto_total = 0, best_fixed_total = 0;
  std::string best_fixed;
  std::vector<Choice> choices;
};

// As bench/patterns/run.sh runs it: the core's first call (after the agreement: nobody late),
// 2 warm-ups with line 1, then one timed call per line; totals of exposed time.
inline PatternRun run_pattern(const Pattern& pattern, std::uint64_t seed, int exchange_every = 1, const Costs& k = {},
                       const Noise& z = {}, int lag = 0, bool start_native = false) {
  PolicyConfig cfg = config8();
  cfg.exchange_every = exchange_every;
  if (exchange_every > 0 && exchange_every < cfg.period) cfg.settled_exchange_every = cfg.period;  // as the runtime sets it (auto_runner.cpp)
  cfg.first_call_synchronised = true;
  cfg.start_with_native = start_native;
  const int n = cfg.nranks;
  Job job(cfg, model_predictor(k), seed, lag, lag);
  PatternRun out;
  job.call(World{}, k, z);
  for (int i = 0; i < 2; ++i) job.call(World{-1, 0, pattern[0]}, k, z);
  for (const auto& row : pattern) {
    CallResult res;
    out.choices.push_back(job.call(World{-1, 0, row}, k, z, &res));
    out.auto_total += res.exposed;
  }
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  out.best_fixed_total = std::numeric_limits<double>::infinity();
  const int told = most_often_late(pattern);
  for (Algorithm a : {Algorithm::stragglar, Algorithm::ring, Algorithm::rhd, Algorithm::native}) {
    double total = 0;
    for (const auto& row : pattern)
      total += simulate_call(Choice{a, a == Algorithm::stragglar ? told : -1}, n, World{-1, 0, row}, k, z, rng).exposed;
    if (total < out.best_fixed_total) out.best_fixed_total = total, out.best_fixed = to_string(a);
  }
  return out;
}

inline const char* const kPatternKinds[] = {"fixed-rank2", "none",    "random-rank",    "two-late",    "alternating",
                                     "imbalance",   "jitter", "appears-midway", "moves-midway"};

// Per-rank delays: `late` ranks `d` seconds late, the others on time.
// A world that changes every 30 calls: nobody late, rank 3 300 ms late, a random rank 20 ms late
// (drawn from `rng`), rank 6 60 ms late, rank 1 5 ms late, and around again.
inline World changing_world(int call, std::mt19937_64& rng) {
  const int phase = (call / 30) % 5;
  World w;
  if (phase == 1) w = {3, 0.3};
  if (phase == 2) w = {static_cast<int>(rng() % 8), 0.02};
  if (phase == 3) w = {6, 0.06};
  if (phase == 4) w = {1, 0.005};
  return w;
}

inline World late_together(const std::vector<int>& late, double d, int n = 8) {
  std::vector<double> delays(static_cast<std::size_t>(n), 0.0);
  for (int r : late) delays[static_cast<std::size_t>(r)] = d;
  return World{-1, 0, delays};
}

inline std::vector<int> to_vector(std::span<const int> s) { return {s.begin(), s.end()}; }

// A host whose load drifts from call to call (log-scale AR(1): neighbouring calls share most of
// it), as on a loaded shared host, where two 24-call runs of one fixed algorithm can measure up to
// 1.4× apart (docs/auto.md, the drifting-load study). Every cost of a call is scaled by it.
struct Drift {
  double rho = 0.9, sigma = 0.10;
  double log_load = 0;
  Costs next(const Costs& k, std::mt19937_64& rng) {
    std::normal_distribution<double> g(0, 1);
    log_load = rho * log_load + std::sqrt(1 - rho * rho) * sigma * g(rng);
    const double f = std::exp(log_load);
    Costs c = k;
    for (double* v : {&c.rs, &c.rest, &c.ring, &c.rhd, &c.native, &c.rest_k, &c.rest_h}) *v *= f;
    return c;
  }
};

}  // namespace stragglar::detail::policy_job
