#include "runtime/auto/late_detector.hpp"

#include <algorithm>
#include <limits>

#include "runtime/auto/stats.hpp"

namespace stragglar::detail::auto_policy {

LateDetector::LateDetector(const PolicyConfig& c)
    : nranks_(c.nranks),
      period_(c.period),
      first_call_synchronised_(c.first_call_synchronised),
      min_delay_fraction_(c.min_delay_fraction),
      min_delay_s_(c.min_delay_s),
      max_late_sets_(c.max_late_sets) {
  // Every buffer at its final size now: deciding makes no heap allocation later.
  const std::size_t P = static_cast<std::size_t>(c.period), N = static_cast<std::size_t>(c.nranks);
  for (auto* v : {&gap_, &exposed_}) v->reserve(P);
  for (auto* v : {&work_, &values_}) v->reserve(std::max(P, N));
  late_per_call_.reserve(P);
  recent_late_.reserve(P + 1);
  recent_gap_.reserve(P + 1);
  count_.reserve(N);
  score_.reserve(N);
  const std::size_t half = std::max<std::size_t>(1, N / 2);  // a late set has at most n/2 ranks
  recent_set_ranks_.resize(P * half);
  recent_set_size_.assign(P, 0);
  recent_set_gap_.assign(P, 0.0);
  // Learned sets in place too: learning one allocates nothing (its plans are the core's).
  learned_ranks_.resize(static_cast<std::size_t>(c.max_late_sets) * half);
  learned_size_.reserve(static_cast<std::size_t>(c.max_late_sets));
  set_order_.reserve(N);
  window_set_slot_.reserve(P);
  // The caller's hint (else the API's default, rank n-1) until a late rank is measured.
  target_ = c.initial_straggler >= 0 ? c.initial_straggler : c.nranks - 1;
  scores_.assign(N, 0.0);
}

bool LateDetector::significant_gap(double gap_s, double exposed_s) const {
  return gap_s > 0 && gap_s >= std::max(min_delay_s_, min_delay_fraction_ * exposed_s);
}

std::span<const int> LateDetector::set(int index) const noexcept {
  if (index < 0) return {};
  const std::size_t stride = learned_ranks_.size() / static_cast<std::size_t>(max_late_sets_);
  return {learned_ranks_.data() + static_cast<std::size_t>(index) * stride,
          static_cast<std::size_t>(learned_size_[static_cast<std::size_t>(index)])};
}

std::span<const int> LateDetector::slot_set(std::size_t slot) const {
  const std::size_t stride = recent_set_ranks_.size() / static_cast<std::size_t>(period_);
  return {recent_set_ranks_.data() + slot * stride, static_cast<std::size_t>(recent_set_size_[slot])};
}

bool LateDetector::same_set(std::size_t slot, std::span<const int> set) const {
  const std::span<const int> s = slot_set(slot);
  return s.size() >= 2 && std::equal(s.begin(), s.end(), set.begin(), set.end());
}

std::optional<double> LateDetector::call_set_gap(int j, std::span<const int> told) const {
  const int slot = window_set_slot_[static_cast<std::size_t>(j)];
  if (slot >= 0 && same_set(static_cast<std::size_t>(slot), told)) return recent_set_gap_[static_cast<std::size_t>(slot)];
  return std::nullopt;
}

LateDetector::Arrival LateDetector::arrival(std::span<const std::int64_t> times, int slots, int call) const {
  const auto at = [&](int r) { return times[static_cast<std::size_t>(r * slots + call)]; };
  Arrival a{0, at(0), std::numeric_limits<std::int64_t>::max(), at(0)};
  for (int r = 1; r < nranks_; ++r) {
    const std::int64_t t = at(r);
    if (t < a.min1) a.min2 = a.min1, a.min1 = t, a.last = r;  // ties: the lowest rank
    else if (t < a.min2) a.min2 = t;
    a.max = std::max(a.max, t);
  }
  if (nranks_ == 1) a.min2 = a.min1;
  return a;
}

// The ring slot of the next voting call's late set (the oldest once the ring is full).
std::size_t LateDetector::next_set_slot() {
  if (recent_set_count_ < period_) return static_cast<std::size_t>((recent_set_head_ + recent_set_count_++) % period_);
  const auto slot = static_cast<std::size_t>(recent_set_head_);
  recent_set_head_ = (recent_set_head_ + 1) % period_;
  return slot;
}

void LateDetector::observe(std::span<const std::int64_t> times, int slots, int calls, std::int64_t first) {
  const auto W = static_cast<std::size_t>(calls);
  late_per_call_.assign(W, 0);
  gap_.assign(W, 0.0);
  exposed_.assign(W, 0.0);
  score_.assign(static_cast<std::size_t>(nranks_), 0.0);
  window_set_slot_.assign(W, -1);
  for (int j = 0; j < calls; ++j) {
    const Arrival a = arrival(times, slots, j);
    const auto uj = static_cast<std::size_t>(j);
    late_per_call_[uj] = a.last;
    exposed_[uj] = static_cast<double>(a.min1) * 1e-9;
    gap_[uj] = static_cast<double>(a.min2 - a.min1) * 1e-9;
    // A first call that follows a synchronisation says nothing about arrivals: no vote.
    if (first + j == 0 && first_call_synchronised_) continue;
    if (recent_late_.size() == static_cast<std::size_t>(period_)) {
      recent_late_.erase(recent_late_.begin());
      recent_gap_.erase(recent_gap_.begin());
    }
    recent_late_.push_back(significant_gap(gap_[uj], exposed_[uj]) ? a.last : -1);
    recent_gap_.push_back(gap_[uj]);
    const std::size_t set_slot = next_set_slot();
    double set_gap = 0;
    call_late_set(times, slots, j, exposed_[uj], set_slot, set_gap);
    recent_set_gap_[set_slot] = set_gap;
    window_set_slot_[uj] = static_cast<int>(set_slot);
    if (a.max > 0)
      for (int r = 0; r < nranks_; ++r)
        score_[static_cast<std::size_t>(r)] +=
            static_cast<double>(a.max - times[static_cast<std::size_t>(r * slots + j)]) / static_cast<double>(a.max) / calls;
  }
  std::copy(score_.begin(), score_.end(), scores_.begin());
}

// A call's late set (a slow node: its ranks late together). Ranks sorted by in-call time,
// shortest first (= latest arrival first): the set is the j ranks before the largest gap between
// neighbours, j in [1, n/2] — when that j is at least 2 and the gap is significant (the same rule
// as for one late rank). Written, ascending, into recent-set slot `slot`; returns its size.
int LateDetector::call_late_set(std::span<const std::int64_t> times, int slots, int call, double exposed_s,
                                std::size_t slot, double& gap_s) {
  const int n = nranks_, half = n / 2;
  const auto at = [&](int r) { return times[static_cast<std::size_t>(r * slots + call)]; };
  gap_s = 0;
  recent_set_size_[slot] = 0;
  if (half < 2) return 0;
  set_order_.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) set_order_[static_cast<std::size_t>(r)] = r;
  std::partial_sort(set_order_.begin(), set_order_.begin() + half + 1, set_order_.end(),
                    [&](int a, int b) { return at(a) != at(b) ? at(a) < at(b) : a < b; });
  int best_j = 0;
  std::int64_t best_gap = -1;
  for (int j = 1; j <= half; ++j) {
    const std::int64_t g = at(set_order_[static_cast<std::size_t>(j)]) - at(set_order_[static_cast<std::size_t>(j - 1)]);
    if (g > best_gap) best_gap = g, best_j = j;  // ties: the smallest set
  }
  const double g = static_cast<double>(best_gap) * 1e-9;
  if (best_j < 2 || !significant_gap(g, exposed_s)) return 0;
  const std::size_t stride = recent_set_ranks_.size() / static_cast<std::size_t>(period_);
  int* out = recent_set_ranks_.data() + slot * stride;
  std::copy(set_order_.begin(), set_order_.begin() + best_j, out);
  std::sort(out, out + best_j);
  recent_set_size_[slot] = best_j;
  gap_s = g;
  return best_j;
}

