// auto's fifth stage: which calls run something other than the incumbent (docs/auto.md
// "Exploration"). Planned once per block, and again when the choice, the straggler or the late set
// changed: candidates that could be the best but lack fresh measurements get a probe call or two,
// bounded per candidate per refresh_blocks blocks and per block, and every refresh_blocks blocks
// the near candidate measured longest ago gets one call, so that drift is noticed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/auto/estimator.hpp"

namespace stragglar::detail::auto_policy {

class Probes {
 public:
  Probes(const PolicyConfig& config, int candidates);

  bool pending() const noexcept { return pos_ < plan_.size(); }
  int peek() const { return plan_[pos_]; }
  int take() { return plan_[pos_++]; }
  std::span<const int> remaining() const { return std::span<const int>(plan_).subspan(pos_); }
  std::int64_t planned_block() const noexcept { return planned_block_; }

  // A candidate without a model of its own (native: no schedule to simulate) cannot be ranked by
  // the model: the first call measures it (the core's first call, which pays first-use costs
  // anyway), so that it is kept or ruled out by what it costs on this host, not explored later.
  void probe_unmodelled(const Estimator& est, const Targets& t, int incumbent);
  // The probes of the block `next_block` starts, from the estimates of the decision in `block`.
  void plan(int best, int incumbent, std::int64_t block, std::int64_t next_block, Estimator& est, const Targets& t,
            double delay_s);

 private:
  struct Bands {
    double best_value, band;        // the best estimate; "could be the best": within this
    double model_best, model_band;  // the same for candidates never measured, by the model alone
    double delay_s;                 // the last block's median gap
  };
  struct Need {
    int candidate, calls;
    bool unknown;
    double value;
  };
  int calls_needed(int k, int incumbent, std::int64_t block, Estimator& est, const Bands& b) const;
  void fill(std::int64_t block);
  void refresh(int incumbent, std::int64_t block, const Estimator& est, double band);

  PolicyConfig config_;
  std::vector<int> plan_;  // candidates of the next calls, then the incumbent
  std::size_t pos_ = 0;
  std::int64_t last_refresh_block_ = 0;
  std::int64_t planned_block_ = -1;  // block of the last plan
  std::vector<Need> needs_;          // scratch
};

}  // namespace stragglar::detail::auto_policy
