// auto's third stage: what each candidate costs now (docs/auto.md "Estimates"). Every call's
// exposed time is kept as a sample of the candidate that ran, beside the model's prediction at the
// overlap that call gave it; an estimate moves the samples to the current delays with the model's
// ratio (the model is used only in ratios), takes the lower quartile of the fresh ones, and
// scales the model by what was measured for a candidate never measured.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/auto/policy_config.hpp"

namespace stragglar::detail::auto_policy {

class WindowExchange;
class LateDetector;

struct Sample {
  double exposed_s;     // measured: the shortest in-call time of the call (exact on a shared clock)
  double predicted_s;   // the model at the overlap this choice could use in that call; NaN: none
  std::int64_t block;   // block it came in
  bool first_use;       // the configuration's first call, or native's first run (first-use costs): replaced by the next
  bool overlapped;      // StragglAR-like: its straggler was the one late in that call (significantly)
};

struct Candidate {
  Algorithm algorithm;
  bool uses_straggler;
  bool uses_set;                // stragglar-k, hierarchical: told the target set
  std::vector<Sample> samples;  // oldest first, at most config.history
  // Only a first-use measurement so far: it may not rule the candidate out (docs/auto.md "The
  // first calls"); it gives an estimate, but no fresh one, and the model ranks the candidate.
  bool first_use_only() const { return samples.size() == 1 && samples.front().first_use; }
  std::int64_t burst_start = -1000000;  // block that opened its current probe budget
  int burst_calls = 0;                  // probe calls run since then
};

struct Estimate {
  double value = 0;       // seconds; NaN: unknown
  bool measured = false;  // backed by >= min_samples fresh measurements
  int fresh = 0;
  double predicted = 0;  // model at the current delay; NaN: none
  std::vector<double> fresh_values;  // moved fresh values, newest first
};

// What candidates are told now: StragglAR's straggler and the late set (an index into the learned
// sets, and its ranks).
struct Targets {
  int straggler = -1;
  int set = -1;
  std::span<const int> late;
};

// The overlaps the last block offers: every call's median gap; the target's median gap in the calls
// it was late in and the fraction of calls it was (persistence); the same for the target set.
struct Delays {
  double all_s = 0, target_s = 0, persistence = 0, set_s = 0, set_persistence = 0;
};

class Estimator {
 public:
  Estimator(const PolicyConfig& config, Predictor predictor);

  int size() const noexcept { return static_cast<int>(cands_.size()); }
  const Candidate& candidate(int k) const { return cands_[static_cast<std::size_t>(k)]; }
  Candidate& candidate(int k) { return cands_[static_cast<std::size_t>(k)]; }
  const Estimate& estimate(int k) const { return est_[static_cast<std::size_t>(k)]; }
  double noise() const noexcept { return noise_; }  // relative spread of measured calls (σ)

  Choice choice_of(int k, const Targets& t) const;
  // A set candidate: a target set it can run with (hierarchical: one whole known host) and a model.
  bool available(int k, const Targets& t) const;
  // The late set is exactly one host of the known hosts (hierarchical's case).
  bool one_known_host(const Targets& t) const;
  bool has_candidate(Algorithm a) const {
    for (const Candidate& c : cands_)
      if (c.algorithm == a) return true;
    return false;
  }
  // The model, native modelled as the best straggler-agnostic candidate with a prediction.
  double predict(const Choice& c, double delay_s) const;
  double model(const Choice& c, double delay_s) const { return predict_(c, delay_s); }  // as supplied

  // The window's calls (the oldest filled window, as `detector` observed it), one sample each.
  void add_window(const WindowExchange& exchange, const LateDetector& detector, std::int64_t block);
  void estimate_all(const Targets& t, const Delays& d, std::int64_t block);

 private:
  struct Regimes {
    double mixture = 0;                      // 0: fewer than two regimes measured
    double level_late = 1, level_other = 1;  // median measured/model ratio in each regime
  };
  void add_sample(Candidate& c, const Sample& s);
  double predicted_now(int k, const Targets& t, const Delays& d) const;
  void estimate_one(int k, const Targets& t, const Delays& d, std::int64_t block);
  Regimes regime_mixture(int k, const Targets& t, double delay_target_s, double persistence, std::int64_t block);
  void update_noise();
  void scale_unmeasured();

  PolicyConfig config_;
  Predictor predict_;
  std::vector<Candidate> cands_;
  std::vector<Estimate> est_;
  double noise_;
  // Scratch, kept so that deciding allocates nothing once grown.
  std::vector<double> work_, values_, devs_, right_, wrong_;
};

}  // namespace stragglar::detail::auto_policy
