// auto's fourth stage: which candidate is decided (docs/auto.md "Choice and hysteresis"). The best
// estimate replaces the incumbent only beyond a margin: measured against measured, switch_margin
// plus 1.5 standard errors of the difference (measured native over a schedule: switch_margin
// alone); an estimate without enough fresh measurements, a gain beyond the model's error. A
// measured switch straight back to the choice just left waits min_dwell_blocks blocks.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/auto/estimator.hpp"

namespace stragglar::detail::auto_policy {

class Selection {
 public:
  explicit Selection(const PolicyConfig& config);

  int incumbent() const noexcept { return incumbent_; }
  // Before any measurement: the model's best at no delay (its seconds may be uncalibrated, but
  // every candidate is on the same scale), or native with config.start_with_native.
  void start(const Estimator& est, const Targets& t);
  // The candidate with the lowest estimate (a cold first call alone does not count); -1: none.
  static int best(const Estimator& est);
  // Whether `best` replaces the incumbent (then it is the incumbent). `reason` (when not null):
  // why, for the INFO evidence. `block`: the decision's block.
  bool consider(int best, const Estimator& est, const Targets& t, const Choice& incumbent_choice, std::int64_t block,
                std::string* reason);

 private:
  bool measured_switch(int best, const Estimator& est, const Targets& t, std::int64_t block, std::string* reason);
  bool model_switch(int best, const Estimator& est, std::string* reason);

  double switch_margin_, model_error_;
  int min_dwell_blocks_;
  bool start_with_native_;
  int incumbent_ = 0;
  std::int64_t last_change_block_ = -1;              // block of the last incumbent change
  Choice previous_choice_{Algorithm::automatic, -1};  // what the incumbent ran before it (dwell)
  bool incumbent_by_model_ = true;                    // chosen without measurements backing it
};

}  // namespace stragglar::detail::auto_policy
