// Arrival tickets: the protocol of arrival_tickets.hpp (docs/arrival-tickets.md).
#include "runtime/arrival_tickets.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar::detail {

namespace {

// A decision word: (call + 1) in the high bits, so a word left from call c − 2 in the same slot
// reads as "not decided"; then the kind; then the rank whose proposal holds the late set.
constexpr int kProposerBits = 18;
constexpr std::uint64_t kAllInTime = 1, kLateSet = 2;
constexpr int kKindShift = kProposerBits, kCallShift = kProposerBits + 2;
constexpr int kMaxRanks = 1 << kProposerBits;

std::uint64_t call_of(std::uint64_t word) { return word >> kCallShift; }
std::uint64_t kind_of(std::uint64_t word) { return (word >> kKindShift) & 3; }
int proposer_of(std::uint64_t word) { return static_cast<int>(word & ((1u << kProposerBits) - 1)); }

std::size_t mask_words_for(int nranks) { return (static_cast<std::size_t>(nranks) + 63) / 64; }

// Header: tickets, two decision words; per rank: entered, arrival_ns of two calls; then two slots of one late
// bitset per proposer.
std::size_t word_count(int nranks) {
  const auto n = static_cast<std::size_t>(nranks);
  return 3 + 3 * n + 2 * n * mask_words_for(nranks);
}

// More ranks than CPUs: a waiter that only yields still takes its share of a CPU from the ranks it
// waits for (a yield under CFS gives little away), which makes them later than the grace. Such a
// waiter sleeps between looks once it has spun this many times, as MPI libraries do when
// oversubscribed.
constexpr int kSpinsBeforeSleeping = 256;
constexpr long kOversubscribedSleepNs = 20'000;

bool more_ranks_than_cpus(int nranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  return nranks > CPU_COUNT(&set);
}

}  // namespace

std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t ArrivalTickets::bytes(int nranks) {
  if (nranks < 1 || nranks >= kMaxRanks)
    throw Error(ErrorCode::InvalidUsage, "arrival tickets: nranks " + std::to_string(nranks) + " is outside [1, " +
                                             std::to_string(kMaxRanks) + ")");
  return word_count(nranks) * sizeof(Word);
}

ArrivalTickets::ArrivalTickets(void* block, int nranks, int rank, ArrivalClock clock)
    : words_(static_cast<Word*>(block)), n_(nranks), rank_(rank), mask_words_(mask_words_for(nranks)),
      clock_(std::move(clock)), sleep_while_waiting_(more_ranks_than_cpus(nranks)) {
  (void)bytes(nranks);  // checks nranks
  if (rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidUsage, "arrival tickets: rank " + std::to_string(rank) + " is outside [0, " +
                                             std::to_string(nranks) + ")");
  if (block == nullptr || reinterpret_cast<std::uintptr_t>(block) % alignof(Word) != 0)
    throw Error(ErrorCode::InvalidUsage, "arrival tickets: the shared block must be non-null and 8-byte aligned");
  if (!clock_) throw Error(ErrorCode::InvalidUsage, "arrival tickets: no clock");
  late_.reserve(static_cast<std::size_t>(nranks));
  missing_.reserve(static_cast<std::size_t>(nranks));
}

ArrivalTickets::Word* ArrivalTickets::proposal(std::int64_t call, int proposer) const noexcept {
  const std::size_t slot = static_cast<std::size_t>(call & 1);
  return words_ + 3 + 3 * static_cast<std::size_t>(n_) +
         (slot * static_cast<std::size_t>(n_) + static_cast<std::size_t>(proposer)) * mask_words_;
}

std::uint64_t ArrivalTickets::word_of(std::int64_t call, bool all_in_time, int proposer) const noexcept {
  return (static_cast<std::uint64_t>(call + 1) << kCallShift) | ((all_in_time ? kAllInTime : kLateSet) << kKindShift) |
         static_cast<std::uint64_t>(proposer);
}

// A rank that arrived and waits: when arrivals have stopped for the grace of the number of ranks
// still missing, proposes them as the call's late set. Returns true when this rank's proposal
// became the decision. Missing ranks are read from `entered`, which a rank sets before it takes
// its ticket: when that count agrees with the tickets, no rank is between the two steps, and every
// rank of the set will take a ticket after every rank outside it.
bool ArrivalTickets::try_decide(std::int64_t call, std::span<const double> grace_s, int expected_late,
                                std::uint64_t empty) {
  const auto base = static_cast<std::uint64_t>(call) * static_cast<std::uint64_t>(n_);
  const std::uint64_t taken = tickets().load(std::memory_order_acquire) - base;
  if (taken >= static_cast<std::uint64_t>(n_)) return false;  // everyone is here: the last one decides
  const std::size_t k = static_cast<std::size_t>(n_) - taken;
  const bool told = k == 1 && expected_late >= 0;
  if (!told && (k > grace_s.size() || !(grace_s[k - 1] < INFINITY))) return false;
  missing_.clear();
  std::int64_t latest_ns = 0;
  const auto mark = static_cast<std::uint64_t>(call + 1);
  for (int r = 0; r < n_; ++r) {
    if (entered(r).load(std::memory_order_acquire) != mark) missing_.push_back(r);
    else latest_ns = std::max(latest_ns, static_cast<std::int64_t>(arrival_ns(r, call).load(std::memory_order_relaxed)));
  }
  if (missing_.size() != k) return false;  // a rank is between `entered` and its ticket
  const double grace = told && missing_[0] == expected_late ? 0.0 : k <= grace_s.size() ? grace_s[k - 1] : INFINITY;
  if (!(grace < INFINITY) || static_cast<double>(clock_() - latest_ns) < grace * 1e9) return false;
  Word* mask = proposal(call, rank_);
  for (std::size_t w = 0; w < mask_words_; ++w) mask[w].store(0, std::memory_order_relaxed);
  for (int r : missing_)
    mask[static_cast<std::size_t>(r) / 64].fetch_or(std::uint64_t{1} << (r % 64), std::memory_order_relaxed);
  std::uint64_t expected = empty;
  return decision(call).compare_exchange_strong(expected, word_of(call, false, rank_), std::memory_order_acq_rel,
                                                std::memory_order_acquire);
}