void LateDetector::vote() {
  vote_rank();
  vote_set();
}

// The late rank: late (by a significant margin) in most of the last P calls, and in at least two
// of them (one late call is no persistent straggler: it is never chased). Otherwise none is named,
// and the straggler told to StragglAR stays where it was (hysteresis).
void LateDetector::vote_rank() {
  const std::size_t recent = recent_late_.size();  // the last P calls (fewer at first)
  const int voters = static_cast<int>(recent);
  count_.assign(static_cast<std::size_t>(nranks_), 0);
  significant_ = 0;
  for (std::size_t j = 0; j < recent; ++j)
    if (const int who = recent_late_[j]; who >= 0) ++count_[static_cast<std::size_t>(who)], ++significant_;
  late_ = -1;
  for (int r = 0; r < nranks_; ++r)
    if (2 * votes(r) > voters && votes(r) >= std::min(2, period_)) late_ = r;
  // StragglAR's straggler moves to the late rank only when the current one is late in less than
  // half as many of the last P calls: two stragglers that alternate keep it on one of them
  // (right every other call, as StragglAR told either would be) instead of always one call behind.
  if (late_ >= 0 && late_ != target_ && 2 * votes(target_) < votes(late_)) target_ = late_;
  delay_s_ = lower_median(recent_gap_, work_);
  // The overlap a straggler-using candidate gets with the current target: the median delay of the
  // last P calls in which the target was the last to arrive, and the fraction of those calls (its
  // persistence: a straggler that does not persist is not worth chasing).
  values_.clear();
  for (std::size_t j = 0; j < recent; ++j)
    if (recent_late_[j] == target_) values_.push_back(recent_gap_[j]);
  delay_target_ = values_.empty() ? 0.0 : lower_median(values_, work_);
  persistence_ = recent ? static_cast<double>(values_.size()) / static_cast<double>(recent) : 0.0;
}

