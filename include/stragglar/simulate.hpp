// α-β simulator (docs/design.md "Simulator"; paper §4.3 "analytical network model").
#pragma once
#include <cstddef>
#include <vector>

#include "stragglar/cost_model.hpp"
#include "stragglar/round_costs.hpp"
#include "stragglar/schedule.hpp"

namespace stragglar {

// The functions below but the four-argument simulate() take an optional RoundOverhead
// (round_costs.hpp): h, the host's time to enqueue one round, for s.algorithm at s.nranks and
// `bytes`. The host never waits for the stream, so it runs ahead: a rank's k-th round cannot
// start before its arrival + k·h. With none (the default) the α-β model alone.

// Lock-step: Σ over rounds of α + β · (most bytes any rank sends or receives that round)
// (+ γ · the bytes that rank reduces, when cost.gamma_s_per_byte > 0); with h, the k-th round
// starts at the latest of the previous round's end and k·h.
double lockstep_time_s(const Schedule& s, std::size_t bytes, const CostModel& cost,
                       bool waiting_phases_only = false, const RoundOverhead& overhead = {});

// Event-driven: every rank has an arrival time; a rank runs its rounds in order; a transfer
// starts when both ends have arrived, finished their previous rounds and enqueued this one
// (arrival + h · the rounds it has taken part in so far, this one included); a `reduce`
// receiver is busy γ · bytes longer.
struct EventResult {
  std::vector<double> finish_s;  // per rank
  double last_finish_s = 0;
};
EventResult simulate_events(const Schedule& s, std::size_t bytes, const CostModel& cost,
                            const std::vector<double>& arrival_s, const RoundOverhead& overhead = {});

// How late the straggler comes, relative to the others (who arrive at t = 0).
struct Delay {
  bool ideal = false;    // long enough to hide every phase that does not wait for it
  double seconds = 0;    // used when !ideal
};

struct SimResult {
  int rounds = 0;
  double delay_s = 0;     // the straggler's arrival (resolved for `ideal`)
  double time_s = 0;      // from the others' arrival to the last rank's finish
  double exposed_s = 0;   // from the straggler's arrival to the last rank's finish
};

// Straggler-agnostic schedules (straggler == nullopt) are run with rank n-1 arriving late,
// since they must wait for everyone. For `ideal`, the delay is the time the others need for
// the phases that do not wait for the straggler (0 when there are none).
SimResult simulate(const Schedule& s, std::size_t bytes, const CostModel& cost, Delay delay);
// The same with the ranks in `late` arriving late together (a slow node), e.g. ring
// compared with stragglar-k on the same set. Throws Error(InvalidUsage) for a rank out of range.
// With a RoundOverhead, name the late ranks (s.late_ranks(), or {n-1} as above).
SimResult simulate(const Schedule& s, std::size_t bytes, const CostModel& cost, Delay delay,
                   const std::vector<int>& late, const RoundOverhead& overhead = {});

// Arrival tickets (docs/arrival-tickets.md): the ranks that arrived wait `grace_s` after the
// last of them for the straggler. If it comes within that, the call runs `symmetric`; otherwise
// deciding takes `decision_s` (an atomic in shared memory on one host: about a microsecond; on a
// GPU, a kernel's write to mapped memory and a CUDA graph conditional node: microseconds more)
// and `stragglar`, told that rank, starts then; the straggler joins when it arrives.
struct ArrivalTicketCost {
  double grace_s = 0;
  double decision_s = 0;
};
// One call with the straggler (rank s.straggler of `stragglar`) `delay_s` late. Throws
// Error(InvalidUsage) for a negative time or schedules of different rank counts.
SimResult simulate_arrival_tickets(const Schedule& stragglar, const Schedule& symmetric, std::size_t bytes,
                                   const CostModel& cost, double delay_s, ArrivalTicketCost t,
                                   const RoundOverhead& overhead = {});

}  // namespace stragglar
