#include "runtime/auto/window_exchange.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/auto/config_check.hpp"
#include "runtime/auto/trace.hpp"
#include "stragglar/error.hpp"

namespace stragglar::detail::auto_policy {
namespace {
// shared_clock entry times: at most 2^62 ns, so entry + in-call time (<= 10^15 ns) never overflows.
constexpr std::int64_t kMaxEntryNs = std::int64_t{1} << 62;

std::string bad_size(std::size_t size, int expected) {
  return "straggler policy: exchange array of " + std::to_string(size) + " values, expected " +
         std::to_string(expected) + " (nranks × slots_per_rank)";
}
}  // namespace

WindowExchange::WindowExchange(const PolicyConfig& c)
    : nranks_(c.nranks), period_(c.period), shared_clock_(c.shared_clock) {
  converging_window_ = window_ = c.exchange_every > 0 ? c.exchange_every : c.period;
  settled_window_ = c.settled_exchange_every > 0 ? c.settled_exchange_every : window_;
  entry_slot_ = std::max(converging_window_, settled_window_);
  slots_ = entry_slot_ * (c.shared_clock ? 2 : 1) + 1;
  if (shared_clock_) clocked_.reserve(static_cast<std::size_t>(exchange_size()));
  std::size_t ring = 8;
  while (ring < 2 * static_cast<std::size_t>(c.period) + 2) ring *= 2;
  ring_.resize(ring);
}

void WindowExchange::begin(const CallRecord& call) {
  if (static_cast<std::size_t>(begun_ - decided_) == ring_.size()) {  // record/decide lag grew: grow
    std::vector<CallRecord> bigger(ring_.size() * 2);
    for (std::int64_t i = decided_; i < begun_; ++i) bigger[static_cast<std::size_t>(i) & (bigger.size() - 1)] = this->call(i);
    ring_.swap(bigger);
  }
  ring_[ring_index(begun_++)] = call;
}

void WindowExchange::record(double seconds_in_call, std::int64_t entry_ns) {
  // Runs every call: the messages are built only when a check fails.
  if (recorded_ >= begun_)
    throw Error(ErrorCode::InvalidUsage, "straggler policy: record() of call " + std::to_string(recorded_) +
                                             " before its begin_call(), expected one begin_call() per recorded call");
  if (!(std::isfinite(seconds_in_call) && seconds_in_call >= 0))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: time in call " + fmt_g(seconds_in_call) +
                                             " s is not valid, expected seconds >= 0");
  if (shared_clock_ && (entry_ns < 0 || entry_ns > kMaxEntryNs))
    throw Error(ErrorCode::InvalidUsage, "straggler policy: entry time " + std::to_string(entry_ns) + " ns of call " +
                                             std::to_string(recorded_) + ", expected 0 to 2^62 ns (shared_clock)");
  CallRecord& r = ring_[ring_index(recorded_++)];
  r.ns = std::llround(std::min(seconds_in_call, 1e6) * 1e9);  // capped: nanoseconds far from int64 overflow
  r.entry_ns = entry_ns;
}

// FNV-1a over what every rank must agree on: where the window starts and what each call ran.
std::uint64_t WindowExchange::digest(std::int64_t first_call) const {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::int64_t v) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  mix(first_call);
  mix(nranks_);
  mix(slots_);  // the layout (shared_clock doubles it): ranks must agree on it
  mix(period_);
  mix(window_);
  for (int j = 0; j < window_; ++j) {
    const CallRecord& r = call(first_call + j);
    mix(static_cast<int>(r.algorithm));
    mix(r.straggler);
    mix(r.set);
    for (int x : r.late) mix(x);
  }
  return h & 0x3fffffffffffffffull;  // non-negative: -1 marks "no contribution"
}

