// Replay of auto's decisions (src/runtime/straggler_policy.*): the simulated jobs of
// policy_job.hpp — every arrival pattern, seed and delay the policy tests use, with and without
// record/decide lags, both exchange forms, native first, one clock, late sets, the benchmark's
// runs, a cold first call and a drifting load — and, per call, what ran and what was decided after
// it, compared with tests/unit/golden/policy_replay.txt. A refactor of the policy may not change
// one decision; the golden file changes only with a behaviour change, and its commit says why.
//
// One line per run: "<scenario>: <call> <call> ... d=<decisions>". A call is what ran, then
// "=" and the decided state when that changed in the call: incumbent, late rank, late set, target
// set and calls per exchange ("s7=s7,7,,,1"). Codes: s<rank> stragglar, r ring, h rhd, n native,
// k<set> stragglar-k, H<set> hierarchical, sets as ranks joined by '.'; "x*N": N calls alike.
//
// Regenerate (after a deliberate behaviour change only; never in CI):
//   STRAGGLAR_REPLAY_UPDATE=1 ./build/tests/unit/unit_tests --gtest_filter='PolicyReplay.*'
// The simulation draws from the standard library's distributions: the golden file is that of
// libstdc++ (std::normal_distribution is not specified bit for bit).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "policy_job.hpp"
#include "runtime/straggler_policy.hpp"

#ifndef STRAGGLAR_POLICY_GOLDEN
#error "STRAGGLAR_POLICY_GOLDEN: the golden file's path (tests/unit/CMakeLists.txt)"
#endif

namespace stragglar::detail {
namespace {
using namespace policy_job;

std::string set_code(std::span<const int> set) {
  std::string s;
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (i) s += '.';
    s += std::to_string(set[i]);
  }
  return s;
}

std::string choice_code(const Choice& c) {
  switch (c.algorithm) {
    case Algorithm::stragglar: return "s" + std::to_string(c.straggler);
    case Algorithm::ring: return "r";
    case Algorithm::rhd: return "h";
    case Algorithm::native: return "n";
    case Algorithm::stragglar_k: return "k" + set_code(c.late);
    case Algorithm::hierarchical: return "H" + set_code(c.late);
    default: return to_string(c);
  }
}

std::string state_code(const StragglerPolicy& p) {
  return choice_code(p.incumbent()) + "," + (p.late_rank() < 0 ? std::string("-") : std::to_string(p.late_rank())) +
         "," + set_code(p.late_set()) + "," + set_code(p.target_set()) + "," + std::to_string(p.window_calls());
}

// Records every call of the Jobs run in its scope: one line.
class Recorder {
 public:
  Recorder()
      : log_([this](const Choice& ran, const StragglerPolicy& after) {
          std::string call = choice_code(ran);
          const std::string state = state_code(after);
          if (state != state_) call += "=" + state, state_ = state;
          calls_.push_back(std::move(call));
          decisions_ = after.decisions();
        }) {}
  std::string line() const {
    std::string out;
    for (std::size_t i = 0; i < calls_.size();) {
      std::size_t j = i;
      while (j < calls_.size() && calls_[j] == calls_[i]) ++j;
      out += calls_[i] + (j - i > 1 ? "*" + std::to_string(j - i) : "") + " ";
      i = j;
    }
    return out + "d=" + std::to_string(decisions_);
  }

