// auto's second stage: who is late (docs/auto.md "Per decision: late rank, delay, scores", "Several late ranks").
// Per call of a window, from every rank's in-call time T_r (all ranks leave a call at about the
// same time, so T_r is the common exit − rank r's arrival):
//   exposed ≈ min_r T_r        (the last to arrive waited for nobody)
//   late    = argmin_r T_r     (it arrived last)
//   gap     = second-min − min (how long after the second-last it arrived: the overlap
//                               StragglAR's ReduceScatter among the others can use)
// and the late set: the j ranks (2 <= j <= n/2) before the largest significant gap in arrival.
// Each call votes into the last P calls (the block); a rank late in most of them, and in two at
// least, is the late rank; the same for a set of 2+ ranks, which is then learned (kept in a table
// that never changes a set once added, so a Choice points into it without copying; the table is
// allocated in full at construction, so learning allocates nothing).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/auto/policy_config.hpp"

namespace stragglar::detail::auto_policy {

class LateDetector {
 public:
  explicit LateDetector(const PolicyConfig& config);

  // The window of `calls` calls starting at call `first`: `times` holds rank r's in-call time of
  // call j at r * slots + j (ns). Every call votes, except the configuration's first call when
  // it followed a synchronisation (nobody is late in it).
  void observe(std::span<const std::int64_t> times, int slots, int calls, std::int64_t first);
  // The late rank and StragglAR's target, the delays and persistence, the late set and the set
  // stragglar-k / hierarchical are told, from the votes of the last P calls.
  void vote();

  // A gap between the last arrival and the one before it that names a late rank: at least
  // min_delay_s and min_delay_fraction of the call.
  bool significant_gap(double gap_s, double exposed_s) const;

  // The last observed window, per call j.
  int call_late(int j) const { return late_per_call_[static_cast<std::size_t>(j)]; }
  double call_gap(int j) const { return gap_[static_cast<std::size_t>(j)]; }
  double call_exposed(int j) const { return exposed_[static_cast<std::size_t>(j)]; }
  // The gap before the set `told` when exactly that set was late in call j; none otherwise.
  std::optional<double> call_set_gap(int j, std::span<const int> told) const;

  int late_rank() const noexcept { return late_; }
  int target() const noexcept { return target_; }   // the straggler StragglAR is told
  double delay_s() const noexcept { return delay_s_; }  // median gap of the last P calls
  double delay_target_s() const noexcept { return delay_target_; }  // ... of those the target was late in
  double persistence() const noexcept { return persistence_; }     // fraction of them it was late in
  int late_set() const noexcept { return late_set_; }    // index of the learned set late now, -1
  int target_set() const noexcept { return target_set_; }  // index of the set told, -1
  double delay_set_s() const noexcept { return delay_set_; }
  double set_persistence() const noexcept { return set_persistence_; }
  std::span<const int> set(int index) const noexcept;
  const std::vector<double>& scores() const noexcept { return scores_; }
  // The evidence's numbers: calls voting, calls with a late rank, the late rank's and set's votes.
  int voters() const noexcept { return static_cast<int>(recent_late_.size()); }
  int significant() const noexcept { return significant_; }
  int votes(int rank) const { return count_[static_cast<std::size_t>(rank)]; }
  int late_set_votes() const noexcept { return late_set_count_; }

 private:
  struct Arrival {
    int last;  // the rank that arrived last (ties: the lowest)
    std::int64_t min1, min2, max;
  };
  Arrival arrival(std::span<const std::int64_t> times, int slots, int call) const;
  std::size_t next_set_slot();
  int call_late_set(std::span<const std::int64_t> times, int slots, int call, double exposed_s, std::size_t slot,
                    double& gap_s);
  void vote_rank();
  void vote_set();
  int learn(std::span<const int> set);  // index in the table (added when new and room is left), -1
  int set_votes(int index) const;
  bool same_set(std::size_t slot, std::span<const int> set) const;
  std::span<const int> slot_set(std::size_t slot) const;
  std::size_t slot_at(int i) const { return static_cast<std::size_t>((recent_set_head_ + i) % period_); }

  int nranks_, period_;
  bool first_call_synchronised_;
  double min_delay_fraction_, min_delay_s_;
  int max_late_sets_;
  int target_ = 0;
  int late_ = -1;
  double delay_s_ = 0, delay_target_ = 0, persistence_ = 0;
  int significant_ = 0;
  // The last P voting calls: late rank (-1: no significant gap), gap, oldest first.
  std::vector<int> recent_late_;
  std::vector<double> recent_gap_;
  // The same calls' late sets of 2+ ranks: a ring of P slots of up to n/2 ranks each, the size
  // (0: none) and the gap before the set; recent_set_head_ is the oldest slot.
  std::vector<int> recent_set_ranks_, recent_set_size_;
  std::vector<double> recent_set_gap_;
  int recent_set_head_ = 0, recent_set_count_ = 0;
  // Learned sets, never changed once added: max_late_sets slots of n/2 ranks, and their sizes.
  std::vector<int> learned_ranks_, learned_size_;
  int target_set_ = -1, late_set_ = -1, late_set_count_ = 0;
  double delay_set_ = 0, set_persistence_ = 0;
  std::vector<double> scores_;
  // Per call of the last window; scratch (kept so that deciding allocates nothing once grown).
  std::vector<int> late_per_call_, window_set_slot_, count_, set_order_;
  std::vector<double> gap_, exposed_, score_, work_, values_;
};

}  // namespace stragglar::detail::auto_policy
