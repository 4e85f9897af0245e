// ArrivalChoice: graces from the model, and what a call without its late ranks runs
// (arrival_choice.hpp).
#include "runtime/arrival_choice.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace stragglar::detail {

namespace {

bool candidate(const std::vector<Algorithm>& list, Algorithm a) {
  return std::find(list.begin(), list.end(), a) != list.end();
}

// Never wait less than this fraction of the symmetric call: arrival jitter is not a straggler.
constexpr double kMinGraceFraction = 0.02, kMinGraceS = 5e-6;
// Two late ranks at most are told to stragglar-k; more wait (the symmetric schedule).
constexpr int kMaxLate = 2;

}  // namespace

ArrivalChoice::ArrivalChoice(int nranks, const Predictor& predict, const std::vector<Algorithm>& candidates)
    : n_(nranks), recent_late_(kRecent, -1), window_(static_cast<std::size_t>(kWindow) * static_cast<std::size_t>(nranks)),
      late_count_(static_cast<std::size_t>(nranks)), delay_s_(kWindow, 0.0), row_last_(kWindow, -1),
      last_count_(static_cast<std::size_t>(nranks)), scores_(static_cast<std::size_t>(nranks)) {
  window_set_.reserve(static_cast<std::size_t>(nranks));
  const double late_for_ever = 1e4;
  double symmetric = INFINITY;
  for (Algorithm a : {Algorithm::ring, Algorithm::rhd})
    if (candidate(candidates, a)) {
      const double t = predict(Choice{a, -1}, 0.0);
      if (std::isfinite(t) && t > 0) symmetric = std::min(symmetric, t);
    }
  const double floor = std::max(kMinGraceS, kMinGraceFraction * symmetric);
  for (int k = 1; k <= std::min(kMaxLate, nranks / 2); ++k) {
    std::vector<int> last(static_cast<std::size_t>(k));
    std::iota(last.begin(), last.end(), nranks - k);  // any k ranks: the model is symmetric in them
    const Choice c = k == 1 ? Choice{Algorithm::stragglar, nranks - 1} : Choice{Algorithm::stragglar_k, -1, last};
    double grace = INFINITY;
    if (candidate(candidates, c.algorithm) && std::isfinite(symmetric)) {
      const double worst = predict(c, 0.0), best = predict(c, late_for_ever);
      if (std::isfinite(worst) && std::isfinite(best) && best < symmetric) grace = std::max(floor, worst - symmetric);
    }
    grace_s_.push_back(grace);
  }
}

std::optional<Choice> ArrivalChoice::arrive(ArrivalTickets& tickets, double timeout_s) {
  const ArrivalDecision d = tickets.arrive_next(grace_s_, timeout_s, expected_late_);
  ++calls_;
  // Which single rank was late, in the same order on every rank: every rank reads the same
  // decisions, so every rank expects the same rank next.
  recent_late_[static_cast<std::size_t>(recent_pos_)] = d.late.size() == 1 ? d.late.front() : -1;
  recent_pos_ = (recent_pos_ + 1) % kRecent;
  note_window(d);
  expected_late_ = -1;
  for (int r : recent_late_)
    if (r >= 0 && 2 * std::count(recent_late_.begin(), recent_late_.end(), r) > kRecent) expected_late_ = r;
  if (d.all_in_time) return std::nullopt;
  ++late_calls_;
  if (d.late.size() == 1) return Choice{Algorithm::stragglar, d.late.front()};
  auto known = std::find_if(sets_.begin(), sets_.end(), [&](const std::vector<int>& s) {
    return std::equal(s.begin(), s.end(), d.late.begin(), d.late.end());
  });
  if (known == sets_.end()) {
    if (sets_.size() == kMaxSets) {
      --late_calls_;
      return std::nullopt;  // the symmetric choice, which waits for the set
    }
    known = sets_.insert(sets_.end(), std::vector<int>(d.late.begin(), d.late.end()));
  }
  return Choice{Algorithm::stragglar_k, -1, *known};
}

void ArrivalChoice::note_window(const ArrivalDecision& d) {
  const auto n = static_cast<std::size_t>(n_);
  const auto pos = static_cast<std::size_t>(window_pos_);
  if (window_fill_ > 0) {  // the previous row's late ranks have all arrived since
    const auto previous = static_cast<std::size_t>((window_pos_ + kWindow - 1) % kWindow);
    delay_s_[previous] = d.previous_delay_s;
    row_last_[previous] = d.previous_last_late;
    if (d.previous_last_late >= 0) ++last_count_[static_cast<std::size_t>(d.previous_last_late)];
  }
  delay_s_[pos] = 0;
  if (row_last_[pos] >= 0) --last_count_[static_cast<std::size_t>(row_last_[pos])];
  row_last_[pos] = -1;
  std::uint8_t* row = window_.data() + pos * n;
  for (std::size_t r = 0; r < n; ++r) late_count_[r] -= row[r];
  std::fill(row, row + n, std::uint8_t{0});
  for (int r : d.late) {
    row[static_cast<std::size_t>(r)] = 1;
    ++late_count_[static_cast<std::size_t>(r)];
  }
  window_pos_ = (window_pos_ + 1) % kWindow;
  window_fill_ = std::min(window_fill_ + 1, kWindow);
  window_set_.clear();
  for (std::size_t r = 0; r < n; ++r) {
    scores_[r] = static_cast<double>(late_count_[r]) / window_fill_;
    if (2 * late_count_[r] > window_fill_) window_set_.push_back(static_cast<int>(r));
  }
  // The late rank: of those, the one late most often, then the one that came last of its call's
  // late ranks most often; none on a tie. (On a host with more ranks than CPUs, a rank the
  // scheduler delays can be late beside a persistent straggler in most calls.)
  window_late_rank_ = -1;
  bool tie = false;
  const auto key = [this](int r) {
    return std::pair{late_count_[static_cast<std::size_t>(r)], last_count_[static_cast<std::size_t>(r)]};
  };
  for (int r : window_set_) {
    if (window_late_rank_ < 0 || key(r) > key(window_late_rank_)) window_late_rank_ = r, tie = false;
    else if (key(r) == key(window_late_rank_)) tie = true;
  }
  if (tie) window_late_rank_ = -1;
  if (window_set_.size() == 1) window_set_.clear();
}

double ArrivalChoice::window_delay_s() const {
  std::vector<double> measured;
  for (double d : delay_s_)
    if (d > 0) measured.push_back(d);
  if (measured.empty()) return 0;
  const auto mid = measured.begin() + static_cast<std::ptrdiff_t>(measured.size() / 2);
  std::nth_element(measured.begin(), mid, measured.end());
  return *mid;
}

}  // namespace stragglar::detail