 private:
  std::vector<std::string> calls_;
  std::string state_;
  std::int64_t decisions_ = 0;
  CallLog log_;
};

struct Scenario {
  std::string name;
  std::function<void()> run;
};

std::string ms(double s) { return std::to_string(std::lround(s * 1e3)) + "ms"; }

// As run_pattern runs it (the core's first call, 2 warm-ups with line 1, a call per line), for the
// configurations run_pattern does not make.
void pattern_job(const PolicyConfig& cfg, const Predictor& pred, const Pattern& pattern, std::uint64_t seed,
                 const Costs& k = {}, const Noise& z = {}, int lag = 0) {
  Job job(cfg, pred, seed, lag, lag);
  job.call(World{}, k, z);
  for (int i = 0; i < 2; ++i) job.call(World{-1, 0, pattern[0]}, k, z);
  for (const auto& row : pattern) job.call(World{-1, 0, row}, k, z);
}

PolicyConfig pattern_config(int every) {
  PolicyConfig cfg = config8();
  cfg.exchange_every = every;
  if (every > 0 && every < cfg.period) cfg.settled_exchange_every = cfg.period;  // as auto_runner.cpp sets it
  cfg.first_call_synchronised = true;
  return cfg;
}

void add_patterns(std::vector<Scenario>& out) {
  for (int every : {1, 0})
    for (double d : {0.300, 0.060})
      for (const char* kind : kPatternKinds)
        for (std::uint64_t seed = 1; seed <= 4; ++seed)
          out.push_back({"pattern " + std::string(kind) + " delay " + ms(d) + " every " + std::to_string(every) + " seed " +
                             std::to_string(seed),
                         [=] { run_pattern(make_pattern(kind, 8, 24, d, seed), seed, every); }});
  // Lags (GPU engines: times read and exchanges decided calls later), with and without native first.
  for (int lag : {1, 2})
    for (int every : {0, 1})
      for (bool native : {false, true})
        for (const char* kind : kPatternKinds)
          for (std::uint64_t seed = 1; seed <= 2; ++seed)
            out.push_back({"pattern " + std::string(kind) + " delay 300ms every " + std::to_string(every) + " lag " +
                               std::to_string(lag) + (native ? " native-first" : "") + " seed " + std::to_string(seed),
                           [=] { run_pattern(make_pattern(kind, 8, 24, 0.300, seed), seed, every, {}, {}, lag, native); }});
  // One clock, native's ranks leaving apart.
  for (int every : {1, 0})
    for (const char* kind : kPatternKinds)
      for (std::uint64_t seed = 1; seed <= 2; ++seed)
        out.push_back({"pattern " + std::string(kind) + " delay 300ms every " + std::to_string(every) +
                           " shared-clock seed " + std::to_string(seed),
                       [=] {
                         PolicyConfig cfg = pattern_config(every);
                         cfg.shared_clock = true;
                         Noise z;
                         z.native_exit_spread_s = 0.020;
                         pattern_job(cfg, model_predictor(Costs{}), make_pattern(kind, 8, 24, 0.300, seed), seed, {}, z);
                       }});
  // Late sets candidates (a model for stragglar-k and hierarchical), hosts of 0, 2 and 4 ranks.
  for (int rph : {0, 2, 4})
    for (const char* kind : kPatternKinds)
      for (std::uint64_t seed = 1; seed <= 2; ++seed)
        out.push_back({"pattern " + std::string(kind) + " delay 300ms every 1 late-sets ranks-per-host " +
                           std::to_string(rph) + " seed " + std::to_string(seed),
                       [=] {
                         PolicyConfig cfg = pattern_config(1);
                         cfg.ranks_per_host = rph;
                         pattern_job(cfg, model_predictor_k(Costs{}), make_pattern(kind, 8, 24, 0.300, seed), seed);
                       }});
  for (const char* kind : {"random-rank", "two-late", "imbalance"})
    for (std::uint64_t seed = 1; seed <= 6; ++seed)
      out.push_back({"pattern " + std::string(kind) + " 60 calls delay 300ms seed " + std::to_string(seed),
                     [=] { run_pattern(make_pattern(kind, 8, 60, 0.300, seed), seed); }});
}

void add_regimes_and_native(std::vector<Scenario>& out) {
  for (double told_wrong : {2.0, 2.5})
    for (const char* kind : {"alternating", "random-rank"})
      for (std::uint64_t seed = 1; seed <= 8; ++seed)
        out.push_back({"regimes " + std::string(kind) + " told-wrong " + std::to_string(std::lround(told_wrong * 10)) +
                           "/10 seed " + std::to_string(seed),
                       [=] {
                         Costs vm;
                         vm.rs = 0.150, vm.rest = 0.060, vm.rhd = 0.200, vm.ring = 0.220, vm.native = 0.250;
                         vm.told_wrong = told_wrong;
                         run_pattern(make_pattern(kind, 8, 24, 0.300, seed), seed, 1, vm);
                       }});
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    out.push_back({"gpu sockets fixed-rank2 delay 800ms seed " + std::to_string(seed), [=] {
                     Costs sockets;
                     sockets.rs = 0.150, sockets.rest = 0.197, sockets.ring = 0.217, sockets.rhd = 0.195,
                     sockets.native = 0.091;
                     run_pattern(make_pattern("fixed-rank2", 8, 24, 0.8, seed), seed, 0, sockets, Noise{}, 2, true);
                   }});
    for (const char* kind : {"fixed-rank2", "none"})
      out.push_back({"gpu nvlink " + std::string(kind) + " delay 300ms seed " + std::to_string(seed), [=] {
                       Costs nvlink;
                       nvlink.native = 0.120;
                       run_pattern(make_pattern(kind, 8, 24, 0.3, seed), seed, 0, nvlink, Noise{}, 2, true);
                     }});
  }
  for (int pct : {93, 107})
    for (const char* kind : {"imbalance", "none"})
      for (std::uint64_t seed = 1; seed <= 8; ++seed)
        out.push_back({"native-level " + std::to_string(pct) + "% " + kind + " seed " + std::to_string(seed), [=] {
                         Costs vm;
                         vm.native = 0.151 * pct / 100;
                         Noise z;
                         z.sigma = 0.06;
                         run_pattern(make_pattern(kind, 8, 24, 0.100, seed), seed, 1, vm, z);
                       }});
}

