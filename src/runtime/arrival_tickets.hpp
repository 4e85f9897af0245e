// Every call's own straggler, found by arrival order where the ranks share memory.
//
// The paper ("Efficient AllReduce with Stragglers", § Limitations) notes that with stragglers that move from call to
// call, StragglAR needs "conditional execution of schedules based on the n−1 ranks that are first
// ready". Learning a persistent late rank from past calls (the policy) cannot serve that case:
// there is nothing to learn. Ranks on one host can instead see *this* call's arrivals: each rank
// takes a ticket with one atomic fetch-add when it enters the call; once arrivals stop while k
// ranks are still missing for longer than that k's grace, the missing ranks are this call's late
// set, known to every rank that arrived without a message. One compare-and-swap on the call's
// decision word settles the race with the last rank's own arrival: whoever swaps first decides,
// every rank reads the same word, so every rank runs the same algorithm.
//
// Why one counter and two decision slots suffice (docs/arrival-tickets.md): per communicator the
// calls are totally ordered and an AllReduce lets no rank leave call c before every rank entered
// it (every result needs every rank's data). So when any rank takes a ticket of call c + 1, all n
// tickets of call c are taken: call c owns tickets [n·c, n·c + n) of one monotone counter. And a
// rank can reach call c + 2 only after every rank read call c's decision (each read it before
// running call c, and left call c + 1), so call c's word and proposal can live in slot c mod 2.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace stragglar::detail {

// What one call runs, identical on every rank.
struct ArrivalDecision {
  // Every rank arrived within its grace: the call runs the symmetric algorithm auto would run.
  bool all_in_time = true;
  // Otherwise the ranks still missing when the grace ran out, ascending (this object's storage,
  // valid until the next arrive()).
  std::span<const int> late;
  bool i_am_late = false;  // this rank is one of them: it joins the phases that wait for it
  // This rank's place in the call's arrival order (0: first); a rank of `late` arrived after
  // every rank not in it.
  int ticket = 0;
  // The previous call's late ranks (this rank's previous decision): how long after the latest of
  // the others the first of them arrived, in seconds; 0 when that call had none or there is no
  // previous call. The same on every rank: every rank reads the same arrivals.
  double previous_delay_s = 0;
  // And which of them arrived last (−1: none), the same on every rank.
  int previous_last_late = -1;
};

// Nanoseconds on a clock every rank of the block reads (CLOCK_MONOTONIC on one host).
using ArrivalClock = std::function<std::int64_t()>;
std::int64_t steady_now_ns() noexcept;

class ArrivalTickets {
 public:
  // Bytes of the block every rank maps: zeroed before any rank constructs over it, 8-byte aligned.
  static std::size_t bytes(int nranks);

  // Over `block` (bytes(nranks) of shared memory). Throws Error(InvalidUsage) naming a bad
  // nranks/rank or a misaligned block.
  ArrivalTickets(void* block, int nranks, int rank, ArrivalClock clock = steady_now_ns);

  // Enters call `call` (0, 1, 2, … the same sequence on every rank of the block) and returns its
  // decision. `grace_s[k − 1]`: how long the ranks that arrived wait, after the latest arrival,
  // for k missing ranks before the call goes on without them (infinite or absent: wait for
  // every rank). `expected_late` (−1: none): a rank late in most recent calls; when it is the one
  // rank missing, the call goes on without it at once (the same value on every rank). Waits at
  // most `timeout_s` for a decision: Error(Timeout) names the missing ranks. Allocates nothing.
  ArrivalDecision arrive(std::int64_t call, std::span<const double> grace_s, double timeout_s, int expected_late = -1);
  // The same for the next call of this rank's sequence (0, 1, 2, …).
  ArrivalDecision arrive_next(std::span<const double> grace_s, double timeout_s, int expected_late = -1) {
    return arrive(next_call_++, grace_s, timeout_s, expected_late);
  }

  int nranks() const noexcept { return n_; }
  int rank() const noexcept { return rank_; }

 private:
  using Word = std::atomic<std::uint64_t>;
  static_assert(Word::is_always_lock_free, "arrival tickets need lock-free 64-bit atomics in shared memory");

  Word& tickets() const noexcept { return words_[0]; }
  Word& decision(std::int64_t call) const noexcept { return words_[1 + (call & 1)]; }
  Word& entered(int r) const noexcept { return words_[3 + 3 * r]; }  // last call entered + 1
  // Its entry into `call` on the clock, one slot per call parity: call c − 1's stays readable
  // while any rank is in call c (no rank reaches c + 1 before every rank entered c).
  Word& arrival_ns(int r, std::int64_t call) const noexcept { return words_[4 + 3 * r + (call & 1)]; }
  Word* proposal(std::int64_t call, int proposer) const noexcept;       // bitset of late ranks

  bool try_decide(std::int64_t call, std::span<const double> grace_s, int expected_late, std::uint64_t empty);
  struct PreviousLate {
    double delay_s = 0;  // ArrivalDecision::previous_delay_s
    int last = -1;       // ArrivalDecision::previous_last_late
  };
  ArrivalDecision read(std::int64_t call, std::uint64_t word, int ticket, PreviousLate previous);
  PreviousLate previous_late(std::int64_t call) const noexcept;
  std::uint64_t word_of(std::int64_t call, bool all_in_time, int proposer) const noexcept;

  Word* words_;
  int n_, rank_;
  std::size_t mask_words_;
  ArrivalClock clock_;
  bool sleep_while_waiting_;  // more ranks than this process's CPUs
  std::int64_t next_call_ = 0;
  std::int64_t last_call_ = -1;  // the call of late_ (previous_late reads only the one before)
  std::vector<int> late_;     // the decision's late ranks
  std::vector<int> missing_;  // scratch of try_decide
};

}  // namespace stragglar::detail