// late_ still holds the previous call's late ranks, the same on every rank. Every rank entered
// that call (this one left it), and none has entered the next of this parity yet.
ArrivalTickets::PreviousLate ArrivalTickets::previous_late(std::int64_t call) const noexcept {
  if (call == 0 || last_call_ != call - 1 || late_.empty()) return {};
  std::int64_t others = 0, first_late = INT64_MAX, last_late = -1;
  PreviousLate p;
  for (int r = 0; r < n_; ++r) {
    const auto at = static_cast<std::int64_t>(arrival_ns(r, call - 1).load(std::memory_order_relaxed));
    if (!std::binary_search(late_.begin(), late_.end(), r)) {
      others = std::max(others, at);
      continue;
    }
    first_late = std::min(first_late, at);
    if (at > last_late) last_late = at, p.last = r;
  }
  p.delay_s = static_cast<double>(std::max<std::int64_t>(0, first_late - others)) * 1e-9;
  return p;
}

ArrivalDecision ArrivalTickets::read(std::int64_t call, std::uint64_t word, int ticket, PreviousLate previous) {
  ArrivalDecision d;
  d.ticket = ticket;
  d.previous_delay_s = previous.delay_s;
  d.previous_last_late = previous.last;
  late_.clear();
  if (kind_of(word) == kLateSet) {
    const Word* mask = proposal(call, proposer_of(word));
    for (int r = 0; r < n_; ++r)
      if (mask[static_cast<std::size_t>(r) / 64].load(std::memory_order_relaxed) >> (r % 64) & 1) late_.push_back(r);
    d.all_in_time = false;
    d.i_am_late = std::binary_search(late_.begin(), late_.end(), rank_);
  }
  d.late = late_;
  return d;
}

ArrivalDecision ArrivalTickets::arrive(std::int64_t call, std::span<const double> grace_s, double timeout_s,
                                      int expected_late) {
  if (call < 0 || call >= (std::int64_t{1} << (64 - kCallShift)) - 1)
    throw Error(ErrorCode::InvalidUsage, "arrival tickets: call " + std::to_string(call) + " is out of range");
  const std::int64_t now = clock_();
  arrival_ns(rank_, call).store(static_cast<std::uint64_t>(now), std::memory_order_relaxed);
  const PreviousLate previous = previous_late(call);
  last_call_ = call;
  entered(rank_).store(static_cast<std::uint64_t>(call + 1), std::memory_order_release);
  const auto base = static_cast<std::uint64_t>(call) * static_cast<std::uint64_t>(n_);
  const int ticket = static_cast<int>(tickets().fetch_add(1, std::memory_order_acq_rel) - base);
  const auto mark = static_cast<std::uint64_t>(call + 1);
  std::uint64_t word = decision(call).load(std::memory_order_acquire);
  // The last rank in: everyone arrived in time, unless a late set was decided before it came.
  if (ticket == n_ - 1 && call_of(word) != mark) {
    const std::uint64_t mine = word_of(call, true, rank_);
    if (decision(call).compare_exchange_strong(word, mine, std::memory_order_acq_rel, std::memory_order_acquire))
      return read(call, mine, ticket, previous);
  }
  const std::uint64_t empty = call_of(word) == mark ? 0 : word;  // the slot's word from call − 2
  const std::int64_t deadline = now + static_cast<std::int64_t>(std::min(timeout_s, 1e9) * 1e9);
  for (int spins = 0;; ++spins) {
    word = decision(call).load(std::memory_order_acquire);
    if (call_of(word) == mark) return read(call, word, ticket, previous);
    if (try_decide(call, grace_s, expected_late, empty)) continue;  // read back the word just written
    if (clock_() > deadline) {
      std::string who;
      for (int r = 0; r < n_; ++r)
        if (entered(r).load(std::memory_order_acquire) != mark) who += (who.empty() ? "" : ", ") + std::to_string(r);
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank_) + ": call " + std::to_string(call) +
                                          ": no decision within " + std::to_string(timeout_s) + " s; ranks still missing: " +
                                          (who.empty() ? "none" : who));
    }
    if (sleep_while_waiting_ && spins >= kSpinsBeforeSleeping) {
      const timespec nap{0, kOversubscribedSleepNs};
      nanosleep(&nap, nullptr);
    } else {
      sched_yield();
    }
  }
}

}  // namespace stragglar::detail