void add_bench(std::vector<Scenario>& out) {
  const auto none = [](int) { return -1; };
  for (int late : {7, 3, 0})
    for (std::uint64_t seed = 1; seed <= 5; ++seed)
      out.push_back({"bench fixed late " + std::to_string(late) + " seed " + std::to_string(seed),
                     [=] { run_bench(0.3, [late](int) { return late; }, seed); }});
  for (std::uint64_t seed = 1; seed <= 8; ++seed)
    out.push_back({"bench no-delay seed " + std::to_string(seed), [=] { run_bench(0.0, none, seed); }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"bench no-delay fast-native seed " + std::to_string(seed), [=] {
                     Costs k;
                     k.native = 0.120;
                     run_bench(0.0, none, seed, k);
                   }});
  for (bool clocked : {true, false})
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
      out.push_back({std::string("bench native-exit-spread ") + (clocked ? "shared-clock" : "in-call-only") + " seed " +
                         std::to_string(seed),
                     [=] {
                       Costs k;
                       k.native = 0.125;
                       Noise z;
                       z.native_exit_spread_s = 0.100;
                       PolicyConfig cfg = config8();
                       cfg.shared_clock = clocked;
                       run_bench(0.0, none, seed, k, z, cfg);
                     }});
  for (double d : {0.0, 0.005, 0.020, 0.060, 0.300})
    for (std::uint64_t seed = 1; seed <= 6; ++seed)
      out.push_back({"bench sweep delay " + ms(d) + " seed " + std::to_string(seed),
                     [=] { run_bench(d, [](int) { return 7; }, seed); }});
  for (std::uint64_t seed = 1; seed <= 5; ++seed)
    out.push_back({"bench moving seed " + std::to_string(seed),
                   [=] { run_bench(0.3, [](int i) { return i < 20 ? 7 : 2; }, seed); }});
  const int P = config8().period;
  for (int lag = 0; lag <= 2; ++lag)
    for (int offset = 0; offset < 2 * P; ++offset)
      out.push_back({"moving lag " + std::to_string(lag) + " offset " + std::to_string(offset), [=] {
                       Job job(config8(), model_predictor(Costs{}), static_cast<std::uint64_t>(100 + offset), lag, lag);
                       const int move = 30 + offset;
                       for (int i = 0; i < move + 4 * P; ++i) job.call(World{i < move ? 6 : 1, 0.2}, Costs{}, Noise{});
                     }});
  for (std::uint64_t seed = 1; seed <= 5; ++seed)
    for (int offset = 0; offset < P; ++offset)
      out.push_back({"settled moving seed " + std::to_string(seed) + " offset " + std::to_string(offset), [=] {
                       PolicyConfig cfg = config8();
                       cfg.settled_exchange_every = P;
                       Job job(cfg, model_predictor(Costs{}), seed * 100 + static_cast<std::uint64_t>(offset));
                       const int move = 40 + offset;
                       for (int i = 0; i < move + 4 * P; ++i) job.call(World{i < move ? 6 : 1, 0.2}, Costs{}, Noise{});
                     }});
}

