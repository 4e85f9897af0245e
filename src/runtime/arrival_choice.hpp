// auto with arrival tickets (arrival_tickets.hpp; docs/arrival-tickets.md): for one auto
// configuration, how long the ranks that arrived wait for the missing ones, and what a call runs
// when it goes on without them. The policy (straggler_policy.hpp) keeps deciding what runs when
// every rank arrives in time; a call that goes on without its late ranks runs StragglAR told this
// call's late rank (stragglar-k told its late pair) and is not shown to the policy, which
// learns nothing from a delay the call already used.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "runtime/arrival_tickets.hpp"
#include "runtime/straggler_policy.hpp"

namespace stragglar::detail {

class ArrivalChoice {
 public:
  // The graces come from the model (`predict`, the policy's): for k late ranks, how much longer
  // the schedule told them runs than the best symmetric schedule when nobody is late — what
  // starting without them costs if they come at once. Waiting that long first bounds the loss to
  // twice it (a rent-or-buy rule), and any delay beyond it is overlapped. Infinite (wait for
  // every rank) where the schedule cannot win even at an infinite delay, or has no model, or is
  // not among `candidates`.
  ArrivalChoice(int nranks, const Predictor& predict, const std::vector<Algorithm>& candidates);

  // Takes this call's ticket. Returns what the call runs without its late ranks (every rank
  // gets the same), or nothing when every rank arrived in time: the policy's choice then runs.
  std::optional<Choice> arrive(ArrivalTickets& tickets, double timeout_s);

  const std::vector<double>& grace_s() const noexcept { return grace_s_; }
  std::int64_t calls() const noexcept { return calls_; }             // calls that took a ticket
  std::int64_t late_calls() const noexcept { return late_calls_; }  // of them, run without a late rank or set
  int expected_late() const noexcept { return expected_late_; }

  // What the last kWindow ticketed calls saw, the same on every rank (every rank reads the same
  // decisions): the report's view when the tickets, not the policy, handled the late ranks.
  // Per rank, the fraction of those calls that went on without it, in [0, 1].
  const std::vector<double>& late_scores() const noexcept { return scores_; }
  // Of the ranks late in more than half of them, the one late in the most (then: the one that
  // came last of its call's late ranks most often), −1: none or a tie.
  int window_late_rank() const noexcept { return window_late_rank_; }
  // The ranks each late in more than half of them, when two or more; empty: none (or one).
  const std::vector<int>& window_late_set() const noexcept { return window_set_; }
  // The median delay of the late ranks over the window's calls that went on without them (each
  // measured at the next call, when their arrival is known), seconds; 0: none measured yet.
  double window_delay_s() const;

  // Late sets of two or more ranks kept (each a plan); a set beyond them waits for its ranks.
  static constexpr std::size_t kMaxSets = 16;
  // Recent calls over which a rank late in most of them is not waited for.
  static constexpr int kRecent = 5;
  // Ticketed calls the report's view covers.
  static constexpr int kWindow = 16;

 private:
  int n_;
  std::vector<double> grace_s_;        // [k − 1]: for k ranks missing
  std::deque<std::vector<int>> sets_;  // late sets told to stragglar-k: stable storage for Choice::late
  std::vector<int> recent_late_;       // the single late rank of the last kRecent calls, −1: none
  int recent_pos_ = 0;
  int expected_late_ = -1;
  std::int64_t calls_ = 0, late_calls_ = 0;
  // The report's window (sized at construction: a call allocates nothing for it).
  void note_window(const ArrivalDecision& d);
  std::vector<std::uint8_t> window_;  // kWindow rows of n: 1 where the rank was late
  std::vector<int> late_count_;       // per rank, over the window's rows
  std::vector<double> delay_s_;       // per row: its late ranks' delay, 0 until measured
  std::vector<int> row_last_;         // per row: which of its late ranks came last, −1 until known
  std::vector<int> last_count_;       // per rank, over the window's rows: times it came last
  std::vector<double> scores_;
  std::vector<int> window_set_;
  int window_pos_ = 0, window_fill_ = 0, window_late_rank_ = -1;
};

}  // namespace stragglar::detail