int LateDetector::learn(std::span<const int> s) {
  const int learned = static_cast<int>(learned_size_.size());
  for (int i = 0; i < learned; ++i)
    if (std::ranges::equal(s, set(i))) return i;
  if (learned >= max_late_sets_) return -1;  // beyond the bound: not chased
  const std::size_t stride = learned_ranks_.size() / static_cast<std::size_t>(max_late_sets_);
  std::ranges::copy(s, learned_ranks_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(learned) * stride));
  learned_size_.push_back(static_cast<int>(s.size()));
  return learned;
}

int LateDetector::set_votes(int index) const {
  int c = 0;
  for (int m = 0; index >= 0 && m < recent_set_count_; ++m) c += same_set(slot_at(m), set(index)) ? 1 : 0;
  return c;
}

// The late set: the same rules as for one rank. A set of 2+ ranks late together (identical sets)
// in most of the last P calls and in at least two is the late set; it is learned (at most
// max_late_sets) and becomes the target of stragglar-k / hierarchical when the current target set
// is late in less than half as many calls. Random late pairs never reach a majority: they are not
// chased. Every input is exchanged data, so every rank learns the same sets in the same order.
void LateDetector::vote_set() {
  late_set_ = -1;
  late_set_count_ = 0;
  for (int i = 0; i < recent_set_count_ && late_set_count_ == 0; ++i) {
    const std::size_t si = slot_at(i);
    if (recent_set_size_[si] < 2) continue;
    const std::span<const int> candidate = slot_set(si);
    int same = 0;
    for (int m = 0; m < recent_set_count_; ++m) same += same_set(slot_at(m), candidate) ? 1 : 0;
    if (2 * same > recent_set_count_ && same >= std::min(2, period_)) {
      late_set_count_ = same;
      late_set_ = learn(candidate);
    }
  }
  if (late_set_ >= 0 && late_set_ != target_set_ && 2 * set_votes(target_set_) < late_set_count_) target_set_ = late_set_;
  values_.clear();
  for (int m = 0; target_set_ >= 0 && m < recent_set_count_; ++m)
    if (same_set(slot_at(m), set(target_set_))) values_.push_back(recent_set_gap_[slot_at(m)]);
  delay_set_ = values_.empty() ? 0.0 : lower_median(values_, work_);
  set_persistence_ =
      recent_set_count_ ? static_cast<double>(values_.size()) / static_cast<double>(recent_set_count_) : 0.0;
}

}  // namespace stragglar::detail::auto_policy