void add_late_sets(std::vector<Scenario>& out) {
  for (int every : {1, 0})
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
      out.push_back({"late-together 6.7 every " + std::to_string(every) + " seed " + std::to_string(seed), [=] {
                       PolicyConfig cfg = config8();
                       cfg.exchange_every = every;
                       cfg.first_call_synchronised = true;
                       Job job(cfg, model_predictor_k(Costs{}), seed);
                       job.call(World{}, Costs{}, Noise{});
                       for (int i = 0; i < 40; ++i) job.call(late_together({6, 7}, 0.300), Costs{}, Noise{});
                     }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"late-sets one-late-rank seed " + std::to_string(seed), [=] {
                     PolicyConfig cfg = config8();
                     cfg.first_call_synchronised = true;
                     Job job(cfg, model_predictor_k(Costs{}), seed);
                     job.call(World{}, Costs{}, Noise{});
                     for (int i = 0; i < 40; ++i) job.call(World{3, 0.300}, Costs{}, Noise{});
                   }});
  for (std::uint64_t seed = 1; seed <= 6; ++seed)
    out.push_back({"late-sets random-pairs seed " + std::to_string(seed), [=] {
                     PolicyConfig cfg = config8();
                     cfg.first_call_synchronised = true;
                     Job job(cfg, model_predictor_k(Costs{}), seed);
                     std::mt19937_64 pick(seed * 7919);
                     job.call(World{}, Costs{}, Noise{});
                     for (int i = 0; i < 60; ++i) {
                       const int a = static_cast<int>(pick() % 8);
                       int b = static_cast<int>(pick() % 7);
                       if (b >= a) ++b;
                       job.call(late_together({a, b}, 0.300), Costs{}, Noise{});
                     }
                   }});
  for (int rph : {2, 0, 4})
    out.push_back({"late-sets hierarchical ranks-per-host " + std::to_string(rph), [=] {
                     Costs fast_h;
                     fast_h.rest_h = 0.095;
                     PolicyConfig cfg = config8();
                     cfg.first_call_synchronised = true;
                     cfg.ranks_per_host = rph;
                     Job job(cfg, model_predictor_k(fast_h), 3);
                     job.call(World{}, fast_h, Noise{});
                     for (int i = 0; i < 40; ++i) job.call(late_together({6, 7}, 0.300), fast_h, Noise{});
                   }});
  for (int most : {3, 8})
    out.push_back({"late-sets moving pairs max-late-sets " + std::to_string(most), [=] {
                     PolicyConfig cfg = config8();
                     cfg.first_call_synchronised = true;
                     cfg.max_late_sets = most;
                     Job job(cfg, model_predictor_k(Costs{}), 5);
                     job.call(World{}, Costs{}, Noise{});
                     const std::vector<std::vector<int>> pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {1, 2}, {3, 4}};
                     for (const auto& pair : pairs)
                       for (int i = 0; i < 8; ++i) job.call(late_together(pair, 0.300), Costs{}, Noise{});
                   }});
}

void add_first_calls_and_drift(std::vector<Scenario>& out) {
  for (int lag : {0, 1})
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
      out.push_back({"cold-first-call lag " + std::to_string(lag) + " seed " + std::to_string(seed), [=] {
                       Costs fast_native;
                       fast_native.native = 0.120;
                       Costs cold = fast_native;
                       cold.native = 3 * fast_native.native;
                       PolicyConfig cfg = config8();
                       cfg.first_call_synchronised = true;
                       cfg.exchange_every = lag ? 0 : 1;
                       Job job(cfg, model_predictor(fast_native), seed, lag ? 2 : 0, lag);
                       Noise z;
                       z.outlier_p = 0;
                       job.call(World{}, cold, z);
                       for (int i = 0; i < 40; ++i) job.call(World{}, fast_native, z);
                     }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"one-slow-run seed " + std::to_string(seed), [=] {
                     Costs k;
                     k.ring = 0.130;
                     const Predictor level = [k](const Choice& c, double d) {
                       if (c.algorithm == Algorithm::ring || c.algorithm == Algorithm::rhd) return 0.170;
                       return model_predictor(k)(c, d);
                     };
                     PolicyConfig cfg = config8();
                     cfg.first_call_synchronised = true;
                     Job job(cfg, level, seed);
                     Noise z;
                     z.outlier_p = 0;
                     int ring_runs = 0;
                     for (int i = 0; i < 40; ++i) {
                       Costs now = k;
                       if (ring_runs == 0) now.ring = 1.4 * k.ring;
                       ring_runs += job.call(World{}, now, z).algorithm == Algorithm::ring;
                     }
                   }});
  for (std::uint64_t seed = 1; seed <= 40; ++seed)
    out.push_back({"drift seed " + std::to_string(seed), [=] {
                     Costs k;
                     k.ring = 0.100, k.rhd = 0.111, k.native = 0.106;
                     Noise z;
                     z.sigma = 0.08, z.outlier_p = 0.10, z.outlier_factor = 1.4;
                     const Predictor equal = [](const Choice& c, double d) {
                       switch (c.algorithm) {
                         case Algorithm::stragglar: return std::max(0.12 - d, 0.0) + 0.09;
                         case Algorithm::ring: return 0.1005;
                         case Algorithm::rhd: return 0.1000;
                         default: return kNaN;
                       }
                     };
                     PolicyConfig cfg = config8();
                     cfg.settled_exchange_every = cfg.period;
                     cfg.first_call_synchronised = true;
                     Job job(cfg, equal, seed);
                     Drift drift;
                     for (int i = 0; i < 27; ++i) job.call(World{}, drift.next(k, job.rng()), z);
                   }});
}