// This rank's slots: the window's in-call times (a shorter window leaves the rest 0), their
// entries on a shared clock, the digest; -1 in every other rank's slots.
void WindowExchange::fill(std::span<std::int64_t> all, int rank) {
  if (!due())
    throw Error(ErrorCode::InvalidUsage, "straggler policy: fill_exchange() with " + std::to_string(recorded_ - filled_) +
                                             " recorded calls waiting, expected " + std::to_string(window_) +
                                             " (calls per exchange)");
  if (all.size() != static_cast<std::size_t>(exchange_size())) throw Error(ErrorCode::InvalidUsage, bad_size(all.size(), exchange_size()));
  if (rank < 0 || rank >= nranks_) bad_int("rank", rank, "a rank in [0, nranks)");
  std::fill(all.begin(), all.end(), std::int64_t{-1});
  const std::size_t base = static_cast<std::size_t>(rank) * static_cast<std::size_t>(slots_);
  for (int j = 0; j < entry_slot_; ++j) all[base + static_cast<std::size_t>(j)] = j < window_ ? call(filled_ + j).ns : 0;
  if (shared_clock_)
    for (int j = 0; j < entry_slot_; ++j)
      all[base + static_cast<std::size_t>(entry_slot_ + j)] = j < window_ ? call(filled_ + j).entry_ns : 0;
  all[base + static_cast<std::size_t>(slots_ - 1)] = static_cast<std::int64_t>(digest(filled_));
  filled_ += window_;
}

void WindowExchange::check(std::span<const std::int64_t> all, std::int64_t decisions) const {
  require(filled_ > decided_, "straggler policy: decide() without a filled exchange, expected fill_exchange() first");
  if (all.size() != static_cast<std::size_t>(exchange_size())) throw Error(ErrorCode::InvalidUsage, bad_size(all.size(), exchange_size()));
  const std::int64_t first = decided_;
  const std::int64_t expected = static_cast<std::int64_t>(digest(first));
  for (int r = 0; r < nranks_; ++r) {
    const auto at = [&](int j) { return all[static_cast<std::size_t>(r * slots_ + j)]; };
    for (int j = 0; j < slots_; ++j)
      if (at(j) < 0)
        throw Error(ErrorCode::InvalidUsage, "straggler policy: rank " + std::to_string(r) +
                                                 " contributed nothing to exchange " + std::to_string(decisions) +
                                                 " (slot " + std::to_string(j) +
                                                 " is negative), expected every rank to fill_exchange() before the max");
    if (at(slots_ - 1) != expected)
      throw Error(ErrorCode::Mismatch,
                  "straggler policy: rank " + std::to_string(r) + " ran different choices or counted calls differently in calls " +
                      std::to_string(first) + ".." + std::to_string(first + window_ - 1) + " than this rank, expected every rank "
                      "to call begin_call/record/fill_exchange/decide at the same calls");
  }
}

std::span<const std::int64_t> WindowExchange::open(std::span<const std::int64_t> all, std::int64_t decisions) {
  check(all, decisions);
  return shared_clock_ ? exact_in_call_times(all) : all;
}

// shared_clock: every rank's in-call time of each call of the window replaced by the latest exit
// − its entry — what it would have spent had everyone left together. The shortest is then the
// call's exposed time (latest exit − latest entry) and their differences the arrival gaps, so the
// later stages read them as they read in-call times without a shared clock.
std::span<const std::int64_t> WindowExchange::exact_in_call_times(std::span<const std::int64_t> all) {
  const int S = slots_;
  clocked_.assign(all.begin(), all.end());
  const auto idx = [S](int r, int j) { return static_cast<std::size_t>(r * S + j); };
  for (int j = 0; j < window_; ++j) {
    std::int64_t last_exit = std::numeric_limits<std::int64_t>::min();
    for (int r = 0; r < nranks_; ++r) last_exit = std::max(last_exit, all[idx(r, entry_slot_ + j)] + all[idx(r, j)]);
    for (int r = 0; r < nranks_; ++r) clocked_[idx(r, j)] = last_exit - all[idx(r, entry_slot_ + j)];
  }
  return clocked_;
}

// The next window: every P calls once settled — P calls in a row whose decisions changed nothing
// and planned no probe, with a measured choice (settled_exchange_every) — back to the converging
// window at any change or planned probe. Only when no later window is filled yet (engines that
// decide with a lag keep one window length: they never set settled_exchange_every), and a settled
// window starts on a block boundary, so it is the block probes are planned for.
void WindowExchange::close(bool quiet) {
  decided_ += window_;
  quiet_calls_ = quiet ? std::min(quiet_calls_ + window_, period_) : 0;  // only >= P matters (no overflow)
  if (filled_ != decided_) return;
  if (quiet_calls_ < period_) window_ = converging_window_;
  else if (decided_ % settled_window_ == 0 && decided_ % period_ == 0) window_ = settled_window_;
}

}  // namespace stragglar::detail::auto_policy