void add_long_runs(std::vector<Scenario>& out) {
  for (int lag = 0; lag <= 3; ++lag)
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
      out.push_back({"changing-world lag " + std::to_string(lag) + " seed " + std::to_string(seed), [=] {
                       Job job(config8(), model_predictor(Costs{}), seed, lag, lag % 2);
                       std::mt19937_64 world_rng(seed);
                       for (int i = 0; i < 150; ++i) job.call(changing_world(i, world_rng), Costs{}, Noise{});
                     }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"delay-comes-and-goes seed " + std::to_string(seed), [=] {
                     Job job(config8(), model_predictor(Costs{}), seed);
                     for (int i = 0; i < 60; ++i) job.call(World{}, Costs{}, Noise{});
                     for (int i = 0; i < 15; ++i) job.call(World{4, 0.3}, Costs{}, Noise{});
                     for (int i = 0; i < 20; ++i) job.call(World{}, Costs{}, Noise{});
                   }});
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    out.push_back({"no-flapping seed " + std::to_string(seed), [=] {
                     Costs k;
                     k.ring = 0.150, k.rhd = 0.1515;
                     Noise z;
                     z.sigma = 0.06, z.outlier_p = 0.1, z.arrival_jitter_s = 2e-3;
                     Job job(config8(), model_predictor(k), seed);
                     for (int i = 0; i < 400; ++i) job.call(World{}, k, z);
                   }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"heavy-noise seed " + std::to_string(seed), [=] {
                     Noise z;
                     z.sigma = 0.08, z.outlier_p = 0.15;
                     Job job(config8(), model_predictor(Costs{}), seed);
                     for (int i = 0; i < 200; ++i) job.call(World{}, Costs{}, z);
                   }});
  for (std::uint64_t seed = 1; seed <= 4; ++seed)
    out.push_back({"random-rank-every-call seed " + std::to_string(seed), [=] {
                     Job job(config8(), model_predictor(Costs{}), seed);
                     for (int i = 0; i < 200; ++i) job.call(World{static_cast<int>(job.rng()() % 8), 0.060}, Costs{}, Noise{});
                   }});
}

void add_shapes(std::vector<Scenario>& out) {
  out.push_back({"moves-at-40 seed 42", [] {
                   Job job(config8(), model_predictor(Costs{}), 42);
                   for (int i = 0; i < 80; ++i) job.call(World{i < 40 ? 7 : 2, 0.3}, Costs{}, Noise{});
                 }});
  for (double d : {0.0, 0.060, 0.300})
    out.push_back({"uncalibrated-model delay " + ms(d), [=] {
                     Job job(config8(), model_predictor(Costs{}, 1e-3), 5);
                     for (int i = 0; i < 60; ++i) job.call(World{4, d}, Costs{}, Noise{});
                   }});
  for (double d : {0.02, 0.06, 0.3})
    out.push_back({"scores delay " + ms(d), [=] {
                     Job job(config8(), model_predictor(Costs{}), 3);
                     for (int i = 0; i < 25; ++i) job.call(World{5, d}, Costs{}, Noise{});
                   }});
  out.push_back({"no-native-candidate seed 11", [] {
                   PolicyConfig c = config8();
                   c.candidates = {Algorithm::rhd, Algorithm::stragglar, Algorithm::ring};
                   Job job(c, model_predictor(Costs{}), 11);
                   for (int i = 0; i < 200; ++i)
                     job.call(World{i < 100 ? -1 : 2, i < 100 ? 0.0 : 0.3}, Costs{}, Noise{});
                 }});
  out.push_back({"one-rank", [] {
                   PolicyConfig c = config8();
                   c.nranks = 1;
                   Job one(c, model_predictor(Costs{}), 1);
                   for (int i = 0; i < 20; ++i) one.call(World{}, Costs{}, Noise{});
                 }});
  out.push_back({"period-1", [] {
                   PolicyConfig c = config8();
                   c.period = 1;
                   Job every(c, model_predictor(Costs{}), 2);
                   for (int i = 0; i < 60; ++i) every.call(World{4, 0.3}, Costs{}, Noise{});
                 }});
  out.push_back({"hint-straggler-2 stragglar-only", [] {
                   PolicyConfig c = config8_windows();
                   c.candidates = {Algorithm::stragglar, Algorithm::rhd};
                   c.initial_straggler = 2;
                   Job job(c, model_predictor(Costs{}), 7);
                   for (int i = 0; i < 40; ++i) job.call(World{5, 0.1}, Costs{}, Noise{});
                 }});
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  add_patterns(out);
  add_regimes_and_native(out);
  add_bench(out);
  add_late_sets(out);
  add_first_calls_and_drift(out);
  add_long_runs(out);
  add_shapes(out);
  return out;
}

// The calls of a line, run-lengths expanded, each with the state decided after it.
std::vector<std::pair<std::string, std::string>> calls_of(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> calls;
  std::istringstream in(line);
  std::string token, state;
  while (in >> token) {
    if (token.rfind("d=", 0) == 0) {
      calls.push_back({"(end)", token});
      break;
    }
    std::size_t times = 1;
    if (const auto star = token.rfind('*'); star != std::string::npos)
      times = std::stoul(token.substr(star + 1)), token.resize(star);
    const auto eq = token.find('=');
    if (eq != std::string::npos) state = token.substr(eq + 1), token.resize(eq);
    for (std::size_t i = 0; i < times; ++i) calls.push_back({token, state});
  }
  return calls;
}

std::string first_difference(const std::string& expected, const std::string& got) {
  const auto e = calls_of(expected), g = calls_of(got);
  for (std::size_t i = 0; i < std::max(e.size(), g.size()); ++i) {
    const auto show = [&](const auto& v) {
      return i < v.size() ? "ran " + v[i].first + ", decided " + v[i].second : std::string("(no such call)");
    };
    if (i >= e.size() || i >= g.size() || e[i] != g[i])
      return "first difference at call " + std::to_string(i) + ": expected " + show(e) + "; got " + show(g);
  }
  return "the lines differ in form only";
}

TEST(PolicyReplay, EveryDecisionMatchesTheGoldenFile) {
  const std::string path = STRAGGLAR_POLICY_GOLDEN;
  const char* update = std::getenv("STRAGGLAR_REPLAY_UPDATE");
  const bool write = update != nullptr && std::string(update) == "1";
  std::map<std::string, std::string> golden;
  std::vector<std::string> order;
  if (!write) {
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot read the golden file " << path;
    for (std::string line; std::getline(in, line);) {
      const auto colon = line.find(": ");
      if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
      golden[line.substr(0, colon)] = line.substr(colon + 2);
    }
  }
  std::ostringstream fresh;
  fresh << "# auto's decisions on the simulated jobs: tests/unit/test_policy_replay.cpp says how to read and regenerate this.\n";
  std::size_t mismatches = 0;
  for (const Scenario& s : scenarios()) {
    std::string got;
    {
      Recorder rec;
      s.run();
      got = rec.line();
    }
    fresh << s.name << ": " << got << "\n";
    if (write) continue;
    const auto it = golden.find(s.name);
    if (it == golden.end()) {
      ADD_FAILURE() << "scenario '" << s.name << "' is not in " << path;
      ++mismatches;
    } else {
      if (it->second != got && ++mismatches <= 10)
        ADD_FAILURE() << "scenario '" << s.name << "': " << first_difference(it->second, got);
      golden.erase(it);
    }
  }
  for (const auto& [name, line] : golden) ADD_FAILURE() << "scenario '" << name << "' of " << path << " was not run";
  EXPECT_EQ(mismatches, 0u) << "scenarios whose decisions changed (the first 10 shown)";
  if (write) {
    std::ofstream out(path);
    ASSERT_TRUE(out) << "cannot write " << path;
    out << fresh.str();
    std::cout << "wrote " << path << "\n";
  }
}

}  // namespace
}  // namespace stragglar::detail
